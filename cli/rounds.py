"""``diagevo round {start,requests,promote,withdraw,commit,status}``: the round protocol for any trainer.

Thin: each command parses, calls :mod:`diagevo.rounds` and renders. Failures go through
``diagevo diagnose``. Every command takes ``--run``, ``--db`` and ``--json``. ``record``, which
reads verl's output as well, is :mod:`diagevo.cli.record`'s.
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, cast

import typer
from rich.table import Table

from diagevo import rounds
from diagevo.cli.common import CLIError, DbOpt, JsonOpt, RunOpt, console, emit_json
from diagevo.cli.safe import text
from diagevo.cli.store import open_store
from diagevo.errors import DiagevoError
from diagevo.rounds.protocol import unknown_run
from diagevo.text.parsing import decimal_number
from diagevo.text.words import plural
from diagevo.train.config import load_config
from diagevo.views.memory import resolve_run

RoundOpt = Annotated[int | None, typer.Option("--round", min=1, help="Round (default: the run's open round).")]


@contextmanager
def picked(db: str | None, run: str | None, t: int | None, *, or_last: bool = False) -> Iterator[rounds.Round]:
    """Round ``t`` (default: the open one; with ``or_last``, else the last committed, which the
    library refuses with what can still be done) of the run to work on, in the database ``db`` (open
    while the command works on it); when ``--run`` was not given, an error says which run was picked."""
    with open_store(db) as store:
        if run is not None and not store.has_run(run):
            raise unknown_run(store, run)
        r = resolve_run(store, run)
        if t is None and or_last:
            st = rounds.round_state(store, r)
            t = st.open_round or st.last_committed or None
        try:
            yield rounds.Round(store, r, t if t is not None else rounds.current_round(store, r))
        except DiagevoError as exc:
            if run is None and exc.args and isinstance(exc.args[0], str):
                exc.args = (f"{exc.args[0]} [run {r}: the latest run, as --run was not given]", *exc.args[1:])
            raise


def start(
    run: Annotated[str, typer.Option("--run", help="Run id (created when new).")],
    db: DbOpt = None,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="TOML config of a new run (default: built-in defaults).")
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a field of a new run's config: section.field=value.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of a new run's request streams.")] = 0,
    trainer: Annotated[
        str | None, typer.Option("--trainer", help="Name of the trainer that drives a new run (runs, report show it).")
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            help="An existing run: allow (go on as it is, whatever --config says), must (the run must exist), "
            "never (the run must be new). Default: go on, refusing a --config that differs from the run's.",
        ),
    ] = None,
    json: JsonOpt = False,
) -> None:
    if resume is not None and resume not in rounds.RESUMES:
        raise CLIError(f"--resume must be allow, must or never, not {resume[:40]!r}")
    chosen = cast("rounds.Resume | None", resume)
    with open_store(db, create=True, keep_if_refused=False) as store:  # a refused start leaves no file
        exists = run in store.runs()
        named = trainer or rounds.EXTERNAL_TRAINER
        if exists and config is None:  # the run goes on as it is (--resume never refuses it)
            cfg = rounds.run_config(store, run)
            created = rounds.start_run(store, run, cfg, seed, resume=chosen or "allow", trainer=named)
        else:  # a new run, or --config held against the run's (the fields that differ named)
            cfg = load_config(config, [*(set_ or []), f"train.seed={seed}", f"train.run={jsonlib.dumps(run)}"])
            created = rounds.start_run(store, run, cfg, seed, resume=chosen, trainer=named)
        if exists and set_ and config is None:  # a fork before its first round of its own takes config changes
            rounds.configure_fork(store, run, set_)
        t = rounds.open_round(store, run)
    if json:
        emit_json({"run": run, "round": t, "created": created})
    else:
        console.print(text(f"run {run}: round {t} is open" + (" (new run)" if created else "")))


def requests_(
    n: Annotated[
        int, typer.Option("--n", min=0, help="How many generation requests (at most the run's limits.requests).")
    ],
    run: RunOpt = None,
    db: DbOpt = None,
    open_round: RoundOpt = None,
    purpose: Annotated[
        str, typer.Option("--purpose", help="curriculum (Q^cur) or challenger (Q^chal).")
    ] = "curriculum",
    seed: Annotated[int | None, typer.Option("--seed", help="Seed (default: the run's).")] = None,
    json: JsonOpt = False,
    jsonl: Annotated[bool, typer.Option("--jsonl", help="One JSON request a line.")] = False,
) -> None:
    with picked(db, run, open_round) as rnd:
        reqs = rnd.requests(n, purpose=purpose, seed=seed)
    r, t = rnd.run, rnd.t
    if jsonl:
        for q in reqs:
            emit_json(q.to_json())
        return
    if json:
        emit_json({"run": r, "round": t, "requests": [q.to_json() for q in reqs]})
        return
    heads = ("question_id", "mode", "active", "mastered", "node", "cause text")
    table = Table(*heads, title=text(f"run {r}, round {t}: {len(reqs)} requests"), title_justify="left")
    for q in reqs:
        table.add_row(
            *(
                text(v or "")
                for v in (q.question_id, q.mode, q.active_cause, q.mastered_cause, q.node_label, q.active_text)
            )
        )
    console.print(table)


def promote(
    run: RunOpt = None,
    db: DbOpt = None,
    open_round: RoundOpt = None,
    json: JsonOpt = False,
    allow_empty: Annotated[
        bool, typer.Option("--allow-empty", help="Decide although the round holds no question (none parsed).")
    ] = False,
) -> None:
    with picked(db, run, open_round) as rnd:
        promoted = rnd.promote(allow_empty=allow_empty)
    r, t = rnd.run, rnd.t
    if json:
        emit_json({"run": r, "round": t, "promoted": [p.stored_data() for p in promoted]})
        return
    console.print(text(f"run {r}, round {t}: {len(promoted)} promoted"))
    for p in promoted:
        console.print(text(f"  {p.cause_id}  acc={p.acc:.3f}  n={p.n_candidates}"))


def withdraw(
    batch: Annotated[
        str,
        typer.Option(
            "--batch",
            help="FIRST-LAST: the seqs of the batch to take back (round record and diagnose print them; "
            "memory events shows every seq).",
        ),
    ],
    run: RunOpt = None,
    db: DbOpt = None,
    open_round: RoundOpt = None,
    reason: Annotated[str, typer.Option("--reason", help="Why, kept with the withdrawal.")] = "",
    json: JsonOpt = False,
) -> None:
    chosen = rounds.Batch.parse(batch)  # a batch that names no seq: said before any database is read
    with picked(db, run, open_round, or_last=True) as rnd:
        ev = rnd.withdraw(chosen, reason=reason)
    r, t = rnd.run, rnd.t
    if json:
        emit_json({"run": r, "round": t, **ev.stored_data()})
        return
    what = plural(len(ev.questions), "question") if ev.questions else plural(len(ev.failures), "failure")
    console.print(text(f"run {r}, round {t}: batch {ev.first_seq}-{ev.last_seq} withdrawn ({what})"))


def commit(
    run: RunOpt = None,
    db: DbOpt = None,
    open_round: RoundOpt = None,
    metric: Annotated[
        list[str] | None, typer.Option("--metric", help="A metric of the round: name=value (repeatable).")
    ] = None,
    allow_undiagnosed: Annotated[
        bool, typer.Option("--allow-undiagnosed", help="Commit although recorded failures are not diagnosed.")
    ] = False,
    allow_failed_diagnoses: Annotated[
        bool,
        typer.Option(
            "--allow-failed-diagnoses",
            help="Commit although more failures failed to diagnose than diagnosis.max_failed_share allows (their "
            "evidence is lost from the memory; the commit records how many).",
        ),
    ] = False,
    json: JsonOpt = False,
) -> None:
    metrics: dict[str, float] = {}
    for item in metric or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CLIError(f"metric {item!r} is not of the form name=number")
        metrics[name.strip()] = decimal_number(value, f"metric {name.strip()!r}")
    with picked(db, run, open_round) as rnd:
        ev = rnd.commit(metrics, allow_undiagnosed=allow_undiagnosed, allow_failed=allow_failed_diagnoses)
    r, t = rnd.run, rnd.t
    if json:
        emit_json({"run": r, "round": t, **rounds.commit_counts(ev)})
        return
    allowed = ev.failed_diagnoses_allowed
    console.print(
        text(
            f"run {r}: round {t} committed  kept {ev.retained}/{ev.questions}  failures {ev.failures}  "
            f"F_t={ev.F}  ε_t+1={ev.epsilon_next:.3f}"
            + (f"  failed diagnoses allowed {allowed}" if allowed is not None else "")
        )
    )


STEPS = {
    "open": "open the round: diagevo round start",
    "record": "record the round's questions with their construction responses: diagevo round record",
    "promote": "decide the promotions: diagevo round promote",
    "record_failures": "train the solver on the retained questions, then record its failures: diagevo diagnose",
    "diagnose": "diagnose the recorded failures: diagevo diagnose",
    "commit": "commit the round: diagevo round commit",
}
"""What each step :meth:`~diagevo.rounds.Round.next_step` names asks of the trainer, in words."""


def status(run: RunOpt = None, db: DbOpt = None, json: JsonOpt = False) -> None:
    with open_store(db) as store:
        r = resolve_run(store, run) if run is None or store.has_run(run) else run
        st = rounds.round_state(store, r) if store.has_run(r) else None
        t = st.open_round or st.last_committed + 1 if st is not None else 1
        step = rounds.Round(store, r, t).next_step if st is not None else "open"
    if json:
        emit_json({"run": r, "round": t, "next_step": step, "last_committed": st.last_committed if st else 0})
        return
    console.print(text(f"run {r}, round {t}: next, {STEPS[step]}"))
