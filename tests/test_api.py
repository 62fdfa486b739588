"""The public API (``import diagevo``): every exported name resolves, none hides a submodule,
and a round reads M_{t-1} once however many steps it takes."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import diagevo
from diagevo import rounds
from diagevo.rounds import round as round_module

ROOT = Path(__file__).resolve().parent.parent


def test_every_exported_name_resolves_and_none_is_a_submodule() -> None:
    submodules = {m.name for m in pkgutil.iter_modules(diagevo.__path__)}
    for name in diagevo.__all__:
        assert getattr(diagevo, name) is not None, name
        assert name not in submodules, f"diagevo.{name} would hide (or be hidden by) the submodule"
    assert issubclass(diagevo.Conflict, diagevo.DiagevoError)
    assert diagevo.Round is rounds.Round and callable(diagevo.open_store)
    with pytest.raises(AttributeError):
        diagevo.no_such_name  # noqa: B018


def test_import_diagevo_is_cheap() -> None:
    """The package imports nothing heavy until a name is used (each ``diagevo.x`` import runs it)."""
    code = (
        "import sys, diagevo; print(sorted(m for m in sys.modules if m.startswith(('diagevo.', 'sqlalchemy', "
        "'pydantic'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]", out


def test_a_round_reads_its_config_and_previous_memory_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"memory": 0, "config": 0}
    load, config = round_module.load_memory, round_module.run_config

    def counted_load(store, run, at_round=None, **kw):  # type: ignore[no-untyped-def]
        if at_round is not None:
            calls["memory"] += 1
        return load(store, run, at_round, **kw)

    def counted_config(store, run):  # type: ignore[no-untyped-def]
        calls["config"] += 1
        return config(store, run)

    monkeypatch.setattr(round_module, "load_memory", counted_load)  # what Round reads through
    monkeypatch.setattr(round_module, "run_config", counted_config)
    with diagevo.open_store(f"sqlite:///{tmp_path / 'x.db'}") as store:
        diagevo.start_run(store, "r", diagevo.Config())
        rnd = diagevo.Round.open(store, "r")
        for purpose in ("challenger", "curriculum", "curriculum"):
            reqs = rnd.requests(3, purpose=purpose)
        rnd.record(
            [diagevo.Candidate(question_id=q.question_id, mode=q.mode, text="1 + 1?", answers=("2",) * 8) for q in reqs]
        )
        rnd.promote()
        rnd.commit()
    assert calls == {"memory": 1, "config": 1}
