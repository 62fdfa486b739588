"""Progress in and out of a terminal: plain, rate-limited lines with counts, rate and ETA when
the output is a pipe or a file, so long commands are never silent."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from diagevo.cli.progress import PlainProgress
from diagevo.results.stats import RoundRow
from tests.test_cli_memory import run_cli
from tests.test_train import small_args


def test_plain_lines_are_rate_limited_with_count_rate_and_eta() -> None:
    now = [0.0]
    out = io.StringIO()
    p = PlainProgress(out, {"solver": "solver GRPO"}, every=10.0, clock=lambda: now[0])
    for step in range(0, 101):
        now[0] = step * 0.5  # 2 items a second, 50 s in all
        p("solver", step, 100)
    lines = out.getvalue().splitlines()
    assert lines[0] == "[    0s] solver GRPO 0/100"
    assert lines[1] == "[   10s] solver GRPO 20/100 (2.0/s, ETA 40s)"
    assert lines[-1] == "[   50s] solver GRPO 100/100 (2.0/s)"
    assert len(lines) == 6  # 0, 10, 20, 30, 40 s and the end at 50 s: not one line per step
    p("solver", 100, 100)
    assert len(out.getvalue().splitlines()) == 6  # the end is said once


def test_a_phase_slower_than_a_step_a_second_gives_seconds_a_step() -> None:
    now = [0.0]
    out = io.StringIO()
    p = PlainProgress(out, {"warm": "format warm-up"}, every=10.0, clock=lambda: now[0])
    for step in range(0, 5):
        now[0] = step * 22.0  # 22 s a step: "0.0/s" would say nothing
        p("warm", step, 24)
    assert out.getvalue().splitlines()[1:3] == [
        "[   22s] format warm-up 1/24 (22s/step, ETA 8m26s)",
        "[   44s] format warm-up 2/24 (22s/step, ETA 8m04s)",
    ]


def test_a_phase_that_starts_over_in_the_next_round_is_shown_at_once() -> None:
    now = [0.0]
    out = io.StringIO()
    p = PlainProgress(out, {"challenger": "challenger GRPO"}, every=10.0, clock=lambda: now[0])
    p("challenger", 0, 2)
    p("challenger", 2, 2)
    now[0] = 1.0  # round 2, within the 10 s of the last line: still its start and its end are shown
    p("challenger", 0, 2)
    p("challenger", 2, 2)
    assert out.getvalue().splitlines() == [
        "[    0s] challenger GRPO 0/2",
        "[    0s] challenger GRPO 2/2 (done)",
        "[    1s] challenger GRPO 0/2",
        "[    1s] challenger GRPO 2/2 (done)",
    ]


@pytest.mark.slow  # a simulator round
def test_train_into_a_pipe_prints_plain_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'p.db'}"
    args = [a for a in small_args(db, "p", 1, tmp_path) if a != "--quiet"]
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    assert "rounds 0/1" in err and "rounds 1/1" in err and "votes & filter" in err and "solver GRPO" in err
    assert "\x1b[" not in err  # no terminal control sequences in a log file


def test_the_round_table_leaves_columns_out_whole_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Paper-sized rounds (thousands of questions, F_t in the thousands) at 80 columns: every
    figure shown whole, never cut to ``80…``; the columns left out are named, the legend explains
    only the headers shown."""
    from diagevo.cli import train as train_cli
    from diagevo.cli.safe import make_console
    from diagevo.train.loop import RoundReport

    out = io.StringIO()
    monkeypatch.setattr(train_cli, "console", make_console(file=out, width=80))
    stats = RoundRow.from_row(
        {
            **{"round": 3, "active": 900, "mastered": 80, "nodes": 40, "retained": 5122, "questions": 8000},
            **{"failures": 40853, "new_causes": 1187, "promotions": 12, "reactivations": 103, "merges": 48},
            **{"F": 803193, "epsilon_next": 0.0123},
        }
    )
    report = RoundReport(3, stats, {"heldout_acc": 0.7891, "pseudo_label_acc": 0.9403}, {"solver": 2801.25})
    train_cli.print_round_table([report])
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in out.getvalue()
    row = next(line.split() for line in lines if line.strip().startswith("3 "))
    assert {"5122/8000", "803193", "0.012", "0.789"} <= set(row)
    left_out = next(line for line in lines if line.startswith("left out to fit 80 columns: "))
    shown = next(line.split() for line in lines if line.strip().startswith("t "))
    assert "merge" in left_out and "merge" not in shown and "memory stats --wide" in left_out
    assert ("react: reactivations" in out.getvalue()) == ("react" in shown)


