"""The JSONL interchange format: ``memory ingest`` and ``memory export``.

Ingest is all-or-nothing and one decision: every line is checked against the catalog, then, under
the append lock and against the log's head, run by run against the memory's invariants
(continuing from what the log holds) and against the events stored under the same ids, and one
append stores it.
Lines are read and written by one codec: split on ``\n`` only, each parsed with a bounded depth
(:mod:`diagevo.text.parsing`), so whatever :func:`export_lines` writes, :func:`parse_lines` reads back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, cast

from diagevo.catalog import SCHEMA_VERSION, RoundCommitted, RunForked, RunStarted
from diagevo.catalog.ids import rebase_event_id
from diagevo.errors import BadInput
from diagevo.log import EventReader, Recorder, StoredEvent, payload
from diagevo.log.canonical import canonical_bytes
from diagevo.log.chain import GENESIS_HASH, Pending, canonical_event_json, chain_hash
from diagevo.memory.counting import Ledger, Tally
from diagevo.results.runs import LeftBehind
from diagevo.schemas import EventIn, InvalidEvent, validate_event
from diagevo.text.parsing import loads, one_line, split_lines
from diagevo.views.caches import refresh
from diagevo.views.counts import stored_tally
from diagevo.views.forks import fork_source_problem
from diagevo.views.memory import load_memory

EXPORT_ONLY_FIELDS = ("seq", "recorded_at", "hash", "prev_hash")


class IngestError(BadInput):
    """``line N: reason``, one short line."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(one_line(f"line {line}: {reason}"))
        self.line = line


@dataclass(frozen=True)
class IngestResult:
    lines: int
    appended: int
    skipped: int
    runs: tuple[str, ...]


def parse_lines(lines: Iterable[str] | str) -> list[tuple[int, EventIn]]:
    """Parse and validate every non-blank line (schema only), and check the hashes an export
    carries (:class:`ExportChain`). A text is split on ``\n`` only; an iterable of lines is taken
    as given (numbered from 1)."""
    numbered = split_lines(lines) if isinstance(lines, str) else enumerate(lines, start=1)
    out: list[tuple[int, EventIn]] = []
    chains = ExportChain()
    for no, line in numbered:
        if not line.strip():
            continue
        try:
            raw = loads(line)
        except BadInput as exc:
            raise IngestError(no, str(exc)) from None
        if not isinstance(raw, dict):
            raise IngestError(no, "expected a JSON object")
        claimed = raw.get("hash")
        for key in EXPORT_ONLY_FIELDS:
            raw.pop(key, None)
        try:
            ev = validate_event(raw)
        except InvalidEvent as exc:
            raise IngestError(no, str(exc)) from None
        chains.check(no, ev, claimed)
        out.append((no, ev))
    return out


class ExportChain:
    """The hash chains of an export (``memory export`` writes each event's ``hash``): a line's
    hash must be the hash of its content after the run's line before it, so an edited, inserted
    or reordered line is refused. A run's chain starts at its ``run.started`` (or, for a file
    that holds a run's tail, at its first line's hash); once a run's lines carry hashes, each of
    them must. A file without hashes (written by hand or by another tool) is checked by the
    rules alone."""

    def __init__(self) -> None:
        self.heads: dict[str, str | None] = {}  # run -> the hash of its last line (None: no hashes)

    def check(self, no: int, ev: EventIn, claimed: Any) -> None:
        first = ev.run not in self.heads
        head = self.heads.get(ev.run)
        if claimed is None:
            if head is not None:
                raise IngestError(no, f"no hash, while the lines of run {ev.run!r} before it carry theirs")
            self.heads[ev.run] = None
            return
        if not isinstance(claimed, str):
            raise IngestError(no, "hash must be a string")
        if not first and head is None:
            raise IngestError(no, f"a hash, while the lines of run {ev.run!r} before it carry none")
        prev = GENESIS_HASH if first and ev.type == RunStarted.name else head
        if prev is not None:
            _typ, _rnd, version, data_json = _as_stored(ev)
            canonical = canonical_event_json(ev.event_id, ev.run, ev.round, ev.type, version, data_json.decode())
            if chain_hash(prev, canonical) != claimed:
                raise IngestError(
                    no, f"hash mismatch: event {ev.event_id!r} is not what was exported there (edited or inserted)"
                )
        self.heads[ev.run] = claimed


