"""``verify`` detects a log whose tail was cut off: every saved view state names the seq and hash
of the event it summarises (the snapshots their ``round.committed``), so deleting the last events
of a run (triggers dropped, as anyone holding the file can) is reported although the shortened
hash chain is intact."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from diagevo.catalog import RoundCommitted
from diagevo.log import open_log
from diagevo.log.checks import verify_chain
from diagevo.views.caches import refresh as refresh_snapshots
from diagevo.views.verify import verify_run
from tests.conftest import Backend
from tests.logs import Log
from tests.test_cli_memory import run_cli


def _three_rounds() -> Log:
    log = Log("t")
    log.node("N1").cause("C1", "N1").question("q1", 0.5, active="C1").commit(retained=1)
    log.question("q2", 0.4, active="C1").commit(retained=1)
    log.question("q3", 0.6, active="C1").commit(retained=1)
    return log


def _stored(url: str) -> dict[int, int]:
    """The log stored with its snapshots; returns round -> seq of its round.committed."""
    with open_log(url) as store:
        store.append(_three_rounds().events())
        assert refresh_snapshots(store, "t") == 3
        assert verify_run(store, "t") == []
        return {e.round: e.seq for e in store.read("t", types=(RoundCommitted,))}


def _raw(backend: Backend, url: str, *sqls: str) -> None:
    engine = backend.engine(url)
    with engine.begin() as conn:
        for sql in sqls:
            conn.execute(text(sql))
    engine.dispose()


def _anchors(store, name: str = "memory") -> list[tuple[int, int, str]]:  # type: ignore[no-untyped-def]
    return [(s.part, s.seq, s.hash) for s in store.view_states(name, "t", anchored=False)]


def test_snapshots_record_the_hash_of_their_commit(db_url: str) -> None:
    commits = _stored(db_url)
    with open_log(db_url) as store:
        hashes = {e.seq: e.hash for e in store.read("t", types=(RoundCommitted,))}
        assert _anchors(store) == [(r, s, hashes[s]) for r, s in sorted(commits.items())]


def test_a_cut_off_last_round_is_detected(backend: Backend, db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    commits = _stored(db_url)
    with open_log(db_url) as store:
        (stats,) = store.view_states("stats", "t")  # the saved statistics: another witness
        stats_at = stats.seq
    backend.disable_append_only(db_url)
    _raw(backend, db_url, f"DELETE FROM events WHERE seq > {commits[2]}")
    with open_log(db_url) as store:
        assert verify_chain(store, "t") == []  # a prefix of a chain is a chain
        problems = verify_run(store, "t")
    assert stats_at > commits[2]
    assert problems == [
        f"log cut off: the snapshot of round 3 summarises the log up to seq {commits[3]}, "
        f"but the run's log ends at seq {commits[2]}",
        f"log cut off: the saved state of view 'stats' summarises the log up to seq {stats_at}, "
        f"but the run's log ends at seq {commits[2]}",
    ]
    code, out, err = run_cli(capsys, "memory", "verify", "--db", db_url, "--run", "t")
    assert code != 0 and "log cut off" in out + err


def test_a_cut_off_open_round_is_detected_by_the_index_state(backend: Backend, db_url: str) -> None:
    from diagevo.log import ViewState

    commits = _stored(db_url)
    _raw(backend, db_url, "DELETE FROM views WHERE name = 'stats'")  # only the index's witness
    with open_log(db_url) as store:
        last = store.event_at("t", commits[3])
        store.put_view_states([ViewState("vector_index", "t", 0, last.seq, last.hash, {"model": "m"})])  # type: ignore[union-attr]
        assert verify_run(store, "t") == []
    backend.disable_append_only(db_url)
    _raw(backend, db_url, f"DELETE FROM events WHERE seq = {commits[3]}")
    _raw(backend, db_url, "DELETE FROM views WHERE name = 'memory' AND part = 3")  # and the snapshot that named it
    with open_log(db_url) as store:
        assert verify_run(store, "t") == [
            f"log cut off: the saved state of view 'vector_index' summarises the log up to seq {commits[3]}, "
            f"but the run's log ends at seq {commits[3] - 1}"
        ]


def test_a_replaced_commit_is_detected_by_its_hash(backend: Backend, db_url: str) -> None:
    commits = _stored(db_url)
    _raw(backend, db_url, f"UPDATE views SET hash = '{'0' * 64}' WHERE name = 'memory' AND part = 2")
    with open_log(db_url) as store:
        assert verify_run(store, "t") == [
            f"log replaced: the event at seq {commits[2]} is not the one the snapshot of round 2 summarised"
        ]


def test_verify_names_the_last_event_to_keep_elsewhere(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    commits = _stored(db_url)
    code, out, _ = run_cli(capsys, "memory", "verify", "--db", db_url, "--run", "t", "--json")
    with open_log(db_url) as store:
        (last,) = store.read("t", after_seq=commits[3] - 1)
    assert code == 0 and json.loads(out)["last"] == {"seq": commits[3], "hash": last.hash}
