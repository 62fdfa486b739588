"""Every odd row is a refusal, never a stop (issue 91, item 3).

SQLite keeps any value in any column: a text that is not UTF-8 (which its driver would not
decode), a BLOB where a text belongs, a seq at either end of a 64-bit integer, a version of an
event newer than this diagevo's class. Each such row, stored raw into run ``base`` (round 1
committed, round 2 open) of a database that also holds run ``other``, is passed over by every
reader (``runs``, ``memory stats/export/show/why``, ``report``: exit 0), named by each in one
line, its id in none of what they write; ``memory verify`` names it by its seq (exit 1). A run id
that is no text names a row of no run: ``runs`` lists the others and names it, as ``memory verify
--all`` does. A row at the largest seq leaves the log no room: an append is refused in one line.
An optional index SQLite is told to use (``INDEXED BY``) that was dropped slows a read, never
stops it. On PostgreSQL the trainer role can write only the newer version (once a newer diagevo
registered it: its other odd rows are the database's own refusals), passed over alike.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from diagevo.catalog import CATALOG, RunNoted, of_type
from diagevo.log import open_log
from diagevo.log.chain import canonical_event_json, chain_hash
from diagevo.log.sqlite import SQLiteRecorder
from tests.input_cases import cli
from tests.logs import wire_event
from tests.test_log_shapes_pg import raw_row
from tests.test_log_trainer_role import Roles, insert, roles  # noqa: F401 - the fixture
from tests.test_readers_take_what_the_fold_takes import RUN, _runs

NOT_UTF8 = "? || CAST(X'FF' AS TEXT)"  # the column's own value with a byte no UTF-8 text holds
BLOB = "CAST(? AS BLOB)"  # the column's own bytes, stored as a BLOB
NOTE = ("run.noted", 2, {"note": "an odd note"})
FAILURE = ("failure.recorded", 2, {"failure_id": "f-odd", "question_id": "q1"})

ODD: dict[str, tuple[tuple[str, int, dict[str, Any]], dict[str, Any], str]] = {
    # name: ((type, round, data), columns as stored (SQL, where a text), why every reader names it)
    "data not UTF-8": (NOTE, {"data": NOT_UTF8}, "its data is not UTF-8 text"),
    "type not UTF-8": (NOTE, {"type": NOT_UTF8}, "its type is not UTF-8 text"),
    "event_id not UTF-8": (NOTE, {"event_id": NOT_UTF8}, "its event_id is not UTF-8 text"),
    "recorded_at not UTF-8": (NOTE, {"recorded_at": NOT_UTF8}, "its recorded_at is not UTF-8 text"),
    "hash not UTF-8": (NOTE, {"hash": NOT_UTF8}, "its hash is not UTF-8 text"),
    "data a BLOB": (FAILURE, {"data": BLOB}, "its data is not UTF-8 text"),
    "type a BLOB": (FAILURE, {"type": BLOB}, "its type is not UTF-8 text"),
    "event_id a BLOB": (FAILURE, {"event_id": BLOB}, "its event_id is not UTF-8 text"),
    "recorded_at a BLOB": (FAILURE, {"recorded_at": BLOB}, "its recorded_at is not UTF-8 text"),
    "a note of a newer version": (
        NOTE,
        {"schema_version": (v := CATALOG["run.noted"].class_version + 1)},
        f"written by a newer diagevo: run.noted version {v}",
    ),
    "a failure of a newer version": (
        FAILURE,
        {"schema_version": (v := CATALOG["failure.recorded"].class_version + 1)},
        f"written by a newer diagevo: failure.recorded version {v}",
    ),
    "seq -2^63": (NOTE, {"seq": -(2**63)}, "run 'base' has run.noted before run.started"),
}


def readers(root: Path) -> list[tuple[str, ...]]:
    """Every reader of run ``base``: each reads the whole run (and names each row it passes over)."""
    return [
        ("runs",),
        ("runs", "--json"),
        ("memory", "stats", "--run", RUN),
        ("memory", "export", "--run", RUN, "-o", str(root / "base.jsonl")),
        ("memory", "show", "--run", RUN),
        ("memory", "why", "C1", "--run", RUN),
        ("report", "--run", RUN, "-o", str(root / "base.html")),
    ]


@pytest.fixture()
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'odd.db'}"
    with open_log(url) as log:
        log.append(_runs())
    return url


def store_odd(db: str, row: dict[str, Any], columns: dict[str, Any]) -> None:
    """Insert ``row`` into the SQLite file as a raw INSERT would, with ``columns``: each a value,
    or for a text one the SQL that stores it (``?``: the row's own value of that column)."""
    values = {**row, **{c: v for c, v in columns.items() if not isinstance(v, str)}}
    sql = {c: columns[c] if isinstance(columns.get(c), str) else "?" for c in values}
    conn = sqlite3.connect(db.removeprefix("sqlite:///"))
    with conn:
        conn.execute(
            f"INSERT INTO events ({', '.join(values)}) VALUES ({', '.join(sql.values())})",
            [values[c] for c in values if "?" in sql[c]],
        )
    conn.close()


def odd_row(url: str, event: tuple[str, int, dict[str, Any]], columns: dict[str, Any]) -> dict[str, Any]:
    """The row diagevo would append next to run ``base`` for this event, chained and hashed with
    the ``schema_version`` it is given."""
    type_, rnd, data = event
    row = raw_row(url, RUN, type_, rnd, data)
    if "schema_version" in columns:
        row["schema_version"] = columns["schema_version"]
        canonical = canonical_event_json(row["event_id"], RUN, rnd, type_, row["schema_version"], row["data"])
        row["hash"] = chain_hash(row["prev_hash"], canonical)
    return row


def last_seq(db: str) -> int:
    """The database's highest seq (the raw row's, which SQLite numbered after the others)."""
    with sqlite3.connect(db.removeprefix("sqlite:///")) as conn:
        return int(conn.execute("SELECT MAX(seq) FROM events").fetchone()[0])


def passed_over_by_every_reader(db: str, root: Path, seq: int, why: str, event_id: str, readable: bool) -> None:
    """Each reader exits 0 and names the row once (run, seq, why); its id is in nothing a reader
    wrote (but the export of a row a reader can read, which a rule refuses: the export is the log
    as stored, ``tests/test_read_path.py``); ``memory verify`` names it (exit 1)."""
    named = f"run {RUN!r}, seq {seq}: passed over: "
    for command in readers(root):
        code, out, err = cli(*command, "--db", db)
        assert code == 0, f"{' '.join(command)} exits {code}:\n{err[-2000:]}"
        lines = [line for line in err.splitlines() if named in line]
        assert len(lines) == 1 and why in lines[0], (command, err)
        assert event_id not in out + err, command
    for written in ("base.html",) if readable else ("base.jsonl", "base.html"):
        assert event_id not in (root / written).read_text(encoding="utf-8", errors="replace"), written
    code, out, _ = cli("memory", "verify", "--run", RUN, "--db", db, "--json")
    problems = json.loads(out)["problems"]
    assert code == 1 and any(f"seq {seq}: " in p and why in p for p in problems), problems


@pytest.mark.parametrize("name", list(ODD))
def test_an_odd_row_is_passed_over_by_every_reader(db: str, tmp_path: Path, name: str) -> None:
    event, columns, why = ODD[name]
    row = odd_row(db, event, columns)
    store_odd(db, row, columns)
    seq = columns.get("seq") or last_seq(db)
    passed_over_by_every_reader(db, tmp_path, seq, why, row["event_id"], readable="seq" in columns)
    code, _, err = cli("runs", "note", RUN, "still appended", "--db", db)  # the log goes on past it
    if columns.keys() == {"hash"}:  # but not on a row whose hash is no text: nothing chains onto it
        assert code == 1 and err.count("\n") == 1 and f"its last event, at seq {seq}, is unreadable" in err, err
    else:
        assert code == 0, err


@pytest.mark.parametrize("stored", [NOT_UTF8, BLOB], ids=["not UTF-8", "a BLOB"])
def test_a_run_id_that_is_no_text_is_a_row_of_no_run(db: str, tmp_path: Path, stored: str) -> None:
    """No reader can ask for its run: ``runs`` lists the others and names it, as ``memory verify
    --all`` does (exit 1); the readers of run ``base`` do not meet it."""
    row = raw_row(db, RUN, *NOTE)
    store_odd(db, row, {"run_id": stored})
    seq = last_seq(db)
    named = f"seq {seq}: passed over: its run_id is not UTF-8 text (a row of no run)"
    code, out, err = cli("runs", "--db", db, "--json")
    assert code == 0 and [r["run"] for r in json.loads(out)["runs"]] == [RUN, "other"], err
    assert err.splitlines() == [named], err
    code, out, err = cli("memory", "verify", "--all", "--db", db, "--json")
    assert code == 1 and json.loads(out)["runless"] == [named.replace("passed over: ", "")], out
    assert [v["ok"] for v in json.loads(out)["runs"]] == [True, True]
    for command in readers(tmp_path):
        code, out, err = cli(*command, "--db", db)
        assert code == 0 and row["event_id"] not in out + err, (command, err)


def test_a_row_at_the_largest_seq_leaves_no_room_to_append(db: str, tmp_path: Path) -> None:
    """It is read as any row (a run's chain may end there); an append to any run is refused in
    one line, storing nothing."""
    row = odd_row(db, NOTE, {})
    store_odd(db, row, {"seq": 2**63 - 1})
    for command in readers(tmp_path):
        code, _, err = cli(*command, "--db", db)
        assert code == 0 and "passed over" not in err, (command, err)
    code, out, _ = cli("memory", "verify", "--all", "--db", db, "--json")
    assert code == 0 and json.loads(out)["runs"][0]["last"]["seq"] == 2**63 - 1, out
    for run in (RUN, "other"):
        code, _, err = cli("runs", "note", run, "one more", "--db", db)
        assert code == 1 and err == (
            "error: nothing can be appended to the log: its highest seq is 9223372036854775807, and a seq is a "
            "64-bit integer (at most 9223372036854775807): no row fits after it\n"
        ), err
    assert last_seq(db) == 2**63 - 1


def test_a_dropped_index_slows_a_read_never_stops_it(db: str, tmp_path: Path) -> None:
    """Every index SQLite is told to read by (``INDEXED BY``) dropped: each reader shows what it
    showed, and a writer appends."""
    before = {command: cli(*command, "--db", db) for command in readers(tmp_path)}
    with sqlite3.connect(db.removeprefix("sqlite:///")) as conn:
        named = {n for n in ("run_seq", "run_type_seq", "run_round_type", "cause_id", "question_id", "failure_id")}
        for index in (*(f"ix_events_{n}" for n in sorted(named)), "uq_events_run_event_id"):
            conn.execute(f"DROP INDEX {index}")
    for command, (code, out, err) in before.items():
        assert cli(*command, "--db", db) == (code, out, err) and code == 0, command
    code, _, err = cli("runs", "note", RUN, "after the drop", "--db", db)
    assert code == 0, err
    with SQLiteRecorder(db, create=False) as log:
        assert [e.note for e in of_type(RunNoted, log.read(RUN, types=(RunNoted,)))][-1] == "after the drop"


def test_a_bug_is_no_bad_row(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that fails on a bug of its own while the log holds a row out of shape says it
    is a bug (an internal error), never that the row stopped it."""
    row = raw_row(db, RUN, "failure.recorded", 2, {"failure_id": ["f"], "question_id": "q1"})
    store_odd(db, row, {})

    def broken(*_: object) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr("diagevo.views.runs.config_changes", broken)
    code, _, err = cli("runs", "--db", db)
    assert code == 70 and "internal error: KeyError: 'a bug'" in err and "cannot read" not in err, err


@pytest.mark.parametrize("event", [NOTE, FAILURE], ids=["a note", "a failure"])
def test_a_newer_version_the_trainer_writes_is_passed_over(
    roles: Roles,  # noqa: F811
    tmp_path: Path,
    event: tuple[str, int, dict[str, Any]],
) -> None:
    """On PostgreSQL once a newer diagevo registered the version (its upgrade of the database):
    the trainer's row of it is passed over by every reader of this diagevo, named; ``memory
    verify`` names it."""
    type_ = event[0]
    with roles.admin.connect() as conn:
        conn.execute(text(f"UPDATE {roles.schema}.event_types SET version = version + 1 WHERE type = '{type_}'"))
    version = CATALOG[type_].class_version + 1
    row = odd_row(roles.trainer_url, event, {"schema_version": version})
    insert(roles.trainer, row)
    with open_log(roles.owner_url, create=False) as log:
        seq = log.last_seq(RUN)
    why = f"written by a newer diagevo: {type_} version {version}"
    passed_over_by_every_reader(roles.trainer_url, tmp_path, seq, why, row["event_id"], readable=False)
    with open_log(roles.trainer_url, create=False) as log:  # the trainer appends past it
        assert log.append([wire_event("run.noted", RUN, 1, "after-newer", note="past it")]).appended == 1
