"""An ablation's cells kept between machines (``benchmarks/ablation_table.py --save-cells``): the
rounds come back as saved, a log's cell replaces the file's, and a file of another pair is refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.scripts import load_script


@pytest.fixture(scope="module")
def table():  # noqa: ANN201 (the script, imported from its path)
    return load_script("benchmarks/ablation_table.py", "ablation_table")


def rounds(table, arm: str, seed: int, accs: list[float]) -> list:  # noqa: ANN001
    return [
        table.CellRound(
            arm=arm,
            seed=seed,
            round=t,
            heldout_acc=a,
            by_skill={"mod": a / 2},
            label_acc=0.25,
            wrong_share=0.7,
            shared_label_acc=0.8,
        )
        for t, a in enumerate(accs, 1)
    ]


def test_saved_cells_come_back_and_a_logged_cell_replaces_its_saved_rounds(table, tmp_path: Path) -> None:  # noqa: ANN001
    pair = {"add_c": 0.46, "mod": 0.26}
    saved = rounds(table, "full", 0, [0.51, 0.49]) + rounds(table, "pure free", 0, [0.5, 0.48])
    path = str(tmp_path / "cells.json")
    table.save_cells(path, saved, pair)
    assert table.load_cells(path, pair) == saved
    logged = rounds(table, "full", 0, [0.6, 0.7]) + rounds(table, "full", 1, [0.55, 0.52])
    rows = table.merged(logged, table.load_cells(path, pair))
    assert [(r.arm, r.seed, r.heldout_acc) for r in rows] == [
        ("full", 0, 0.6),
        ("full", 0, 0.7),
        ("full", 1, 0.55),
        ("full", 1, 0.52),
        ("pure free", 0, 0.5),
        ("pure free", 0, 0.48),
    ]
    # the primary outcome pairs seed 0 alone: full 0.7 − pure free 0.48
    assert "+0.220 (one seed" in table.mini_tables(rows, None)


def test_a_cells_file_of_another_pair_is_refused(table, tmp_path: Path) -> None:  # noqa: ANN001
    path = str(tmp_path / "cells.json")
    table.save_cells(path, rounds(table, "oracle", 3, [0.6]), {"add_c": 0.46})
    with pytest.raises(SystemExit, match="another pair"):
        table.load_cells(path, {"add_c": 0.58})


def test_figure_3c_is_each_setting_s_shared_label_accuracy_by_round_beside_the_paper(table) -> None:  # noqa: ANN001
    """Seeds 0 and 1 of two of the figure's settings: the mean of 0.80 and 0.90 is 85.0 %, its
    95 % t half-width over two seeds 12.706 x 0.0707 / sqrt(2) = 0.635 (63.5 points); a setting not run has
    no row, a round a cell lacks the figure is '–'."""
    rows = [
        table.CellRound(arm=arm, seed=seed, round=t, heldout_acc=0.5, shared_label_acc=acc)
        for arm, seed, t, acc in [
            ("pure free, absolute only", 0, 1, 0.8),
            ("pure free, absolute only", 1, 1, 0.9),
            ("pure free, absolute only", 0, 2, 0.7),
            ("pure free, absolute only", 1, 2, 0.7),
            ("full", 0, 1, 0.75),
            ("full", 0, 2, float("nan")),
            ("oracle", 0, 1, 0.99),
        ]
    ]
    lines = table.figure_3c_table(rows).splitlines()
    assert lines[0] == "| setting (arm) | seeds | round 1 | round 2 | paper: round 1 | round 5 |"
    free, full = lines[2], lines[3]
    assert free.startswith("| pure free exploration, absolute constraint only (pure free, absolute only) | 2 |")
    assert "| 85.0 ± 63.5 % | 70.0 ± 0.0 % | 83 % | 65 % |" in free
    assert full.endswith("| 1 | 75.0 ± 0.0 % | – | – | 75 % |")
    assert len(lines) == 4 and "oracle" not in "".join(lines)
    assert "shared labels right" in table.mini_tables(rows, None)


def _regime():  # noqa: ANN202 (the script, imported from its path)
    return load_script("benchmarks/mini_regime.py", "mini_regime")


def test_the_regime_s_cells_train_seed_by_seed_in_the_order_fixed_before_any_result() -> None:
    regime = _regime()
    order = regime.cells(list(regime.ORDER), 4)
    assert order[:2] == [(0, "full"), (0, "pure free")]  # the primary outcome's arms first
    assert [a for s, a in order if s == 3] == [a for a in regime.ORDER if a != "pure free, absolute only"]
    assert [s for s, a in order if a == "pure free, absolute only"] == [0, 1, 2]  # Figure 3(c)'s three seeds
    assert [s for s, _ in order] == sorted(s for s, _ in order)


def test_the_regime_trains_the_missing_cells_jobs_at_a_time_and_gathers_after_each_part(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    regime = _regime()
    (tmp_path / "pair").mkdir()
    (tmp_path / "pair" / "mini.json").write_text("{}")
    batches: list[list[tuple[int, str]]] = []
    gathered: list[int] = []
    monkeypatch.setattr(regime, "reached", lambda *a: {(0, "full"): 5, (0, "oracle"): 5, (1, "full"): 2})
    monkeypatch.setattr(regime, "train", lambda pair, db, batch, rounds, config, stop: batches.append(batch))
    monkeypatch.setattr(regime, "gather", lambda *a: gathered.append(len(batches)))
    argv = ["mini_regime.py", "--pair", str(tmp_path / "pair"), "--out", str(tmp_path / "a.db")]
    argv += ["--cells", str(tmp_path / "c.json"), "--arm", "full", "--arm", "pure free", "--arm", "oracle"]
    monkeypatch.setattr(sys, "argv", [*argv, "--seeds", "2", "--jobs", "2"])
    regime.main()
    # seed 0's finished cells are skipped (seed 1's full, at round 2 of 5, resumes); the next two
    # cells share a part across the seeds
    assert batches == [[(0, "pure free"), (1, "full")], [(1, "pure free"), (1, "oracle")]]
    assert gathered == [1, 2]


def test_a_contrast_pairs_two_arms_by_seed_at_their_last_common_round(table) -> None:  # noqa: ANN001
    """check − full over seeds 0 and 1: differences 0.10 and 0.20 at round 2 (the check's round 3
    has no partner), mean 0.15, sd 0.0707, t(0.975, 1) = 12.706: half-width 0.635."""
    rows = (
        rounds(table, "full", 0, [0.5, 0.5])
        + rounds(table, "full", 1, [0.5, 0.4])
        + rounds(table, "check", 0, [0.5, 0.6, 0.9])
        + rounds(table, "check", 1, [0.5, 0.6])
    )
    line = table.contrast(rows, "check", "full")
    assert line.startswith("- check − full, round 2, paired by seed: held-out +0.150 ± 0.635 ("), line
    assert "-0.485 to +0.785; seed 0 +0.100, seed 1 +0.200)" in line and line.endswith(
        "shared labels right +0.000 ± 0.000"
    )
    assert "fewer than two seeds" in table.contrast(rows[:4] + rows[4:7], "check", "full")


def test_the_dose_response_line_and_its_break_even_by_hand(table) -> None:  # noqa: ANN001
    """Cells on one line (change = 0.05 - 0.5 x wrong+) cross zero at 0.1, every resample too; a
    cell past ``fit_below`` is drawn but not fitted; an arm is placed at its mean wrong+."""
    rows = []
    for seed, (wrong, last) in enumerate([(0.0, 0.80), (0.1, 0.75), (0.2, 0.70), (0.9, 0.10)]):
        for t in range(1, 6):
            rows.append(table.CellRound("dose", seed, t, heldout_acc=last if t == 5 else 0.5, wrong_share=wrong))
    rows += [table.CellRound("method", 0, t, heldout_acc=0.60 if t == 5 else 0.5, wrong_share=0.4) for t in range(1, 6)]
    points = table.dose_points(rows, ["dose"], start=0.75)
    assert [(p.wrong, round(p.change, 9)) for p in points] == [(0.0, 0.05), (0.1, 0.0), (0.2, -0.05), (0.9, -0.65)]
    a, b = table.line_fit(points[:3])
    assert (round(a, 9), round(b, 9)) == (0.05, -0.5)
    assert [round(x, 9) for x in table.break_even(points[:3])] == [0.1, 0.1, 0.1]
    text, svg = table.dose_table(rows, ["dose"], ["method"], start=0.75, fit_below=0.5)
    assert "Line through the 3 control cells with wrong+ below 0.5: change ≈ +0.050 -0.500 × wrong+" in text
    # the method's cell: wrong+ 0.4, measured 0.60 - 0.75 = -0.15, the line -0.15: on it
    assert "| method | 1 | 0.400 | -0.150 | -0.150 | +0.000 |" in text
    assert svg.startswith("<svg") and svg.count("<circle") == 4 + 1  # four cells and the break-even
    # an arm's name comes from a cells file: text in the plot, never markup
    odd = [table.CellRound("<b>&", 0, t, heldout_acc=0.6, wrong_share=0.4) for t in range(1, 6)]
    svg = table.dose_table(rows + odd, ["dose"], ["<b>&"], start=0.75, fit_below=0.5)[1]
    assert ">&lt;b&gt;&amp;</text>" in svg and "<b>" not in svg


def test_where_practice_goes_by_hand(table) -> None:  # noqa: ANN001
    """Each skill's share of a round's generated, retained, targeted questions and of the failures
    counted into the memory, beside its error before the round (the pair's for round 1, then the
    round before's held-out accuracy), in %."""
    counts = {
        "add_c": dict(generated=6, retained=3, targeted=0, failures=4, counted=3),
        "mul": dict(generated=4, retained=1, targeted=0, failures=1, counted=1),
    }
    second = {
        "add_c": dict(generated=2, retained=1, targeted=2, failures=0, counted=0),
        "mul": dict(generated=8, retained=3, targeted=6, failures=2, counted=2),
    }
    rows = [
        table.CellRound("a", 0, 1, heldout_acc=0.5, by_skill={"add_c": 0.9, "mul": 0.2}, practice=counts),
        table.CellRound("a", 0, 2, heldout_acc=0.5, by_skill={"add_c": 0.9, "mul": 0.3}, practice=second),
    ]
    lines = table.practice_table(rows, "a", {"add_c": 0.8, "mul": 0.4}).splitlines()
    assert lines[0] == "| skill | round 1: error · gen · ret · tgt · mem | round 2: error · gen · ret · tgt · mem |"
    assert lines[2] == "| add_c | 20 · 60 · 75 · – · 75 | 10 · 20 · 25 · 25 · 0 |"
    assert lines[3] == "| mul | 60 · 40 · 25 · – · 25 | 80 · 80 · 75 · 75 · 100 |"
    assert table.practice_table(rows, "other") == "other: no round's practice counted (cells of an older log)"


def test_practice_is_counted_from_the_log_by_each_questions_own_skill(table, tmp_path: Path) -> None:  # noqa: ANN001
    import diagevo

    with diagevo.open_store(f"sqlite:///{tmp_path / 'p.db'}") as store:
        diagevo.start_run(store, "r", diagevo.Config(), seed=0)
        rnd = diagevo.Round.open(store, "r")
        reqs = rnd.requests(3)
        texts = ["47+38=", "7*38=", "12+13="]  # add_c, mul, add_nc
        votes = [("85",) * 5 + ("75",) * 3, ("266",) * 8, ("25",) * 5 + ("35",) * 3]
        boxed = [tuple(f"\\boxed{{{a}}}" for a in v) for v in votes]
        rnd.record([diagevo.Candidate(q.question_id, q.mode, x, responses=b) for q, x, b in zip(reqs, texts, boxed)])
        rnd.promote()
        kept = {s.text: s for s in rnd.questions() if s.retained}
        added = kept["47+38="]
        failure = {"failure_id": "f1", "question_id": added.question_id, "response": "\\boxed{75}"}
        rnd.record_failures([{**failure, "reference": added.reference}])
        counted = table.practice_counts(store, "r")
    assert counted[1]["add_c"] == dict(generated=1, retained=1, targeted=0, failures=1, counted=0)
    assert counted[1]["mul"] == dict(generated=1, retained=0, targeted=0, failures=0, counted=0)
    assert counted[1]["add_nc"]["generated"] == 1 and set(counted[1]) == {"add_c", "mul", "add_nc"}
