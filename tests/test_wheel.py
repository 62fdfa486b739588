"""The built wheel installs one package, ``diagevo``, and works without the checkout: the CLI
(``diagevo.cli``) runs and ``diagevo db upgrade`` finds the migrations (``diagevo.migrations``)
inside the installed package."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.wheels import REQUIRED, build_wheel, checkout_version

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def test_the_wheel_holds_one_top_level_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"diagevo"}
    assert [n for n in REQUIRED if n not in names] == []
    assert any(n.startswith("diagevo/migrations/versions/0001_") for n in names)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "diagevo = diagevo.cli.app:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_the_installed_wheel_migrates_a_database_away_from_the_checkout(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DIAGEVO_DB")}
    env["PYTHONPATH"] = str(site)  # the wheel's files before the checkout's editable install
    code = (
        "import sys, diagevo; sys.argv[0] = 'diagevo'; "
        f"assert diagevo.__file__.startswith({str(site)!r}), diagevo.__file__; "
        "from diagevo.cli.app import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "db", "upgrade", "--db", "sqlite:///w.db"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    current = subprocess.run(
        [sys.executable, "-c", code, "db", "current", "--db", "sqlite:///w.db"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert current.returncode == 0 and "head" in current.stdout.lower(), current.stdout + current.stderr


def _installed_beside(wheel: Path, env: Path) -> tuple[Path, str]:
    """The wheel installed by pip into a fresh venv whose dependencies are this one's (a .pth
    file); the venv and its site-packages."""
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    py = env / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(wheel)]
    subprocess.run(pip, check=True, capture_output=True)
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
    ).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return env, site


def test_a_wheel_user_is_told_fixes_for_a_wheel(wheel: Path, tmp_path: Path) -> None:
    """Installed by pip into a fresh environment (its dependencies: this one's, by a .pth file),
    ``diagevo doctor`` and a refused ``train`` name ``pip install 'diagevo[...]=='``, never a
    checkout's ``pip install -e``, ``make`` or ``source .venv/bin/activate``."""
    import json

    env, site = _installed_beside(wheel, tmp_path / "env")
    py = env / "bin" / "python"
    work = tmp_path / "work"
    work.mkdir()
    env_vars = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DIAGEVO_DB", "VIRTUAL_ENV")}
    env_vars["PATH"] = "/usr/bin:/bin"
    exe = str(env / "bin" / "diagevo")
    where = subprocess.run(
        [str(py), "-c", "from diagevo.errors.installation import installation as i; print(i().kind, i().version)"],
        cwd=work,
        env=env_vars,
        capture_output=True,
        text=True,
    )
    assert where.stdout.split() == ["wheel", checkout_version()], where.stdout + where.stderr
    done = subprocess.run([exe, "doctor", "--json"], cwd=work, env=env_vars, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    fixes = {c["name"]: c["fix"] for c in json.loads(done.stdout)["checks"] if c["fix"]}
    assert fixes["diagevo on PATH"] == f"source {env}/bin/activate"
    for name, fix in fixes.items():
        assert not any(s in fix for s in (" -e ", "make ", ".venv", "requirements/")), (name, fix)
    refused = subprocess.run(
        [exe, "train", "--config", str(ROOT / "configs" / "smollm2-cpu.toml"), "--db", "sqlite:///w.db"],
        cwd=work,
        env=env_vars,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert "no model directory models/smollm2" in refused.stderr and "models smollm2 --out" in refused.stderr
    assert not any(s in refused.stderr for s in (" -e ", "make ", ".venv")), refused.stderr
    model = tmp_path / "model"  # gpu-check reads its config from the package, then wants CUDA
    model.mkdir()
    (model / "config.json").write_text("{}")
    refused = subprocess.run(
        [exe, "gpu-check", "--model", str(model), "--out", "check"],
        cwd=work,
        env=env_vars,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 1 and "no CUDA device" in refused.stderr, refused.stderr  # Unavailable
    assert list(work.iterdir()) == []


def test_the_installed_wheel_writes_a_report(wheel: Path, tmp_path: Path) -> None:
    """The report's templates are package data: the wheel's own render the page, away from the checkout."""
    from tests.logs import Log

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    log = Log(run="w")
    log.node("N1", "label <b>").cause("C1", "N1", "forgets the <domain>").attribute("C1", "f1").commit()
    (tmp_path / "w.jsonl").write_text(log.jsonl(), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DIAGEVO_DB")}
    env["PYTHONPATH"] = str(site)
    code = (
        "import sys, diagevo.report.html as h; sys.argv[0] = 'diagevo'; "
        f"assert h.__file__.startswith({str(site)!r}), h.__file__; "
        f"assert h.environment().get_template('run.html').filename.startswith({str(site)!r}); "
        "from diagevo.cli.app import main; main()"
    )
    for args in (["memory", "ingest", "w.jsonl"], ["report", "--run", "w", "-o", "w.html"]):
        done = subprocess.run(
            [sys.executable, "-c", code, *args, "--db", "sqlite:///w.db"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
    page = (tmp_path / "w.html").read_text(encoding="utf-8")
    assert '<section id="causes">' in page and "forgets the &lt;domain&gt;" in page


def test_the_wheel_carries_the_pages_rendered_and_neither_project_files_nor_generators(wheel: Path) -> None:
    """``docs/``'s pages rendered when the wheel is built (issue 93, item 4): each the text
    ``docs/render.py`` renders from this code, its references built and its includes in place;
    beside them their pictures, the configs and the examples. No file of the project travels
    (``pyproject.toml``, ``CHANGELOG.md``: the changelog page holds its text), nor the generators
    or the docs' other Python tools: the package holds the pages' reader alone, and no module of
    it names ``pyproject.toml`` but the one that tells a checkout by it."""
    from docs import render

    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    packaged = "diagevo/docs/packaged/"
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")}
    pictures = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs" / "img").iterdir()}
    assert len(pages) > 20 and pictures
    configs = {p.relative_to(ROOT).as_posix() for p in (*ROOT.glob("configs/*.toml"), *ROOT.glob("configs/*/*.yaml"))}
    assert "configs/sim.toml" in configs  # train's default in every installation
    examples = {p.relative_to(ROOT).as_posix() for p in (*ROOT.glob("examples/*.py"), *ROOT.glob("examples/*.sh"))}
    examples.discard("examples/__init__.py")
    assert "examples/verl_round.sh" in examples  # the verl page includes it
    assert {n for n in names if n.startswith(packaged)} == {
        packaged + n for n in (*pages, *pictures, *configs, *examples)
    }
    assert not [n for n in names if n.rpartition("/")[2] in ("pyproject.toml", "CHANGELOG.md")]
    for page in sorted(pages):
        shown = archive.read(packaged + page).decode("utf-8")
        assert shown == render.render(page.removeprefix("docs/").removesuffix(".md")), page
    assert "## diagevo memory why\n" in archive.read(packaged + "docs/reference/cli.md").decode("utf-8")
    assert "## [Unreleased]" in archive.read(packaged + "docs/changelog.md").decode("utf-8")
    tools = ("docs/hooks.py", "docs/figures.py", "docs/pictures.py", "docs/griffe_roles.py", "docs/render.py")
    assert not any(n.endswith(tools) or n.startswith("docs/") for n in names)
    assert not any(
        n.startswith(packaged) and n.endswith(".py") and not n.startswith(packaged + "examples/") for n in names
    )
    reader = {n for n in names if n.startswith("diagevo/docs/") and not n.startswith(packaged)}
    assert reader == {"diagevo/docs/__init__.py", "diagevo/docs/pages.py"} and "diagevo/cli/docs.py" in names
    naming = [n for n in names if n.endswith(".py") and not n.startswith(packaged) and b"pyproject" in archive.read(n)]
    assert naming == ["diagevo/errors/installation.py"]


def test_a_wheel_user_reads_every_page_with_its_references_built(wheel: Path, tmp_path: Path) -> None:
    """Installed by pip into a fresh environment, away from the checkout: ``diagevo docs`` lists
    the packaged pages, prints the references rendered when the wheel was built (a page is its
    file, the one ``--path`` names; no project file lies beside them), and every help's ``More:``
    runs there."""
    import json

    env, site = _installed_beside(wheel, tmp_path / "env")
    work = tmp_path / "work"
    work.mkdir()
    env_vars = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DIAGEVO_DB", "VIRTUAL_ENV")}
    exe = str(env / "bin" / "diagevo")

    def docs(*args: str) -> str:
        done = subprocess.run([exe, *args], cwd=work, env=env_vars, capture_output=True, text=True)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    listing = json.loads(docs("docs", "--json"))
    folder = Path(site) / "diagevo" / "docs" / "packaged" / "docs"
    assert listing["folder"] == str(folder) and listing["checkout"] is False and listing["site"] is None
    expected = {p.relative_to(ROOT / "docs").with_suffix("").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert {p["name"] for p in listing["pages"]} == expected
    assert docs("docs", "how-to/audit", "--path") == f"{folder / 'how-to' / 'audit.md'}\n"
    cli = Path(docs("docs", "reference/cli", "--path").strip())
    assert cli == folder / "reference" / "cli.md" and docs("docs", "reference/cli") == cli.read_text(encoding="utf-8")
    assert not [p for p in Path(site).rglob("*") if p.name in ("pyproject.toml", "CHANGELOG.md")]
    for page, shown in [
        ("reference/configuration", "### `[memory]`"),
        ("reference/python-api", "### diagevo.open_store"),
        ("reference/cli", "More: [`diagevo docs how-to/audit`](../how-to/audit.md)"),
        ("reference/errors", "- `diagevo.NotFound` (`diagevo.errors`):"),
        ("contributing", "config.sections : config.limits"),
        ("changelog", "## [Unreleased]"),
    ]:
        out = docs("docs", page)
        assert shown in out and "<!-- generated:" not in out.replace("`<!-- generated: NAME -->`", ""), page
    help_tail = docs("memory", "why", "--help").strip().splitlines()[-1].strip()
    assert help_tail == "More: diagevo docs how-to/audit"
    assert docs(*help_tail.split()[2:]).startswith("# Audit why a cause was reactivated")
    assert list(work.iterdir()) == []
