"""What a wheel carries: its pages rendered by ``docs/render.py`` (each include in place), and
beside them what ``setup.py``'s ``documentation()`` lists (the files a build copies): every page
reads from that alone, and the examples and configs a user runs or copies are listed by
``diagevo docs`` with their paths (tests/test_fresh_install.py does the same from an installed
wheel, in the slow tier)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from diagevo.docs import pages as docs_pages
from docs import render
from tests.scripts import load_script
from tests.test_cli_memory import assert_one_line_error, run_cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {"examples/verl_round.sh", "examples/verl_round_trip.py", "examples/external_trainer.py"}
EXAMPLES |= {"examples/trl_grpo_trainer.py"}


def shipped() -> set[str]:
    """The files a built package carries beside its pages, as ``setup.py`` lists them (its
    ``setup()`` not run)."""
    return {p.as_posix() for p in load_script("setup.py", "diagevo_setup").documentation()}


def test_every_include_of_every_page_is_in_place_in_the_page_a_wheel_carries() -> None:
    """The includes are rendered in when the wheel is built: a wheel carries no file for its pages
    to read (the changelog's ``CHANGELOG.md`` once travelled beside them)."""
    includes = {
        (page.relative_to(ROOT / "docs").with_suffix("").as_posix(), found)
        for page in (ROOT / "docs").rglob("*.md")
        for found in docs_pages.SNIPPET.findall(page.read_text(encoding="utf-8"))
    }
    assert ("how-to/verl", "examples/verl_round.sh") in includes and ("changelog", "CHANGELOG.md") in includes
    for page, name in includes:
        assert (ROOT / name).read_text(encoding="utf-8") in render.render(page), (page, name)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files of ``documentation()`` laid out as a wheel's ``diagevo/docs/packaged/``, the pages
    rendered there as ``setup.py`` renders them."""
    top = tmp_path_factory.mktemp("packaged")
    for name in shipped():
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, top / name)
    assert render.main([str(top / "docs")]) == 0
    return top


@pytest.fixture
def wheel_layout(rendered: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """:func:`rendered`, read as the pages a wheel carries."""
    monkeypatch.setattr(docs_pages, "PACKAGED", rendered)
    return rendered


def test_every_page_renders_from_what_the_wheel_ships(wheel_layout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    listing = docs_pages.pages()
    assert not listing.checkout and listing.folder == wheel_layout / "docs"
    names = [p.name for p in listing.pages]
    assert "how-to/verl" in names and len(names) > 20
    for name in names:
        code, out, err = run_cli(capsys, "docs", name)
        assert code == 0 and out == (wheel_layout / "docs" / f"{name}.md").read_text(encoding="utf-8"), (name, err)
        assert docs_pages.UNRENDERED not in out and not docs_pages.MARKER.search(out), name  # read as rendered
    verl = run_cli(capsys, "docs", "how-to/verl")[1]
    assert "bash verl_round.sh" in verl and "--8<--" not in verl  # the script's own text, included


def test_docs_lists_the_shipped_examples_and_configs_with_their_paths(
    wheel_layout: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # a path on one line
    code, out, err = run_cli(capsys, "docs", "--json")
    assert code == 0, err
    files = {f["name"]: f["path"] for f in json.loads(out)["files"]}
    carried = {n for n in shipped() if n.startswith(("examples/", "configs/"))}
    assert EXAMPLES <= set(files) and {"configs/verl/solver.yaml", "configs/sim.toml"} <= set(files)
    assert set(files) == carried
    assert all(files[n] == str(wheel_layout / n) for n in files)
    code, out, _ = run_cli(capsys, "docs")
    shown = " ".join(out.split())
    assert code == 0 and f"examples/verl_round.sh {wheel_layout / 'examples' / 'verl_round.sh'}" in shown
    assert 'cp "$(diagevo docs --path examples/verl_round.sh)" .' in shown


def test_docs_path_of_a_shipped_file_prints_the_installed_file(
    wheel_layout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``cp "$(diagevo docs --path examples/verl_round.sh)" .`` copies the installed script."""
    for name in ("examples/verl_round.sh", "configs/verl/solver.yaml", "./configs/sim.toml"):
        code, out, err = run_cli(capsys, "docs", "--path", name)
        assert (code, out) == (0, f"{wheel_layout / name.removeprefix('./')}\n"), err
    code, out, _ = run_cli(capsys, "docs", "configs/verl/solver.yaml")
    assert code == 0 and out == (ROOT / "configs" / "verl" / "solver.yaml").read_text(encoding="utf-8")
    code, out, _ = run_cli(capsys, "docs", "examples/verl_round_trip.py", "--json")
    assert code == 0 and json.loads(out)["path"] == str(wheel_layout / "examples" / "verl_round_trip.py")
    code, _, err = run_cli(capsys, "docs", "--path", "examples/verl_round.s")
    assert_one_line_error(code, err, "no page or file 'examples/verl_round.s' (did you mean 'examples/verl_round.sh'")
    code, _, err = run_cli(capsys, "docs", "--path", "examples/__init__.py")  # not a file to run or copy
    assert code != 0 and "no page or file" in err


def test_a_checkout_lists_the_files_a_wheel_ships() -> None:
    """``FILES`` and ``setup.py``'s list are one rule: a checkout lists what its wheel would carry."""
    carried = {n for n in shipped() if n.startswith(("examples/", "configs/"))}
    listed = {f.name: f.path for f in docs_pages.pages().files}
    assert set(listed) == carried and EXAMPLES <= carried
    assert all(path == ROOT / name for name, path in listed.items())


def test_the_pages_and_headers_name_the_shipped_files_as_diagevo_docs_finds_them() -> None:
    """No page, verl config header or script header sends a user to the repository for a file
    diagevo ships, nor to a ``configs/verl`` below the current directory."""
    said = {
        p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
        for p in [*(ROOT / "docs").rglob("*.md"), *(ROOT / "configs" / "verl").glob("*.yaml")]
    }
    said["examples/verl_round.sh"] = (ROOT / "examples" / "verl_round.sh").read_text(encoding="utf-8")
    for name, content in said.items():
        assert "in diagevo's repository" not in content and '"$PWD/configs' not in content, name
        assert "python examples/" not in content and "bash examples/" not in content, name
    for name in ("configs/verl/solver.yaml", "configs/verl/challenger.yaml"):
        assert f'--config-path "$(dirname "$(diagevo docs --path {name})")"' in said[name]
    assert 'cp "$(diagevo docs --path examples/verl_round.sh)" .' in said["examples/verl_round.sh"]
    assert 'cp "$(diagevo docs --path examples/verl_round.sh)" .' in said["docs/how-to/verl.md"]


def test_the_verl_pointers_name_a_page_and_a_script_that_a_wheel_carries(wheel_layout: Path) -> None:
    """``export verl --help``, ``diagnose --help`` and ``diagevo.verl``'s docstring send a user to
    the verl page; that page and the script they name are among what a wheel carries."""
    import diagevo.verl
    from diagevo.cli import examples

    assert examples.EXAMPLES["export verl"][1] == "how-to/verl"
    assert "diagevo docs how-to/verl" in (diagevo.verl.__doc__ or "")
    assert "diagevo docs --path examples/verl_round.sh" in (diagevo.verl.__doc__ or "")
    assert docs_pages.find("how-to/verl").path == wheel_layout / "docs" / "how-to" / "verl.md"
    assert docs_pages.shipped_file("examples/verl_round.sh") is not None
