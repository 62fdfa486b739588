"""A log written at the baseline schema reads as it did, and the next migration takes it on
(issue 73, item 4).

``tests/data/baseline_log/baseline.db`` is a small log diagevo wrote at revision 0001, the
baseline, with what ``memory stats``, ``replay`` and ``verify`` printed of it then
(``baseline.json``; ``make_baseline_log.py`` says how it was made). On SQLite the file itself is
opened; on PostgreSQL a schema is migrated to the baseline revision and the file's rows are
copied in, as that diagevo stored them. ``db upgrade`` takes either to head (today the baseline:
nothing to do), and every read prints what it printed. With a stand-in for the next migration
(:func:`tests.conftest.next_migration`) the same log is an older database: refused untouched by
a reader, upgraded by ``db upgrade``, and read as before, so the first real migration after the
baseline is tested against what a release left from the day it is written.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from diagevo.log import SchemaOutdated, open_log
from diagevo.log.revision import HEAD_REVISION
from diagevo.log.schema import revision_status, upgrade
from tests.conftest import Backend
from tests.input_cases import cli

FIXTURE = Path(__file__).parent / "data" / "baseline_log"
BASELINE = "0001"
READS = {
    "stats": ("memory", "stats", "--run", "base", "--json"),
    "replay2": ("memory", "replay", "--run", "base", "--round", "2", "--json"),
    "verify": ("memory", "verify", "--run", "base", "--json"),
}
EVENT_COLUMNS = (
    "event_id, run_id, round, type, schema_version, data, recorded_at, prev_hash, hash, texts, "
    "cause_id, active_cause, mastered_cause, matched_cause, failure_id, question_id"
)
VIEW_COLUMNS = "name, run_id, part, seq, hash, state"


def _stored(table: str, columns: str, order: str) -> list[tuple[object, ...]]:
    """The fixture's rows of a table, as the baseline diagevo stored them."""
    with sqlite3.connect(f"file:{FIXTURE / 'baseline.db'}?mode=ro", uri=True) as conn:
        return conn.execute(f"SELECT {columns} FROM {table} ORDER BY {order}").fetchall()


@pytest.fixture
def baseline_url(backend: Backend, tmp_path: Path) -> str:
    """The baseline log in a database of the backend, at the baseline revision."""
    if backend.name == "sqlite":
        shutil.copy(FIXTURE / "baseline.db", tmp_path / "baseline.db")
        return f"sqlite:///{tmp_path / 'baseline.db'}"
    url = backend.fresh_url()
    assert upgrade(url, BASELINE) == (None, BASELINE)
    engine = backend.engine(url)
    with engine.begin() as conn:  # the rows in seq order: the database gives them the same seqs
        for table, columns in (("events", EVENT_COLUMNS), ("views", VIEW_COLUMNS)):
            names = columns.split(", ")
            rows = [dict(zip(names, r, strict=True)) for r in _stored(table, columns, "seq")]
            conn.execute(text(f"INSERT INTO {table} ({columns}) VALUES ({', '.join(':' + n for n in names)})"), rows)
    engine.dispose()
    return url


def _reads_as_it_did(url: str) -> None:
    printed = json.loads((FIXTURE / "baseline.json").read_text(encoding="utf-8"))
    for name, args in READS.items():
        code, out, err = cli(*args, "--db", url)
        assert code == 0, f"{' '.join(args)}: {err}"
        assert json.loads(out) == printed[name], name
    with open_log(url, create=False) as store:
        assert store.runs() == ["base", "other"] and store.last_seq("base") == 32


def test_the_baseline_log_upgrades_to_head_and_reads_as_it_did(baseline_url: str) -> None:
    assert revision_status(baseline_url).current == BASELINE
    assert upgrade(baseline_url) == (BASELINE, HEAD_REVISION)
    assert revision_status(baseline_url).up_to_date
    _reads_as_it_did(baseline_url)


def test_the_next_migration_takes_the_baseline_log_on(baseline_url: str, next_migration: str) -> None:
    """Older than head now: refused untouched by a reader, taken on by ``db upgrade``."""
    with pytest.raises(SchemaOutdated, match=f"database is at revision {BASELINE}, expected {next_migration}: run"):
        open_log(baseline_url)
    assert revision_status(baseline_url).state == "outdated"
    assert upgrade(baseline_url) == (BASELINE, next_migration)
    assert revision_status(baseline_url).up_to_date
    _reads_as_it_did(baseline_url)