def check_invariants(store: Recorder, events: list[tuple[int, EventIn]]) -> list[EventIn]:
    """Fold the new events on top of each run's stored memory and count them with what the run
    has counted (:mod:`diagevo.memory.counting`); returns those not yet stored.

    Called under the append lock (:func:`ingest_events`): what it reads is the log's head. A line
    whose id its run holds already is skipped when it is the stored event (an export ingested
    again), and refused when its type, round or data differ; so is a second line of the file
    with the same id and other content. The cost grows with the file, not with the stored log:
    only the file's ids are looked up, each run's memory is its latest snapshot plus the tail."""
    runs = list(dict.fromkeys(ev.run for _, ev in events))
    held = set(store.runs()) if len(runs) > 64 else {r for r in runs if store.has_run(r)}
    stored = _stored_events(store, events, held)
    ledgers: dict[str, Ledger] = {}  # read on a run's first new event only (a re-ingest reads none)
    fresh: list[EventIn] = []
    seen: dict[tuple[str, str], tuple[int, EventIn]] = {}  # (run, id) -> its first line
    for no, ev in events:
        key = (ev.run, ev.event_id)
        if key in stored:
            if stored[key] != _as_stored(ev):
                raise IngestError(no, f"event id {ev.event_id!r} of run {ev.run!r} is stored already as another event")
            continue  # idempotent re-ingest of a stored event
        if key in seen:
            first, earlier = seen[key]
            if _as_stored(earlier) != _as_stored(ev):
                raise IngestError(no, f"event id {ev.event_id!r} of run {ev.run!r} is on line {first} as another event")
            continue  # the same event twice: stored once
        seen[key] = (no, ev)
        ledger = ledgers.get(ev.run)
        if ledger is None:
            ledger = ledgers[ev.run] = _ledger(store, ev.run, events, ev.run in held)
        event = ev.event
        taken = ledger.take(ev.round, event)  # against the memory before the event
        if taken.refusal is not None:
            raise IngestError(no, taken.refusal.why)
        broken = taken.counted
        if broken is None and isinstance(event, RunForked):
            broken = _fork_refusal(store, ev, event, ev.run in held, {e.run for _, e in events})
        if broken is not None:
            rule, reason = broken
            raise IngestError(no, f"{rule}: {reason}")
        fresh.append(ev)
    return fresh


def _fork_refusal(
    store: EventReader, ev: EventIn, forked: RunForked, held: bool, in_file: set[str]
) -> tuple[str, str] | None:
    """A ``run.forked`` opens a run the file creates (a fork's or a what-if's copy), of a source
    held here (its commit's hash checked) or in the same file (checked by ``memory verify``)."""
    rule = "run forked at its opening"
    if held:
        return rule, f"run {ev.run!r} is in the database already: run.forked only opens a run a fork or what-if creates"
    source = forked.source_run
    if source != ev.run and source in in_file and not store.has_run(source):
        return None
    problem = fork_source_problem(store, ev.run, cast(RunForked, ev.event))
    return None if problem is None else (rule, problem)


def _stored_events(
    store: EventReader, events: list[tuple[int, EventIn]], held: set[str]
) -> dict[tuple[str, str], tuple[str, int, int, bytes]]:
    """(run, id) -> (type, round, version, data) of the stored events that the file's ids name."""
    ids: dict[str, list[str]] = {}
    for _, ev in events:
        if ev.run in held:
            ids.setdefault(ev.run, []).append(ev.event_id)
    stored: dict[tuple[str, str], tuple[str, int, int, bytes]] = {}
    for run, its in ids.items():
        for e in store.read(run, keys={"event_id": its}):
            stored[run, e.event_id] = (e.type, e.round, e.version, canonical_bytes(payload(e)))
    return stored


def _ledger(store: Recorder, run: str, events: list[tuple[int, EventIn]], held: bool) -> Ledger:
    """What the stored run has counted of what the file names (its failure and question ids,
    the rounds it touches), and its memory at the head (a run the file starts: none yet)."""
    mine = [ev for _, ev in events if ev.run == run]
    tally = stored_tally(store, run, mine, rounds=True) if held else Tally()
    tally.whatif = any(isinstance(e := ev.event, RunForked) and e.whatif is not None for ev in mine)
    return Ledger.folded(run, tally, load_memory(store, run) if held else None)


