"""A database an earlier diagevo wrote (the migration chain 0001-0019 before the baseline) opens
with this one after ``db upgrade``, its log as it was (issue 82).

``tests/data/old_chain/`` holds SQLite files the old code wrote, each with what that code
exported of it (``make_old_chain.py`` says how): revisions 0007 (texts in ``artifacts``, no
``texts`` column), 0012 and 0019 (the last of the chain), and the old chain's own 0001, which
shares its id with the baseline and holds 0007's rows. Before the upgrade every command refuses
such a file in one line naming ``db upgrade`` (never "upgrade diagevo": this diagevo is the
newer); after it the export is the old code's byte for byte, and verify, stats and replay read
it. A revision this diagevo does not know over a baseline-shaped log is a newer diagevo's: there
the advice is the other way round.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from diagevo.log import SchemaOutdated, open_log
from diagevo.log.revision import HEAD_REVISION
from diagevo.log.schema import migrate, revision_status, upgrade
from tests.conftest import PostgresBackend
from tests.input_cases import cli

OLD = Path(__file__).parent / "data" / "old_chain"
# revision: (the file, the old code's export of the same log)
FIXTURES = {
    "0001": ("chain-0001.db", "chain-0007.jsonl"),
    "0007": ("chain-0007.db", "chain-0007.jsonl"),
    "0012": ("chain-0012.db", "chain-0012.jsonl"),
    "0019": ("chain-0019.db", "chain-0019.jsonl"),
}
# the logs of these revisions were written before the config took its present fields: this
# diagevo reads and carries them, and verify names the config, as it does of their export ingested
OLD_CONFIG = {"0001", "0007"}
READS = [
    ("runs",),
    ("memory", "stats", "--run", "fx"),
    ("memory", "show", "--run", "fx"),
    ("memory", "replay", "--run", "fx", "--round", "1"),
    ("memory", "events", "--run", "fx"),
    ("memory", "export", "--run", "fx"),
    ("memory", "verify", "--run", "fx"),
]


def _copy(revision: str, tmp_path: Path) -> str:
    name, _ = FIXTURES[revision]
    shutil.copy(OLD / name, tmp_path / name)
    return f"sqlite:///{tmp_path / name}"


def _export(revision: str) -> bytes:
    return (OLD / FIXTURES[revision][1]).read_bytes()


@pytest.mark.parametrize("revision", sorted(FIXTURES))
def test_every_read_of_an_old_chain_database_says_run_db_upgrade(revision: str, tmp_path: Path) -> None:
    url = _copy(revision, tmp_path)
    before = (tmp_path / FIXTURES[revision][0]).read_bytes()
    status = revision_status(url)
    assert (status.current, status.state) == (revision, "old_chain")
    for args in READS:
        code, out, err = cli(*args, "--db", url)
        assert code == 1 and out == "", f"{args}: {out}"
        lines = err.strip().splitlines()
        assert len(lines) == 1, f"{args}: {err}"
        assert lines[0].startswith(f"error: database is at revision {revision} of an earlier diagevo's migrations")
        assert lines[0].endswith(f"db upgrade --db {url}`") and "upgrade diagevo" not in lines[0], lines[0]
    with pytest.raises(
        SchemaOutdated, match=r"earlier diagevo's migrations .* run `diagevo\.log\.schema\.upgrade\(url\)`$"
    ):
        open_log(url, create=False, readonly=True)
    with pytest.raises(SchemaOutdated, match="earlier diagevo's migrations"):
        open_log(url)  # a writer does not migrate it on its own either
    assert (tmp_path / FIXTURES[revision][0]).read_bytes() == before  # refused untouched


@pytest.mark.parametrize("revision", sorted(FIXTURES))
def test_db_upgrade_carries_an_old_chain_log_over_as_it_was(revision: str, tmp_path: Path) -> None:
    url = _copy(revision, tmp_path)
    code, out, err = cli("db", "upgrade", "--db", url)
    assert code == 0, err
    assert f"upgraded from revision {revision} of an earlier diagevo's migrations to {HEAD_REVISION}" in out
    assert revision_status(url).state == "up_to_date"
    export = tmp_path / "fx.jsonl"
    code, _, err = cli("memory", "export", "--run", "fx", "--db", url, "--out", str(export))
    assert code == 0, err
    assert export.read_bytes() == _export(revision)
    code, out, err = cli("memory", "verify", "--run", "fx", "--json", "--db", url)
    verdict = json.loads(out)
    last = json.loads(_export(revision).splitlines()[-1])
    assert verdict["last"] == {"seq": last["seq"], "hash": last["hash"]}
    if revision in OLD_CONFIG:
        assert code == 1 and len(verdict["problems"]) == 1, verdict
        assert verdict["problems"][0].startswith("seq 1: run.started's config cannot be used: unknown config field")
    else:
        assert code == 0 and verdict["ok"] is True, verdict
        for args in (("memory", "stats", "--json"), ("memory", "replay", "--round", "2", "--json")):
            code, out, err = cli(*args, "--run", "fx", "--db", url)
            assert code == 0, err
            assert json.loads(out)["run"] == "fx"


@pytest.mark.parametrize("revision", ["0001", "0012"])
def test_an_old_row_no_reader_can_read_is_carried_passed_over_and_named(revision: str, tmp_path: Path) -> None:
    """A row written raw into an old database (data a JSON list, text that is no JSON, bytes that
    are no UTF-8): the upgrade carries it as it was and names it, every reader passes it over."""
    url = _copy(revision, tmp_path)
    path = make_url(url).database
    with sqlite3.connect(path) as con:
        last = con.execute("SELECT max(seq) FROM events").fetchone()[0]
        for i, data in enumerate(["[1, 2]", "{not json", b"\xff\xfe"]):
            con.execute(
                "INSERT INTO events(event_id, run_id, round, type, schema_version, data, recorded_at, prev_hash, hash)"
                " VALUES (?, 'fx', 2, 'question.generated', 1, ?, '2026-01-01T00:00:00', '0', '0')",
                (f"raw-{i}", data),
            )
    code, out, err = cli("db", "upgrade", "--db", url)
    assert code == 0, err
    named = [line for line in out.splitlines() if line.startswith("passed over: run 'fx', seq ")]
    assert [int(line.split("seq ")[1].split(":")[0]) for line in named] == [last + 1, last + 2, last + 3], out
    code, out, err = cli("memory", "stats", "--run", "fx", "--db", url, "--json")
    assert code == 0, err
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT count(*) FROM events WHERE event_id LIKE 'raw-%'").fetchone()[0] == 3


@pytest.mark.parametrize("revision", ["0001", "0012"])
def test_the_carried_over_schema_is_the_baselines_and_a_second_upgrade_does_nothing(
    revision: str, tmp_path: Path
) -> None:
    url = _copy(revision, tmp_path)
    before, after = migrate(url)
    assert (before.current, before.state, after.current, after.state) == (revision, "old_chain", "0001", "up_to_date")
    fresh = tmp_path / "fresh.db"
    assert upgrade(f"sqlite:///{fresh}") == (None, HEAD_REVISION)

    def schema(path: Path) -> list[tuple[str, str, str]]:
        with sqlite3.connect(path) as conn:
            return conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()

    assert schema(tmp_path / FIXTURES[revision][0]) == schema(fresh)
    code, out, err = cli("db", "upgrade", "--db", url)
    assert code == 0 and f"already at revision {HEAD_REVISION} (head)" in out, err
    assert upgrade(url) == (HEAD_REVISION, HEAD_REVISION)
    with open_log(url, create=False, readonly=True) as store:
        assert store.runs() == ["fx"]


def test_an_old_revisions_key_columns_and_texts_are_filled_as_its_successors_held_them(tmp_path: Path) -> None:
    """chain-0001.db holds chain-0007.db's rows without key columns (0004) or texts in the rows
    (0008): carried over, every column is what 0007's store wrote (keys) and 0011 would have moved."""
    rows = {}
    for revision in ("0001", "0007"):
        url = _copy(revision, tmp_path)
        assert upgrade(url) == (revision, HEAD_REVISION)
        with sqlite3.connect(tmp_path / FIXTURES[revision][0]) as conn:
            rows[revision] = conn.execute("SELECT * FROM events ORDER BY seq").fetchall()
    assert rows["0001"] == rows["0007"]
    with sqlite3.connect(f"file:{OLD / 'chain-0007.db'}?immutable=1", uri=True) as conn:  # writes nothing beside it
        keys = "seq, cause_id, active_cause, mastered_cause, matched_cause, failure_id, question_id"
        stored = conn.execute(f"SELECT {keys} FROM events ORDER BY seq").fetchall()
    assert [(r[0], *r[11:]) for r in rows["0001"]] == stored
    assert sum(r[1] is not None for r in stored) > 50 and sum(r[10] is not None for r in rows["0001"]) > 100  # texts


