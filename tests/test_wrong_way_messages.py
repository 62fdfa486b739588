"""Issue 83: messages that pointed the wrong way each answer right in one line: ``round start
--set`` with the run's own values opens the round (it was refused with a fork to make), and a
value click refuses (``models tiny --steps 0``) is answered by its rule alone (it added a hint
about ``--out``, which was given)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_cli_memory import run_cli


def test_round_start_with_the_runs_own_values_opens_the_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ("--run", "r", "--db", f"sqlite:///{tmp_path / 'r.db'}")
    code, _, err = run_cli(capsys, "round", "start", *common, "--set", "memory.k=0.3")
    assert code == 0, err
    code, _, err = run_cli(capsys, "round", "promote", *common, "--allow-empty")
    assert code == 0, err
    code, _, err = run_cli(capsys, "round", "commit", *common)
    assert code == 0, err
    code, out, err = run_cli(capsys, "round", "start", *common, "--set", "memory.k=0.3")
    assert code == 0 and "round 2 is open" in out, err
    code, _, err = run_cli(capsys, "round", "start", *common, "--set", "memory.k=0.4")
    assert code == 1 and "memory fork --run r --round 1" in " ".join(err.split()), err


def test_a_value_refused_is_answered_by_its_rule_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "models", "tiny", "--steps", "0", "--out", str(tmp_path / "m"))
    assert code == 2 and "greater than or equal to 1" in err and "needs --out" not in err, err
    code, _, err = run_cli(capsys, "models", "tiny", "--steps", "3")
    assert code == 2 and "needs --out OUT" in err, err