def _as_stored(ev: EventIn) -> tuple[str, int, int, bytes]:
    """(type, round, version, data) of an event as the log stores it (long texts named by their
    sha256)."""
    ((_eid, _run, rnd, typ, version, data_json, *_),) = Pending([ev]).all()
    return typ, rnd, version, data_json.encode()


def ingest(store: Recorder, lines: Iterable[str] | str) -> IngestResult:
    """Store a JSONL text (or its lines): all or nothing."""
    return ingest_events(store, parse_lines(lines))


def as_run(events: list[tuple[int, EventIn]], new: str) -> list[tuple[int, EventIn]]:
    """The events of a one-run file as run ``new``: the run renamed and the ids rebased as a fork
    rebases them (``SRC/T/KEY`` -> ``NEW/T/KEY``), so that the round protocol resumes it."""
    runs = list(dict.fromkeys(ev.run for _, ev in events))
    if len(runs) != 1:
        raise BadInput(
            f"only a file of one run can become another run; this one holds {len(runs)} ({', '.join(runs[:3])}...)"
        )
    if not new.strip():
        raise BadInput("the run needs a name")
    (source,) = runs
    return [(no, replace(ev, run=new, event_id=rebase_event_id(ev.event_id, source, new))) for no, ev in events]


def copied_event(e: StoredEvent, source: str, new: str, **changed: Any) -> EventIn:
    """Event ``e`` of run ``source`` copied into run ``new`` (a fork's or a what-if's copy): its
    id rebased as :func:`as_run` rebases it, its data the stored record with the ``changed``
    fields replaced, at its stored version, validated as ingest validates a line. The copy holds
    the source's bytes, which the typed event cannot give back: its class's reader upcasts an
    older version."""
    return validate_event(
        {
            "type": e.type,
            "run": new,
            "round": e.round,
            "event_id": rebase_event_id(e.event_id, source, new),
            "data": {**payload(e), **changed},
            "schema_version": e.version,
        }
    )


def copied_or_left(e: StoredEvent, source: str, new: str, **changed: Any) -> EventIn | LeftBehind:
    """:func:`copied_event`, or what the copy leaves behind of a stored event its class refuses (a
    row written raw, past every check, that its readers take unvalidated): a fork or a what-if of
    such a log is made without it rather than stopped, and says so."""
    try:
        return copied_event(e, source, new, **changed)
    except InvalidEvent as exc:
        return LeftBehind(e.seq, one_line(str(exc)))


def ingest_events(store: Recorder, events: list[tuple[int, EventIn]]) -> IngestResult:
    """Store what :func:`parse_lines` read (so that a bad file is refused before a store opens).
    Event ids are unique per run: a file whose run was renamed is stored as that run."""

    def decide() -> list[EventIn]:  # under the append lock: one decision against the head
        return check_invariants(store, events)

    done = store.append_decided(decide)
    appended = done.appended
    runs = tuple(dict.fromkeys(ev.run for _, ev in events))
    for run in dict.fromkeys(ev.run for ev in done.events if ev.type == RoundCommitted.name):
        refresh(store, run)  # the views' caches of the runs whose rounds were committed
    return IngestResult(lines=len(events), appended=appended, skipped=len(events) - appended, runs=runs)


# Characters that some line readers (Python's str.splitlines, JavaScript) take for line ends:
# written as JSON escapes, so an export is one event a line for every reader, not only ours.
_LINE_BREAKERS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def encode_line(obj: dict[str, Any]) -> str:
    """One JSONL line (with its ``\n``) that :func:`diagevo.text.parsing.split_lines` and
    :func:`diagevo.text.parsing.loads` read back as ``obj``."""
    line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    if "\u2028" in line or "\u2029" in line or "\x85" in line:
        line = line.translate(_LINE_BREAKERS)
    return line + "\n"


def export_lines(store: EventReader, run: str) -> Iterator[str]:
    """The run's events, one JSON object a line (``\n``-terminated, no other line breaks). An
    event stored at a version of its class other than 1 says which (``schema_version``): a line
    without one is of version 1, so the export of a log written before versions were stored is
    byte for byte what it was."""
    for e in store.read(run, texts=True):
        obj = {
            "type": e.type,
            "run": e.run,
            "round": e.round,
            "event_id": e.event_id,
            "data": payload(e),
            "seq": e.seq,
            "recorded_at": e.recorded_at,
            "hash": e.hash,
        }
        if e.version != SCHEMA_VERSION:
            obj["schema_version"] = e.version
        yield encode_line(obj)
