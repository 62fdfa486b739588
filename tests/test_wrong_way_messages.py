"""Issue 83: messages that pointed the wrong way each answer right in one line: ``round start
--set`` with the run's own values opens the round (it was refused with a fork to make), and a
value click refuses (``models tiny --steps 0``) is answered by its rule alone (it added a hint
about ``--out``, which was given).

Issue 93: ``round withdraw`` after the commit names the committed round and what can be done (it
said to open a round); an unknown option is named alone with the nearest real one (it added the
required options, given); a what-if setting mistyped gets "did you mean" (it read "needs new model
calls, which needs new model calls"); a group's command typed at the top points to its group."""

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


def test_withdraw_after_the_commit_names_the_committed_round_and_the_way_to_redo_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ("--run", "r", "--db", f"sqlite:///{tmp_path / 'r.db'}")
    for _ in (1, 2):
        for step in (("start",), ("promote", "--allow-empty"), ("commit",)):
            code, _, err = run_cli(capsys, "round", *step, *common)
            assert code == 0, err
    code, _, err = run_cli(capsys, "round", "withdraw", "--batch", "3-4", *common)
    said = " ".join(err.split())
    assert code == 1 and "open one first" not in said, said
    assert "cannot withdraw batch 3-4: round 2 of run 'r' is committed" in said, said
    assert "fork the run from round 1 with `diagevo memory fork" in said, said


def test_an_unknown_option_is_named_alone_with_the_nearest_real_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "round", "withdraw", "--run", "r", "--batch", "1-2", "--raeson", "x")
    said = " ".join(err.split())
    assert code == 2 and "No such option: --raeson (did you mean --reason?)" in said, said
    assert "needs" not in said and "Possible options" not in said, said


def test_a_mistyped_whatif_setting_gets_did_you_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ("--run", "r", "--db", f"sqlite:///{tmp_path / 'r.db'}")
    for step in (("start",), ("promote", "--allow-empty"), ("commit",)):
        assert run_cli(capsys, "round", *step, *common)[0] == 0
    code, _, err = run_cli(capsys, "memory", "whatif", *common, "--set", "memory.thetaup=0.8")
    said = " ".join(err.split())
    assert code == 1 and "memory.thetaup: no such setting (did you mean 'memory.theta_up'?)" in said, said
    assert "model calls" not in said, said


@pytest.mark.parametrize(("typed", "meant"), [("events", "'memory events'"), ("upgrade", "'db upgrade'")])
def test_a_groups_command_typed_at_the_top_points_to_its_group(
    capsys: pytest.CaptureFixture[str], typed: str, meant: str
) -> None:
    code, _, err = run_cli(capsys, typed)
    assert code == 2 and f"No such command {typed!r} (did you mean {meant}?)" in " ".join(err.split()), err
