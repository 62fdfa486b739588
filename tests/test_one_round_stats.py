"""One ``RoundStats``: on a five-round simulator run, the training table's rows (what ``train``
prints after each round), ``memory stats --json``, the report's data and each round's commit
summary give the same figures, and so does a fold of the log with no saved state."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from diagevo.catalog import RoundCommitted
from diagevo.log import open_log, payload
from diagevo.train.config import load_config
from diagevo.train.run import TrainOptions, train
from diagevo.views.stats import COLUMNS, COUNTED_COLUMNS, LABEL_FIGURES, round_stats
from tests.test_cli_memory import run_cli

ROOT = Path(__file__).resolve().parent.parent


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return a == b


def test_the_table_stats_report_and_commits_agree_on_a_five_round_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'five.db'}"
    cfg = load_config(
        ROOT / "configs" / "sim.toml",
        [
            "train.challenger_questions=16",
            "train.curriculum_questions=48",
            "train.rounds=5",
            'train.run="five"',
            f'train.out_dir="{tmp_path / "ckpt"}"',
        ],
    )
    table: list[dict[str, Any]] = []
    with open_log(db) as store:
        _, reports = train(cfg, store, TrainOptions(on_round=lambda r: table.append(r.stats.to_json())))
    assert [r.round for r in reports] == [1, 2, 3, 4, 5] and [row["round"] for row in table] == [1, 2, 3, 4, 5]

    code, out, err = run_cli(capsys, "memory", "stats", "--db", db, "--run", "five", "--json")
    assert code == 0, err
    stats = json.loads(out)["rounds"]

    from diagevo.report.data import load_run

    with open_log(db) as store:
        report = load_run(store, "five").rounds
        folded = round_stats(store, "five", cached=False)  # from the events alone
        committed = {e.round: payload(e) for e in store.read("five", types=(RoundCommitted,))}

    # the figures that move from round to round, so an off-by-one round cannot pass
    assert len({row["active"] for row in stats}) > 1 and sum(row["promotions"] for row in stats) > 0
    for t in range(1, 6):
        want = stats[t - 1]
        assert want["round"] == t
        for name in (*COLUMNS, "heldout_acc"):
            assert same(table[t - 1][name], want[name]), (t, name, "training table")
            assert same(folded[t - 1].value(name), want[name]), (t, name, "fold")
        for name in ("active", "mastered", "F", "epsilon_next", "heldout_acc", *LABEL_FIGURES):
            assert same(report[t - 1].value(name), want[name]), (t, name, "report")
        for name in LABEL_FIGURES:  # the simulator knows the truth: every round has the label figures
            assert 0.0 <= want[name] <= 1.0, (t, name)
            assert same(table[t - 1][name], want[name]), (t, name, "training table")
            assert same(committed[t][name], want[name]), (t, name, "commit")
        for name in (*COUNTED_COLUMNS, "F", "epsilon_next"):
            assert same(committed[t][name], want[name]), (t, name, "commit summary")