def test_db_current_and_doctor_say_which_way_to_upgrade(tmp_path: Path) -> None:
    url = _copy("0019", tmp_path)
    code, out, _ = cli("db", "current", "--db", url)
    assert code == 0 and "an earlier diagevo's migrations: run" in out and f"db upgrade --db {url}" in out
    code, out, _ = cli("db", "current", "--db", url, "--json")
    assert json.loads(out)["state"] == "old_chain"


def _newer(tmp_path: Path) -> str:
    """A baseline-shaped log at a revision this diagevo does not know: what a newer one leaves."""
    url = f"sqlite:///{tmp_path / 'newer.db'}"
    assert upgrade(url) == (None, HEAD_REVISION)
    with sqlite3.connect(tmp_path / "newer.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0002'")  # an id the old chain had, too
    return url


def test_a_newer_diagevos_database_says_upgrade_diagevo_and_is_left_alone(tmp_path: Path) -> None:
    url = _newer(tmp_path)
    status = revision_status(url)
    assert (status.current, status.state) == ("0002", "unknown")
    before = (tmp_path / "newer.db").read_bytes()
    for args in (("memory", "stats"), ("runs",), ("db", "upgrade")):
        code, out, err = cli(*args, "--db", url)
        lines = err.strip().splitlines()
        assert code == 1 and len(lines) == 1, err
        assert "unknown to this diagevo (expected 0001): a newer diagevo wrote it; upgrade diagevo (`" in lines[0]
        assert "db upgrade --db" not in lines[0]
    with pytest.raises(SchemaOutdated, match=r"upgrade diagevo \(install a newer diagevo\)$"):
        upgrade(url)
    code, out, _ = cli("db", "current", "--db", url)
    assert "this diagevo is older than the database" in out
    assert (tmp_path / "newer.db").read_bytes() == before


