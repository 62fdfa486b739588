"""The built wheel installs one package, ``diagevo``, and works without the checkout: the CLI
(``diagevo.cli``) runs and ``diagevo db upgrade`` finds the migrations (``diagevo.migrations``)
inside the installed package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"  # a copy: setuptools writes build/ and *.egg-info/ beside the sources
    skip = shutil.ignore_patterns(".venv", ".git", "build", "site", "*.egg-info", "__pycache__", ".*_cache", "*.db*")
    shutil.copytree(ROOT, source, symlinks=True, ignore=skip)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(source), "-w", str(out)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("diagevo-*.whl")
    return built


def test_the_wheel_holds_one_top_level_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"diagevo"}
    assert "diagevo/cli/app.py" in names
    assert "diagevo/migrations/env.py" in names and "diagevo/migrations/script.py.mako" in names
    assert "diagevo/train/sim/families.toml" in names
    assert "diagevo/report/templates/run.html" in names and "diagevo/report/templates/sections/causes.html" in names
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
