"""Writes ``baseline.db``: a small log as diagevo's baseline schema (migration 0001) holds it, and
``baseline.json``: what the readers printed of it then (``memory stats``, ``memory replay``,
``memory verify``, each ``--json``).

Two committed rounds and an open third of run ``base`` (nodes, causes and their evidence, an
attribution, a promotion, questions, a reactivation), one round of run ``other``, and the
memory's snapshots of every committed round. ``tests/test_baseline_log.py`` opens it with the
current code on SQLite, and copies its rows into a PostgreSQL schema at the baseline revision:
``db upgrade`` takes both to head and the log reads as it did. A migration after the baseline
is tested from the state every release before it left. Written once, at the baseline; never
rewritten (the point is the bytes an older diagevo wrote).

    python tests/data/baseline_log/make_baseline_log.py
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the checkout: tests.logs, tests.input_cases

from diagevo.log import open_log  # noqa: E402
from diagevo.log.schema import upgrade  # noqa: E402
from diagevo.views.caches import refresh  # noqa: E402
from tests.input_cases import cli  # noqa: E402
from tests.logs import Log  # noqa: E402

DB = HERE / "baseline.db"
PRINTED = HERE / "baseline.json"
READS = {
    "stats": ("memory", "stats", "--run", "base", "--json"),
    "replay2": ("memory", "replay", "--run", "base", "--round", "2", "--json"),
    "verify": ("memory", "verify", "--run", "base", "--json"),
}


def base() -> Log:
    log = Log("base", k=0.5, seed=7, theta_up=0.6)
    log.node("N1", "algebra").node("N2", "geometry")
    log.cause("C1", "N1").cause("C2", "N2", "the angle sum misread")
    log.question("q1", 0.5, active="C1").question("q2", 0.25, active="C2").question("q3", 0.75)
    log.commit(promotions=0, timing={"solver": 1.5, "diagnosis": 0.25})
    log.attribute("C1", "f-2a")
    log.question("q4", 0.75, active="C1").question("q5", 0.5, active="C2", retained=False)
    log.add("cause.promoted", cause_id="C1", acc=0.75, n_candidates=1)
    log.add("promotions.decided", promoted=["C1"], candidates=1)
    log.commit(promotions=1, timing={"solver": 2.0})
    log.question("q6", 0.5, active="C2", mastered="C1")
    log.reactivate("C1", "f-3a")
    return log


def main() -> None:
    DB.unlink(missing_ok=True)
    url = f"sqlite:///{DB}"
    assert upgrade(url) == (None, "0001"), "write the fixture at the baseline revision"
    with open_log(url) as store:
        store.append(base().events())
        store.append(Log("other", k=1.0).node("N1").cause("C1", "N1").question("q1", 0.5).commit().events())
        refresh(store, "base")
        refresh(store, "other")
    printed = {}
    for name, args in READS.items():
        code, out, err = cli(*args, "--db", url)
        assert code == 0, err
        printed[name] = json.loads(out)
    PRINTED.write_text(json.dumps(printed, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    with sqlite3.connect(DB) as conn:  # one file: no WAL beside it, no free pages
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("VACUUM")


if __name__ == "__main__":
    main()