def test_postgresql_an_old_chain_schema_is_carried_over_as_it_was(postgres_backend: PostgresBackend) -> None:
    """chain-0019.pg.sql: a schema the old code wrote at 0019 (its triggers, functions, event
    types), loaded into a fresh schema; the carried-over export is that code's byte for byte."""
    url = postgres_backend.fresh_url()
    schema = str(make_url(url).query["options"]).split("=", 1)[1]
    dump = (OLD / "chain-0019.pg.sql").read_text(encoding="utf-8").replace("old_chain_0019", schema)
    engine = postgres_backend.engine(url)
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        raw.execute(dump)  # the dump as it is (no parameters: a % is left alone)
        raw.commit()
    engine.dispose()
    assert (revision_status(url).current, revision_status(url).state) == ("0019", "old_chain")
    code, out, err = cli("memory", "stats", "--run", "fx", "--db", url)
    assert code == 1 and "earlier diagevo's migrations" in err and "db upgrade --db" in err, err
    code, out, err = cli("db", "upgrade", "--db", url)
    assert code == 0 and "upgraded from revision 0019 of an earlier diagevo's migrations" in out, err
    code, out, err = cli("memory", "export", "--run", "fx", "--db", url)
    assert code == 0, err
    assert out.encode() == (OLD / "chain-0019.pg.jsonl").read_bytes()
    code, out, err = cli("memory", "verify", "--run", "fx", "--json", "--db", url)
    assert code == 0 and json.loads(out)["ok"] is True, out
    assert upgrade(url) == (HEAD_REVISION, HEAD_REVISION)
    with open_log(url) as store:  # the writer's checks of the baseline take the carried-over log on
        assert store.runs() == ["fx"] and store.last_seq("fx") == 258
