"""The outputs the pages show are produced by ``docs/figures.py``: each marked block belongs to
a generator, the fast blocks are regenerated here and must equal what is committed, and the check
fails, naming the block and the number, when a committed block was edited by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parent.parent


def load() -> ModuleType:
    return load_script("docs/figures.py", "docs_figures")


def test_every_marked_block_has_a_generator_and_every_generator_a_block() -> None:
    figures = load()
    found = {}
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for name in figures.blocks(page.read_text(encoding="utf-8")):
            found[name] = page.relative_to(ROOT / "docs").as_posix() if page.name != "README.md" else "README.md"
    assert found == {name: g.page for name, g in figures.GENERATORS.items()}
    for name in figures.GENERATORS:
        page = figures.page_path(figures.GENERATORS[name].page).read_text(encoding="utf-8")
        assert figures.blocks(page)[name].strip(), f"{name}: empty block (run make docs-figures)"


def test_the_fast_blocks_are_up_to_date() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "figures.py"), "--check", "--fast"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "up to date" in done.stdout


def test_the_check_fails_on_a_number_edited_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = load()
    page = tmp_path / "getting-started.md"
    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    edited = text.replace("batches.challenger_questions     64", "batches.challenger_questions     65", 1)
    assert edited != text
    page.write_text(edited, encoding="utf-8")
    monkeypatch.setattr(figures, "page_path", lambda name: page)
    (stale,) = figures.run(["train-plan"], check=True)
    assert stale.startswith("stale block train-plan in getting-started.md")
    assert "-  batches.challenger_questions     65" in stale and "+  batches.challenger_questions     64" in stale
    assert page.read_text(encoding="utf-8") == edited  # the check writes nothing
    assert figures.run(["train-plan"], check=False) == []  # regenerating repairs it
    assert page.read_text(encoding="utf-8") == text


@pytest.mark.slow
def test_the_slow_blocks_are_up_to_date() -> None:
    """The blocks that take minutes (``make docs-figures ARGS=--check`` runs them too)."""
    figures = load()
    slow = [name for name, g in figures.GENERATORS.items() if not g.fast]
    assert slow
    assert figures.run(slow, check=True) == []
