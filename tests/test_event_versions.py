"""Every stored event keeps the version of its class it was written at, and a read upcasts it
from there: an upcaster runs once on an event, never on one already of its version. The proof is
an upcaster that is not idempotent (version 2 counts ``n`` in tenths: ×10), on every backend,
through export and ingest. (Old logs, all of version 1, read byte-identically: test_old_logs.)"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from diagevo.catalog import CATALOG, Kind, NewerEvent, RunStarted
from diagevo.catalog.event import Event
from diagevo.interchange import IngestError, export_lines, ingest
from diagevo.log import Recorder, open_log
from diagevo.log import registry as log_registry
from diagevo.log.checks import verify_chain
from diagevo.schemas import EventIn, new_event, validate_event
from diagevo.views.verify import verify_run
from tests.conftest import SQLiteBackend


def _tenths(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 counted ``n`` in units, version 2 in tenths: run twice, it is wrong."""
    data["n"] = data["n"] * 10
    return data


class Scaled(Event):
    """A test type at version 2 whose upcaster from version 1 is not idempotent."""

    name = "test.scaled"
    kind = Kind.BOOKKEEPING
    class_version = 2
    upcast_v1_v2 = staticmethod(_tenths)

    n: int


@pytest.fixture
def scaled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``Scaled`` in the catalog (before a database is created: PostgreSQL registers the types
    of the catalog that migrates it, with their versions)."""
    monkeypatch.setitem(CATALOG, Scaled.name, Scaled)
    log_registry._checker.cache_clear()
    yield
    log_registry._checker.cache_clear()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), "memory"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Any, scaled: None) -> Callable[[], str]:
    """A function giving fresh, empty databases of one backend (in-memory ones live as long as the
    test process: a few small logs)."""

    def make() -> str:
        if request.param == "sqlite":
            url = SQLiteBackend(tmp_path).fresh_url()
        elif request.param == "postgres":
            url = request.getfixturevalue("postgres_backend").fresh_url()
        else:
            url = f"memory://{uuid.uuid4().hex}"
        return url

    return make


def _run(run: str) -> list[EventIn]:
    """run.started, then a test.scaled written now (version 2, n=3) and one stored by an older
    diagevo (version 1, n=3: 30 tenths)."""
    return [
        new_event(RunStarted(config={"k": 0.5}), run=run, at_round=0, event_id=f"{run}-start"),
        new_event(Scaled(n=3), run=run, at_round=1, event_id=f"{run}-now"),
        validate_event(
            {
                "type": Scaled.name,
                "run": run,
                "round": 1,
                "event_id": f"{run}-old",
                "data": {"n": 3},
                "schema_version": 1,
            }
        ),
    ]


def _read(store: Recorder, run: str) -> list[tuple[int, int]]:
    """(stored version, n as read) of the run's test.scaled, by both reads."""
    read = [(e.version, e.event.n) for e in store.read(run, types=(Scaled,))]  # type: ignore[attr-defined]
    rows = [(r.version, r.event.n) for r in store.rows(run, types=(Scaled,))]  # type: ignore[attr-defined]
    assert read == rows
    return read


def test_an_event_is_upcast_from_the_version_it_was_stored_at(fresh_url: Any) -> None:
    with open_log(fresh_url()) as store:
        store.append(_run("r"))
        assert _read(store, "r") == [(2, 3), (1, 30)]  # the one of version 2 is not upcast again
        assert [json.loads(r.data) for r in store.raw("r") if r.type == Scaled.name] == [{"n": 3}] * 2  # as written
        assert [e.version for e in store.read("r", types=(RunStarted,))] == [RunStarted.class_version]
        assert verify_chain(store, "r") == []
        assert verify_run(store, "r") == []


def test_export_and_ingest_keep_each_version_and_hash(fresh_url: Any) -> None:
    with open_log(fresh_url()) as source:
        source.append(_run("r"))
        lines = list(export_lines(source, "r"))
        hashes = [(e.event_id, e.version, e.hash) for e in source.read("r")]
    versions = [json.loads(line).get("schema_version") for line in lines]
    assert versions == [RunStarted.class_version, 2, None]  # version 1, as every event of an older log, goes unsaid
    with open_log(fresh_url()) as copy:
        assert ingest(copy, "".join(lines)).appended == 3
        assert [(e.event_id, e.version, e.hash) for e in copy.read("r")] == hashes
        assert _read(copy, "r") == [(2, 3), (1, 30)]
        assert verify_run(copy, "r") == []
        assert list(export_lines(copy, "r")) != [] and ingest(copy, "".join(lines)).skipped == 3


def test_a_line_at_a_version_its_class_does_not_have_is_refused_by_line(scaled: None) -> None:
    started = json.dumps(
        {"type": "run.started", "run": "r", "round": 0, "event_id": "s", "data": {"config": {"k": 0.5}}}
    )
    newer = json.dumps(
        {"type": Scaled.name, "run": "r", "round": 0, "event_id": "n", "data": {"n": 1}, "schema_version": 3}
    )
    with open_log(f"memory://{uuid.uuid4().hex}") as store:
        with pytest.raises(IngestError, match=r"^line 2: test.scaled: schema_version 3 is newer than this diagevo's"):
            ingest(store, f"{started}\n{newer}\n")
        with pytest.raises(IngestError, match=r"^line 2: schema_version: Input should be greater than or equal to 1"):
            ingest(store, f"{started}\n{newer.replace(': 3', ': 0')}\n")
        assert store.runs() == []


def test_a_stored_version_newer_than_the_class_is_not_read_as_another(scaled: None) -> None:
    with pytest.raises(NewerEvent, match="schema_version 3 is newer"):
        Scaled.from_stored({"n": 1}, 3)
    assert Scaled.from_stored({"n": 1}, 1).n == 10 and Scaled.from_stored({"n": 1}, 2).n == 1


def test_an_old_line_written_in_the_new_shape_is_stored_as_what_it_reads(scaled: None) -> None:
    """A line of version 1 whose data is not as version 1 stored it (a default left out) is
    stored as the event it reads as, at the class's version: never as something that reads as
    another event."""
    ev = validate_event(
        {"type": RunStarted.name, "run": "r", "round": 0, "event_id": "s", "data": {"config": {"k": 1}}}
    )
    assert (ev.schema_version, ev.data) == (RunStarted.class_version, {"config": {"k": 1}, "seed": 0})
    kept = validate_event(
        {"type": RunStarted.name, "run": "r", "round": 0, "event_id": "s", "data": {"config": {"k": 1}, "seed": 0}}
    )
    assert (kept.schema_version, kept.data) == (1, {"config": {"k": 1}, "seed": 0})  # as written: its hash stays
