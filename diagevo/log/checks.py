"""What ``memory verify`` reads of the stored rows: the hash chain recomputed, and every row
against its key columns, its texts, its type's shape and its class, in one pass.

Its own module, loaded by the commands that verify: the events' and the config's models the
pass validates against are not what a light read of the log needs."""

from __future__ import annotations

from collections.abc import Iterator

from diagevo.catalog import CATALOG, RunConfigured, RunStarted, StoredEvent, UnreadableRow
from diagevo.log.chain import GENESIS_HASH, canonical_event_json, chain_hash, key_values
from diagevo.log.recorder import LogOperator, not_texts, shown_type
from diagevo.log.registry import stored_problem
from diagevo.log.stored import RawRow, column_problem, stamp_problem, text_problems, text_refs
from diagevo.schemas import refused_by_type

PASSED = " (every reader passes it over)"
"""What ``memory verify`` adds to the line naming a row every read passes over."""
CONFIG_EVENTS = (RunStarted.name, RunConfigured.name)
"""The types that hold a run's config: ``verify_chain`` leaves what their class refuses to
``memory verify``'s config check, which names the fork past it. Every other row in shape is held
to its class too: it can break a rule of its class (a bound, a ``mode`` that does not fit its causes)."""


def verify_chain(store: LogOperator, run: str) -> list[str]:
    """Recompute the run's hash chain, check every text against its key, every key column
    against the data it is copied from and every event against its type's shape (what
    PostgreSQL refuses on insert, :mod:`diagevo.log.registry`) and its class; one line per
    problem (empty: intact)."""
    problems: list[str] = []
    for _ in checked_rows(store, run, problems):
        pass
    return problems


def checked_rows(store: LogOperator, run: str, problems: list[str]) -> Iterator[StoredEvent | UnreadableRow]:
    """:func:`verify_chain`'s one pass over the run's stored rows, each row's problems
    appended to ``problems`` as it is read; each row as :func:`every_row` gives it (a row every
    read passes over is named, and given as an :class:`~diagevo.catalog.UnreadableRow`), while
    no row so far is out of shape (past one, the rest are checked, not given): what ``memory
    verify`` folds as it checks, without reading the log twice."""
    prev, readable = GENESIS_HASH, True
    for r in store.raw(run):
        odd = not_texts(RawRow._fields, r)  # its hash is not recomputed from what is no text
        if odd is None and r.prev_hash != prev:
            problems.append(f"seq {r.seq}: prev_hash does not match the hash of the run's previous event")
        canonical = None if odd else canonical_event_json(r.event_id, run, r.round, r.type, r.schema_version, r.data)
        if canonical is not None and chain_hash(r.prev_hash, canonical) != r.hash:
            problems.append(f"seq {r.seq}: hash mismatch (event {r.event_id} was altered)")
        prev = r.hash
        columns = odd or column_problem(r.round, r.schema_version)
        data, shape = stored_problem(r) if columns is None else (None, None)
        if data is None or columns is not None or (shape is not None and r.type in CATALOG):  # every read skips it
            why = columns or shape or ""
            problems.append(f"seq {r.seq}: {why}{PASSED}")
            if readable:
                yield UnreadableRow(r.seq, shown_type(r.type), why)
            continue
        if key_values(data) != tuple(r.keys):
            problems.append(f"seq {r.seq}: its id columns do not hold the ids its data names")
        if shape is None and r.type not in CONFIG_EVENTS:
            refused = refused_by_type(r.type, data, r.schema_version)
            shape = None if refused is None else f"out of shape: {refused}"
        if shape is not None:
            problems.append(f"seq {r.seq}: {shape}")
            readable = False
        refs = text_refs(r.type, data)
        if refs or r.texts is not None:  # a texts column of no object is named, whatever its row holds
            problems += text_problems(r.seq, refs, r.texts)[0]
        stamp = stamp_problem(r.recorded_at)
        if stamp is not None:
            problems.append(f"seq {r.seq}: {stamp}")
        if readable:
            yield StoredEvent(r.seq, r.round, r.type, r.schema_version, data)
