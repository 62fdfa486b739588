"""The API reference renders the Sphinx roles of the docstrings it shows as links to what it
shows (docs/griffe_roles.py), and a role naming something it does not show fails the build."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scripts import load_script

griffe = pytest.importorskip("griffe")

ROOT = Path(__file__).resolve().parents[1]


def _extension() -> object:
    return load_script("docs/griffe_roles.py", "griffe_roles").SphinxRoles()


def test_roles_become_links_to_what_the_reference_shows() -> None:
    pkg = griffe.load("diagevo", search_paths=[str(ROOT)], extensions=griffe.load_extensions(_extension()))
    round_doc = pkg["rounds.Round"].docstring.value
    assert "[`requests`][diagevo.rounds.Round.requests]" in round_doc and ":meth:" not in round_doc
    opening = pkg["api.open_store"].docstring.value
    assert "[`NotFound`][diagevo.errors.NotFound]" in opening


def test_a_role_naming_what_the_reference_does_not_show_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    import diagevo

    monkeypatch.delitem(diagevo._EXPORTS, "NotFound")
    with pytest.raises(griffe.GriffeError, match="NotFound` names nothing the API reference shows"):
        griffe.load("diagevo", search_paths=[str(ROOT)], extensions=griffe.load_extensions(_extension()))
