"""``verify`` detects a log whose tail was cut off: the snapshots name the seq and hash of the
``round.committed`` they summarise (migration 0006) and the projections' checkpoints their last
seq, so deleting the last events of a run (triggers dropped, as anyone holding the file can) is
reported although the shortened hash chain is intact. Snapshots written before 0006 still verify."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from diagevo.events.store import HEAD_REVISION, EventStore, current, upgrade
from diagevo.replay import refresh_snapshots, verify_run
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
    with EventStore(url) as store:
        store.append(_three_rounds().events())
        assert refresh_snapshots(store, "t") == 3
        assert verify_run(store, "t") == []
        return {e.round: e.seq for e in store.read("t", types=("round.committed",))}


def _raw(backend: Backend, url: str, *sqls: str) -> None:
    engine = backend.engine(url)
    with engine.begin() as conn:
        for sql in sqls:
            conn.execute(text(sql))
    engine.dispose()


def test_snapshots_record_the_hash_of_their_commit(db_url: str) -> None:
    commits = _stored(db_url)
    with EventStore(db_url) as store:
        hashes = {e.seq: e.hash for e in store.read("t", types=("round.committed",))}
        assert store.snapshot_anchors("t") == [(r, s, hashes[s]) for r, s in sorted(commits.items())]


def test_a_cut_off_last_round_is_detected(backend: Backend, db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    commits = _stored(db_url)
    with EventStore(db_url) as store:
        stats_at = store.get_checkpoint("stats", "t")  # the stats read model: another witness
    backend.disable_append_only(db_url)
    _raw(backend, db_url, f"DELETE FROM events WHERE seq > {commits[2]}")
    with EventStore(db_url) as store:
        assert store.verify_chain("t") == []  # a prefix of a chain is a chain
        problems = verify_run(store, "t")
    assert stats_at > commits[2]
    assert problems == [
        f"log cut off: the snapshot of round 3 summarises the log up to seq {commits[3]}, "
        f"but the run's log ends at seq {commits[2]}",
        f"log cut off: projection 'stats' applied the log up to seq {stats_at}, but it ends at seq {commits[2]}",
    ]
    code, out, err = run_cli(capsys, "memory", "verify", "--db", db_url, "--run", "t")
    assert code != 0 and "log cut off" in out + err


def test_a_cut_off_open_round_is_detected_by_the_index_checkpoint(backend: Backend, db_url: str) -> None:
    commits = _stored(db_url)
    _raw(backend, db_url, "DELETE FROM checkpoints WHERE name = 'stats'")  # only the index's witness
    with EventStore(db_url) as store:
        store.set_checkpoint("vector_index", "t", commits[3])
        assert verify_run(store, "t") == []
    backend.disable_append_only(db_url)
    _raw(backend, db_url, f"DELETE FROM events WHERE seq = {commits[3]}")
    _raw(backend, db_url, "DELETE FROM snapshots WHERE round = 3")  # and the snapshot that named it
    with EventStore(db_url) as store:
        assert verify_run(store, "t") == [
            f"log cut off: projection 'vector_index' applied the log up to seq {commits[3]}, but it ends at seq {commits[3] - 1}"
        ]


def test_a_replaced_commit_is_detected_by_its_hash(backend: Backend, db_url: str) -> None:
    commits = _stored(db_url)
    _raw(backend, db_url, f"UPDATE snapshots SET hash = '{'0' * 64}' WHERE round = 2")
    with EventStore(db_url) as store:
        assert verify_run(store, "t") == [
            f"log replaced: the event at seq {commits[2]} is not the one the snapshot of round 2 summarised"
        ]


def test_snapshots_without_a_hash_still_verify(backend: Backend, db_url: str) -> None:
    _stored(db_url)
    _raw(backend, db_url, "UPDATE snapshots SET hash = NULL")
    with EventStore(db_url) as store:
        assert verify_run(store, "t") == []


def test_a_log_of_revision_0005_is_upgraded_and_verifies(backend: Backend, db_url: str) -> None:
    commits = _stored(db_url)
    backend.downgrade(db_url, "0005")
    assert current(db_url) == "0005"
    assert upgrade(db_url) == ("0005", HEAD_REVISION)
    with EventStore(db_url) as store:
        assert store.snapshot_anchors("t") == [(r, s, None) for r, s in sorted(commits.items())]
        assert verify_run(store, "t") == []
    backend.disable_append_only(db_url)  # the old snapshots still catch a cut-off tail by their seq
    _raw(backend, db_url, f"DELETE FROM events WHERE seq > {commits[1]}")
    with EventStore(db_url) as store:
        assert [p.split(",")[0] for p in verify_run(store, "t")] == [
            "log cut off: the snapshot of round 2 summarises the log up to seq " + str(commits[2]),
            "log cut off: the snapshot of round 3 summarises the log up to seq " + str(commits[3]),
            f"log cut off: projection 'stats' applied the log up to seq {store.get_checkpoint('stats', 't')}",
        ]


def test_verify_names_the_last_event_to_keep_elsewhere(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    commits = _stored(db_url)
    code, out, _ = run_cli(capsys, "memory", "verify", "--db", db_url, "--run", "t", "--json")
    with EventStore(db_url) as store:
        (last,) = store.read("t", after_seq=commits[3] - 1)
    assert code == 0 and json.loads(out)["last"] == {"seq": commits[3], "hash": last.hash}