def _round_table(monkeypatch: pytest.MonkeyPatch, width: int, labelled: bool) -> str:
    """The round table of two paper-sized rounds at ``width`` columns, the second with the
    label figures where ``labelled`` (the first never: a resumed run's earlier round)."""
    from diagevo.cli import train as train_cli
    from diagevo.cli.safe import make_console
    from diagevo.train.loop import RoundReport

    out = io.StringIO()
    monkeypatch.setattr(train_cli, "console", make_console(file=out, width=width))
    counts = {"active": 9, "mastered": 2, "nodes": 5, "retained": 51, "questions": 80, "failures": 40}
    counts |= {"new_causes": 11, "promotions": 1, "reactivations": 3, "merges": 4, "F": 80, "epsilon_next": 0.25}
    labels = {"retained_label_acc": 0.8, "wrong_reward_share": 0.05} if labelled else {}
    reports = [
        RoundReport(
            1,
            RoundRow.from_row({"round": 1, **counts}),
            {"heldout_acc": 0.5, "pseudo_label_acc": 0.75},
            {"solver": 2.0},
        ),
        RoundReport(
            2,
            RoundRow.from_row({"round": 2, **counts, **labels}),
            {"heldout_acc": 0.625, "pseudo_label_acc": 0.875},
            {"solver": 3.0},
        ),
    ]
    train_cli.print_round_table(reports)
    return out.getvalue()


def test_the_round_table_shows_the_label_figures_where_a_round_has_them(monkeypatch: pytest.MonkeyPatch) -> None:
    from diagevo.cli import train as train_cli

    out = _round_table(monkeypatch, 200, labelled=True)
    heads = next(line for line in out.splitlines() if line.strip().startswith("t "))
    assert heads.split() == [
        *("t", "kept", "fail", "new", "prom", "react", "merge", "F_t", "ε_t+1", "acc", "shared", "lab"),
        *("kept", "lab", "wrong+", "s"),
    ]
    rows = [line.split() for line in out.splitlines() if line.strip()[:2] in ("1 ", "2 ")]
    assert rows[0][-4:] == ["0.750", "–", "–", "2.0"]  # a round without them: a dash
    assert rows[1][-4:] == ["0.875", "0.800", "0.050", "3.0"]
    said = " ".join(out.split())  # the legend, wrapped at the terminal
    assert "kept lab: retained questions whose pseudo-label is right" in said
    assert "wrong+: positive rewards on wrong answers" in said
    assert "shared lab: pseudo-label accuracy on the shared questions (Fig. 3c)" in said
    # a world that knows no truth: the table as it always was, and no word of the figures
    out = _round_table(monkeypatch, 200, labelled=False)
    heads = next(line for line in out.splitlines() if line.strip().startswith("t "))
    assert heads.split() == " ".join(train_cli.ROUND_HEADS).split()
    assert "kept lab" not in out and "wrong+" not in out


def test_a_narrow_round_table_keeps_the_label_figures_after_label_accuracy(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 80 columns the columns are kept in the order of importance, the label figures right
    after the pseudo-label accuracy: the overall label accuracy before the merges."""
    out = _round_table(monkeypatch, 80, labelled=True)
    assert max(len(line) for line in out.splitlines()) <= 80
    shown = next(line for line in out.splitlines() if line.strip().startswith("t ")).split()
    left_out = next(line for line in out.splitlines() if line.startswith("left out to fit 80 columns: "))
    assert {"acc", "shared", "kept", "lab"} <= set(shown) and "merge" in left_out and "merge" not in shown
    assert ("wrong+" in shown) != ("wrong+" in left_out)
    said = " ".join(out.split())
    assert ("wrong+: positive rewards" in said) == ("wrong+" in shown)  # the legend: only what is shown
