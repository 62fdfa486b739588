"""``diagevo memory ...``: read, audit, move and verify the error-cause memory."""

from __future__ import annotations

import sys
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from diagevo.catalog.names import NAMES as EVENT_TYPE_NAMES
from diagevo.cli.common import (
    CLIError,
    DbOpt,
    JsonOpt,
    RunOpt,
    WideOpt,
    console,
    emit_json,
    err_console,
    open_store,
    round_from_0,
)
from diagevo.cli.safe import plain, text
from diagevo.words import did_you_mean, plural

if TYPE_CHECKING:
    from diagevo.memory.state import Memory

FollowOpt = Annotated[
    bool,
    typer.Option(
        "--follow", "-f", help="Keep reading: print what another process appends to the run (Ctrl-C to stop)."
    ),
]
UntilOpt = Annotated[
    int | None, typer.Option("--until-round", help="With --follow: stop once this round is committed.")
]

memory_app = typer.Typer(help="Inspect, audit, move and verify the error-cause memory.", no_args_is_help=True)


def render_memory(mem: Memory, title: str) -> None:
    from diagevo.memory.schedule import schedule
    from diagevo.words import plural

    s = schedule(mem)
    tree = Tree(text((title, "bold"), "  run ", mem.run))
    for node in mem.nodes_in_order():
        causes = sorted(mem.members(node.id), key=lambda c: (not c.active, -c.frequency, c.id))
        branch = tree.add(
            text((node.id, "bold cyan"), " ", node.label, "  ", (f"({plural(len(causes), 'cause')})", "dim"))
        )
        for c in causes:
            style = "yellow" if c.active else "green"
            p = f"  p={s.p[c.id]:.3f}" if c.id in s.p else ""
            branch.add(text((f"{c.id} {c.state.value:8s} f={c.frequency}", style), p, "  ", c.description))
    console.print(tree)
    # F_t, then the reference F_1 of Eq. 1 (said once at t = 1, where the two are one figure)
    reference = "   F_1 not fixed yet" if s.F1 is None else "" if mem.committed == 1 else f"   F_1 = {s.F1}"
    # numbers only, yet built as Text like every line here: nothing printed is read as markup
    console.print(
        text(f"F_{mem.committed} = {s.F}{reference}   k = {mem.k:g}   ε_{mem.committed + 1} = {s.epsilon:.4f}")
    )
    console.print(text(f"active {len(mem.active())}, mastered {len(mem.mastered())}, nodes {len(mem.nodes)}"))


@memory_app.command()
def replay(
    round: Annotated[int, typer.Option("--round", "-r", callback=round_from_0, help="Committed round to rebuild.")],
    db: DbOpt = None,
    run: RunOpt = None,
    json: JsonOpt = False,
) -> None:
    """Rebuild M_N from the log; show the memory tree and the schedule for round N+1."""
    from diagevo.views.memory import load_memory, resolve_run
    from diagevo.views.queries import memory_view

    with open_store(db, readonly=True) as store:
        mem = load_memory(store, resolve_run(store, run), round)
    if json:
        emit_json(memory_view(mem))
    else:
        render_memory(mem, f"M_{round}")


@memory_app.command()
def show(db: DbOpt = None, run: RunOpt = None, json: JsonOpt = False) -> None:
    """The memory after the run's last event (an unfinished round included)."""
    from diagevo.views.memory import load_memory, resolve_run
    from diagevo.views.queries import memory_view

    with open_store(db, readonly=True) as store:
        mem = load_memory(store, resolve_run(store, run))
    if json:
        emit_json({**memory_view(mem), "open_round": mem.open_round})
    else:
        title = f"M_{mem.committed}" + (f" + round {mem.open_round} so far" if mem.open_round else "")
        render_memory(mem, title)


def _describe(entry: dict[str, Any]) -> str:
    kind = entry["kind"]
    f = entry.get("failure") or {}
    q = f.get("question") or {}
    qtxt = f" on {q.get('question_id')} ({q.get('mode')})" if q else ""
    if kind == "created":
        diag = (f.get("diagnosis") or {}).get("model") or "?"
        return f"created under {entry['node']} from failure {f.get('failure_id')}{qtxt}, diagnosed by {diag}"
    if kind == "attributed":
        sim = f", similarity {entry['similarity']:.3f}" if entry.get("similarity") is not None else ""
        return f"failure {f.get('failure_id')}{qtxt} attributed via {entry['via']}{sim}"
    if kind == "promoted":
        return f"promoted to Mastered: acc {entry['acc']:.3f} over {plural(entry['n_candidates'], 'candidate')}"
    if kind == "reactivated":
        sim = f", similarity {entry['similarity']:.3f}" if entry.get("similarity") is not None else ""
        return f"reactivated by failure {f.get('failure_id')}{qtxt} via {entry.get('via')}{sim}"
    return f"node {entry['from_node']} merged: {entry['absorbed']} into {entry['survivor']} as '{entry['label']}'"


@memory_app.command()
def why(
    cause: Annotated[str, typer.Argument(help="Cause id, e.g. C12.")],
    db: DbOpt = None,
    run: RunOpt = None,
    json: JsonOpt = False,
    all_entries: Annotated[
        bool, typer.Option("--all", help="Every attribution (default: the most recent ones and how many more).")
    ] = False,
) -> None:
    """The story of one cause: creation, promotions, reactivations, merges and its most recent
    attributions (every one with --all or --json)."""
    from diagevo.views import queries
    from diagevo.views.stories import RECENT

    with open_store(db, readonly=True) as store:
        story = queries.why(store, cause, run, recent=None if all_entries or json else RECENT)
    if json:
        emit_json(story)
        return
    console.print(text((cause, "bold"), f" ({story['node']}): ", story["description"]))
    table = Table("round", "seq", "what")
    more = story["more_attributions"]
    attributed = [i for i, e in enumerate(story["timeline"]) if e["kind"] == "attributed"]
    # the row of those left out comes before the most recent ones (older ones shown explain a reactivation)
    cut = attributed[-min(RECENT, len(attributed))] if more and attributed else None
    for i, entry in enumerate(story["timeline"]):
        if i == cut:
            table.add_row(
                "…", "…", text((f"{more:,} more {'attribution' if more == 1 else 'attributions'} (use --all)", "dim"))
            )
        table.add_row(str(entry["round"]), str(entry["seq"]), text(_describe(entry)))
    console.print(table)
    if more:
        console.print(
            text(
                (
                    f"{story['attributions']:,} attributions in all, {len(attributed)} shown (the most recent): "
                    f"... {more:,} more attributions (use --all)",
                    "dim",
                )
            )
        )
    created = next((e for e in story["timeline"] if e["kind"] == "created"), None)
    if created is not None and created.get("failure"):
        console.print(creation_story(created["failure"]))


def _shorten(text: str | None, limit: int = 400) -> str:
    """A trajectory on a few lines: whitespace folded, the middle cut when it is long."""
    flat = " ".join((text or "").split())
    if len(flat) <= limit:
        return flat or "-"
    half = limit // 2
    return f"{flat[:half]} … {flat[-half:]}"


def creation_story(failure: dict[str, Any]) -> Text:
    """How the cause came to be, told in the terminal as ``--json`` has it: the question, how
    sure its pseudo-label was, the failing and the reference trajectories (shortened) and the
    diagnosis. Model text is shown as text, never read as markup."""
    out = Text()
    q = failure.get("question") or {}
    if q:
        out.append_text(text((f"question {q.get('question_id')} ({q.get('mode')}): ", "dim")))
        out.append_text(text(str(q.get("text") or ""), newlines=True)).append("\n")
    if "pseudo_label" in q:
        sure = (
            f"p1={q['p1']:.3f}, p2={q['p2']:.3f}"
            if isinstance(q.get("p1"), float) and isinstance(q.get("p2"), float)
            else "votes unknown"
        )
        over = f" of {q['n']} construction answers" if q.get("n") else ""
        out.append_text(text(("pseudo-label: ", "dim"), f"{q['pseudo_label']} ({sure}{over})")).append("\n")
    out.append_text(
        text((f"failing response ({failure.get('failure_id')}): ", "dim"), _shorten(failure.get("response")))
    ).append("\n")
    out.append_text(text(("reference: ", "dim"), _shorten(failure.get("reference")))).append("\n")
    d = failure.get("diagnosis") or {}
    if d:
        said = d.get("error_cause") or (f"matches {d['matched_cause']}" if d.get("matched_cause") else "no skill error")
        out.append_text(text((f"diagnosis ({d.get('model') or '?'}): ", "dim"), str(said)))
    return out


STATS_COLUMNS = {
    "round": "t",
    "active": "active",
    "mastered": "mastered",
    "nodes": "nodes",
    "F": "F_t",
    "epsilon_next": "ε_t+1",
    "retained": "kept",
    "failures": "fail",
    "new_causes": "new",
    "attributions": "attr",
    "promotions": "prom",
    "reactivations": "react",
    "merges": "merge",
    "heldout_acc": "held-out",
    "ckpt_mb": "ckpt MB",
    "disk_mb": "disk MB",
}
# what a narrow terminal keeps, most important first: the round, its scores (held-out accuracy,
# every metric by name, the benchmarks), the schedule and the memory, then what the round did;
# per-family accuracies (acc/FAMILY) last
_KEPT_FIRST = (
    "round",
    "heldout_acc",
    "*",
    "F",
    "epsilon_next",
    "active",
    "mastered",
    "nodes",
    "retained",
    "failures",
    "new_causes",
    "attributions",
    "promotions",
    "reactivations",
    "merges",
    "disk_mb",
    "ckpt_mb",
)


_LEGEND = {
    "kept": "retained questions",
    "new": "new causes",
    "attr": "attributions",
    "prom": "promotions",
    "react": "reactivations",
    "ckpt MB": "checkpoints written in the round",
    "disk MB": "of those, still on disk",
}
"""What the abbreviated headers of ``memory stats`` mean (said under the table for those shown)."""


def stats_columns(rows: list[dict[str, Any]], metrics: list[str]) -> tuple[list[str], list[str], list[int]]:
    """The columns of the ``memory stats`` table in their order, their headers, and their indices
    in the order a narrow terminal keeps them (:data:`_KEPT_FIRST`)."""
    from diagevo.views.stats import is_family_detail

    named = [m for m in metrics if m != "heldout_acc"]
    cols = [c for c in STATS_COLUMNS if rows and any(c in r for r in rows)] + named
    heads = [STATS_COLUMNS.get(c, c) for c in cols]  # a metric under its own name, as --json has it
    rank = {c: i for i, c in enumerate(_KEPT_FIRST)}

    def importance(i: int) -> tuple[int, int]:
        c = cols[i]
        if c in rank:
            return rank[c], i
        return (len(rank), i) if is_family_detail(c) else (rank["*"], i)

    return cols, heads, sorted(range(len(cols)), key=importance)


@memory_app.command()
def stats(
    db: DbOpt = None,
    run: RunOpt = None,
    json: JsonOpt = False,
    wide: WideOpt = False,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Also write the rows to this file (.csv or .parquet).")
    ] = None,
    follow: FollowOpt = False,
    until_round: UntilOpt = None,
    steps: Annotated[
        bool,
        typer.Option(
            "--steps",
            help="One row per GRPO step instead (train.step: reward, reward_std, kl, entropy, clip ratio, "
            "completion length, learning rate, grad norm, as TRL names them), challenger and solver apart.",
        ),
    ] = False,
) -> None:
    """One row per committed round: the memory, what the round did, and every metric the run
    recorded, by name (held-out accuracy, --metric of round commit, bench/NAME of eval --run).
    With --follow, a line per round as another process commits it (a JSON line with --json).
    With --steps, one row per GRPO step of the hf backend (x = the role's global step)."""
    from diagevo.files import TABLE_SUFFIXES
    from diagevo.views import queries

    if steps:
        if out is not None:
            raise CLIError("--steps goes without -o (memory stats --steps --json has the rows)")
        _step_stats(db, run, json, wide, follow, until_round)
        return

    if out is not None and out.suffix.lower() not in TABLE_SUFFIXES:
        raise CLIError(f"{out}: write the rows as a .csv or .parquet file (not {out.suffix or 'no suffix'})")
    if until_round is not None and not follow:
        raise CLIError("--until-round goes with --follow")
    if follow:
        if out is not None:
            raise CLIError("give --follow or -o, not both")
        _follow_stats(db, run, json, until_round)
        return
    with open_store(db, readonly=True) as store:
        data = queries.stats(store, run)
    run_id, rows = data["run"], data["rounds"]
    if out is not None:
        from diagevo.files import write_table
        from diagevo.views.stats import frame

        write_table(frame(rows, data["metrics"]), out)
    if json:
        emit_json(data)
        return
    if not rows:
        console.print(text(f"run {run_id} has no committed round yet", _pending(data["uncommitted"])), soft_wrap=True)
    else:
        from diagevo.cli.tables import print_fitted

        cols, heads, keep = stats_columns(rows, data["metrics"])
        cells = [[_cell(r.get(c)) for c in cols] for r in rows]
        print_fitted(console, heads, cells, title=text(f"run {run_id}"), wide=wide, legend=_LEGEND, priority=keep)
    if out is not None:
        console.print(text(f"wrote {out} ({plural(len(rows), 'round')})"))


_STEP_HEADS = {
    "global_step": "step",
    "reward_std": "reward sd",
    "clip_ratio/region_mean": "clip",
    "completions/mean_length": "length",
    "learning_rate": "lr",
    "grad_norm": "grad",
}


def _step_cells(row: dict[str, Any], fields: list[str]) -> list[str]:
    return [str(row["round"]), plain(str(row["role"])), str(row["global_step"])] + [
        f"{v:.4g}" if isinstance(v := row.get(f), float) else _cell(v) for f in fields
    ]


def _step_stats(
    db: str | None, run: str | None, as_json: bool, wide: bool, follow: bool, until_round: int | None
) -> None:
    """``memory stats --steps``: the run's GRPO steps; with --follow, each as its phase logs it."""
    from diagevo.views import queries

    with open_store(db, readonly=True) as store:
        if not follow:
            data = queries.steps(store, run)
        else:
            run_id = _followed_run(store, run)
    if not follow:
        if as_json:
            emit_json(data)
            return
        if not data["steps"]:
            console.print(text(f"run {data['run']} logged no GRPO step (the hf backend logs them)"), soft_wrap=True)
            return
        from diagevo.cli.tables import print_fitted

        fields = data["fields"] if wide else [f for f in queries.STEP_FIELDS if f in data["fields"]]
        heads = ["t", "role", "step", *[_STEP_HEADS.get(f, f) for f in fields]]
        cells = [_step_cells(r, fields) for r in data["steps"]]
        print_fitted(console, heads, cells, title=text(f"run {data['run']}: GRPO steps"), wide=wide)
        return
    from diagevo.catalog import RoundCommitted, TrainStep
    from diagevo.views.follow import follow_events

    with open_store(db, readonly=True) as store, suppress(KeyboardInterrupt):
        if not as_json:
            console.print(text((f"following run {run_id}: a line per GRPO step (Ctrl-C to stop)", "dim")))
        for e in follow_events(store, run_id):
            if e.type == TrainStep.name:
                row = queries.step_row(e.round, e.data)
                if as_json:
                    emit_json({"run": run_id, **row})
                else:
                    shown = [f for f in queries.STEP_FIELDS if f in row]
                    names = ["t", "role", "step", *[_STEP_HEADS.get(f, f) for f in shown]]
                    line = "  ".join(f"{h}={c}" for h, c in zip(names, _step_cells(row, shown), strict=True))
                    console.print(text(line), soft_wrap=True)
                _flush()
            if e.type == RoundCommitted.name and until_round is not None and e.round >= until_round:
                return


def _follow_stats(db: str | None, run: str | None, as_json: bool, until_round: int | None) -> None:
    """``memory stats --follow``: a line per committed round as it comes (Ctrl-C ends it, exit 0)."""
    from diagevo.views.follow import follow_stats
    from diagevo.views.stats import metric_columns

    with open_store(db, readonly=True) as store, suppress(KeyboardInterrupt):
        run_id = _followed_run(store, run)
        if not as_json:
            console.print(
                text((f"following run {run_id}: a line per committed round (Ctrl-C to stop)", "dim")), soft_wrap=True
            )
        for row in follow_stats(store, run_id):
            if as_json:
                emit_json({"run": run_id, **row})
            else:
                cols, heads, _ = stats_columns([row], metric_columns([row]))
                console.print(
                    text("  ".join(f"{h}={_cell(row.get(c))}" for c, h in zip(cols, heads, strict=True))),
                    soft_wrap=True,
                )
            _flush()
            if until_round is not None and row["round"] >= until_round:
                return


def _pending(uncommitted: list[dict[str, Any]]) -> str:
    """``; recorded so far: round 0 bench/gsm8k=0.250``: the scores of rounds not committed."""
    parts = [
        f"round {m['round']} " + " ".join(f"{k}={_cell(v)}" for k, v in m.items() if k != "round") for m in uncommitted
    ]
    return f"; recorded so far: {'; '.join(parts)}" if parts else ""


def _cell(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else "-" if v is None else str(v)


DEFAULT_LIMIT = 200


def _short(value: Any) -> str:
    """A value of an event's data in a table cell: floats rounded (``p1=0.667``)."""
    return str(round(value, 3)) if isinstance(value, float) else str(value)


@memory_app.command()
def events(
    db: DbOpt = None,
    run: RunOpt = None,
    type: Annotated[
        list[str] | None, typer.Option("--type", help=f"Only these event types: {', '.join(sorted(EVENT_TYPE_NAMES))}.")
    ] = None,
    cause: Annotated[str | None, typer.Option("--cause", help="Only events naming this cause.")] = None,
    failure: Annotated[str | None, typer.Option("--failure", help="Only events naming this failure.")] = None,
    question: Annotated[str | None, typer.Option("--question", help="Only events naming this question.")] = None,
    round: Annotated[int | None, typer.Option("--round", callback=round_from_0, help="Only this round.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many (0 = all).")] = DEFAULT_LIMIT,
    json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document: the run, the events, whether more matched.")
    ] = False,
    jsonl: Annotated[bool, typer.Option("--jsonl", help="Stream the events as JSON lines, one event a line.")] = False,
    follow: FollowOpt = False,
    until_round: UntilOpt = None,
) -> None:
    """List events, filtered (every filter is an indexed read). With --follow, every event of the
    run from its first (filtered) and then each new one as another process appends it, a line
    each (a JSON line with --json/--jsonl), until Ctrl-C or --until-round."""
    from diagevo.catalog import CATALOG as EVENT_TYPES
    from diagevo.catalog import CAUSE_FIELDS
    from diagevo.parsing import one_line
    from diagevo.views.memory import resolve_run

    if limit < 0:
        raise CLIError(f"--limit {limit}: use 0 (all) or a positive number")
    if json and jsonl:
        raise CLIError("give --json or --jsonl, not both")
    unknown = sorted(set(type or ()) - set(EVENT_TYPES))
    if unknown:
        shown = one_line(unknown[0], 40)
        raise CLIError(
            f"unknown event type {shown!r}{did_you_mean(shown, EVENT_TYPES)}; "
            "`diagevo memory events --help` lists the known types"
        )
    wanted = {
        **{f: cause for f in CAUSE_FIELDS if cause is not None},
        **({"failure_id": failure} if failure is not None else {}),
        **({"question_id": question} if question is not None else {}),
    }
    if until_round is not None and not follow:
        raise CLIError("--until-round goes with --follow")
    if follow:
        _follow_events(db, run, set(type or ()), wanted, round, json or jsonl, until_round)
        return
    with open_store(db, readonly=True) as store:
        run_id = resolve_run(store, run)
        types = [EVENT_TYPES[name] for name in type] if type else None
        if cause is not None:
            found = list(store.read(run_id, keys={f: [cause] for f in CAUSE_FIELDS}, types=types, round=round))
        elif failure is not None or question is not None:
            field = "failure_id" if failure is not None else "question_id"
            found = list(store.read(run_id, keys={field: [wanted[field]]}, types=types, round=round))
        else:  # one more than shown: whether the list was cut
            found = list(
                store.read(run_id, types=types, round=round, limit=min(limit + 1, 2**63 - 1) if limit else None)
            )
        # several id filters: all must hold (the first one was the indexed read)
        picked = [
            e
            for e in found
            if (cause is None or cause in {e.data.get(f) for f in CAUSE_FIELDS})
            and all(e.data.get(f) == v for f, v in wanted.items() if f in ("failure_id", "question_id"))
        ]
        more = bool(limit) and len(picked) > limit
        if limit:
            picked = picked[:limit]
    rows = [{"seq": e.seq, "round": e.round, "type": e.type, "event_id": e.event_id, "data": e.data} for e in picked]
    if jsonl:
        for row in rows:
            emit_json(row)
        return
    if json:
        emit_json({"run": run_id, "events": rows, "limit": limit or None, "truncated": more})
        return
    table = Table("seq", "round", "type", "data", title=text(f"run {run_id}"), title_justify="left")
    for e in picked:
        data = ", ".join(f"{k}={_short(v)}" for k, v in e.data.items() if v is not None and not isinstance(v, dict))
        table.add_row(str(e.seq), str(e.round), e.type, text(data[:140]))
    console.print(table)
    if more:
        console.print(
            text(
                (f"the first {plural(limit, 'event')} shown; more match (--limit 0 for all, --limit N for more)", "dim")
            )
        )
    elif not picked:
        console.print(text(("no events match", "dim")))


def _follow_events(
    db: str | None,
    run: str | None,
    types: set[str],
    wanted: dict[str, str],
    round: int | None,
    as_json: bool,
    until_round: int | None,
) -> None:
    """``memory events --follow``: a line per event as it comes (Ctrl-C ends it: nothing more
    printed, exit 0)."""
    from diagevo.catalog import CAUSE_FIELDS, RoundCommitted
    from diagevo.views.follow import follow_events

    def matches(e: Any) -> bool:
        return (
            (not types or e.type in types)
            and (round is None or e.round == round)
            and all(e.data.get(f) == v for f, v in wanted.items() if f not in CAUSE_FIELDS)
            and (
                not any(f in CAUSE_FIELDS for f in wanted)
                or any(e.data.get(f) == v for f, v in wanted.items() if f in CAUSE_FIELDS)
            )
        )

    with open_store(db, readonly=True) as store, suppress(KeyboardInterrupt):
        run_id = _followed_run(store, run)
        if not as_json:
            console.print(text((f"following run {run_id} (Ctrl-C to stop)", "dim")), soft_wrap=True)
        for e in follow_events(store, run_id):
            if matches(e):
                if as_json:
                    emit_json({"seq": e.seq, "round": e.round, "type": e.type, "event_id": e.event_id, "data": e.data})
                else:
                    data = ", ".join(
                        f"{k}={_short(v)}" for k, v in e.data.items() if v is not None and not isinstance(v, dict)
                    )
                    console.print(text(f"{e.seq:>7} {e.round:>4} {e.type:<20} ", data[:140]), soft_wrap=True)
                _flush()
            if until_round is not None and e.type == RoundCommitted.name and e.round >= until_round:
                return


def _followed_run(store: Any, run: str | None) -> str:
    """The run to follow: ``run`` (waited for when no process has started it yet), else the latest."""
    from diagevo.views.follow import wait_for_run
    from diagevo.views.memory import resolve_run

    if run is not None and not store.has_run(run):
        err_console.print(text((f"waiting for run {run} to start (Ctrl-C to stop)", "dim")), soft_wrap=True)
        wait_for_run(store, run)
    return resolve_run(store, run)


def _flush() -> None:
    sys.stdout.flush()  # into a pipe too, a line as it comes


@memory_app.command()
def ingest(
    file: Annotated[Path, typer.Argument(help="JSONL file of events ('-' for stdin).")],
    db: DbOpt = None,
    run: Annotated[
        str | None, typer.Option("--run", help="Store the file's (single) run under this name, its ids rebased.")
    ] = None,
    json: JsonOpt = False,
) -> None:
    """Validate a whole JSONL file, then store it in one transaction (or nothing)."""
    from diagevo.interchange import as_run, ingest_events, parse_lines
    from diagevo.parsing import file_lines

    if str(file) != "-" and not file.exists():
        raise CLIError(f"no such file: {file}")
    events = parse_lines(file_lines(file))  # a bad file is refused before the database is opened
    if not events:
        raise CLIError(f"{'stdin' if str(file) == '-' else file} is empty: no events to ingest")
    if run is not None:
        events = as_run(events, run)
    with open_store(db, create=True, keep_if_refused=False) as store:
        result = ingest_events(store, events)
    if json:
        emit_json(result.__dict__)
    else:
        from diagevo.words import plural

        console.print(
            text(
                f"ingested {plural(result.appended, 'event')} ({result.skipped} already stored) into ",
                _runs(result.runs),
            ),
            soft_wrap=True,
        )


SHOWN_RUNS = 5


def _runs(runs: tuple[str, ...] | list[str]) -> str:
    """``run r1``, ``2 runs: r1, r2``, or the first few of many and how many more (``--json`` lists all)."""
    if len(runs) == 1:
        return f"run {plain(runs[0], limit=200)}"
    shown = ", ".join(plain(r, limit=80) for r in runs[:SHOWN_RUNS])
    more = len(runs) - SHOWN_RUNS
    return f"{len(runs):,} runs: {shown}" + (f", … ({more:,} more; --json lists them all)" if more > 0 else "")


@memory_app.command()
def export(
    db: DbOpt = None,
    run: RunOpt = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write here instead of stdout ('-': stdout).")] = None,
) -> None:
    """Write the run's log as JSONL (with seq, recorded_at, hash)."""
    from diagevo.files import replaced
    from diagevo.interchange import export_lines
    from diagevo.untrusted import json_visible
    from diagevo.views.memory import resolve_run

    with open_store(db, readonly=True) as store:
        run_id = resolve_run(store, run)
        lines = (json_visible(line) for line in export_lines(store, run_id))  # the same JSON, safe to print
        if out is None or str(out) == "-":
            sys.stdout.writelines(lines)
            return
        n = 0
        with replaced(out) as fh:
            for line in lines:
                fh.write(line)
                n += 1
    console.print(text(f"wrote {out} ({plural(n, 'event')} of run ", run_id, ")"), soft_wrap=True)


@memory_app.command()
def verify(
    db: DbOpt = None,
    run: RunOpt = None,
    all_runs: Annotated[bool, typer.Option("--all", help="Every run of the database.")] = False,
    json: JsonOpt = False,
) -> None:
    """Check the hash chain, the texts against their keys, the invariants, and that the saved
    views (snapshots, the statistics) equal the log and reach no further than it."""
    from diagevo.views.memory import resolve_run
    from diagevo.views.verify import verify_run

    if all_runs and run is not None:
        raise CLIError("give --run or --all, not both")
    results: list[dict[str, Any]] = []
    with open_store(db, readonly=True) as store:
        for run_id in store.runs() if all_runs else [resolve_run(store, run)]:
            problems = verify_run(store, run_id)
            head = next(iter(store.read(run_id, after_seq=store.last_seq(run_id) - 1)), None)
            last = {"seq": head.seq, "hash": head.hash} if head is not None else None
            results.append({"run": run_id, "ok": not problems, "problems": problems, "last": last})
    if json:
        emit_json({"runs": results} if all_runs else results[0])
    else:
        for r in results:
            if r["problems"]:
                for p in r["problems"]:
                    console.print(text(("✗", "red"), " ", f"run {r['run']}: " if all_runs else "", p))
            else:
                where = f" (last event: seq {r['last']['seq']}, hash {r['last']['hash']})" if r["last"] else ""
                console.print(
                    text(
                        ("✓", "green"),
                        f" run {r['run']}: hash chain intact, texts match their keys, invariants hold, "
                        f"saved views equal the log{where}",
                    )
                )
    if any(r["problems"] for r in results):
        raise typer.Exit(1)


@memory_app.command()
def plot(
    db: DbOpt = None,
    run: RunOpt = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Also write the figure (.png, .svg) or the series (.csv) to this file."),
    ] = None,
    json: JsonOpt = False,
) -> None:
    """Memory lifecycle per round (the paper's Figure 3b): terminal bars, or an image with -o."""
    import polars as pl

    from diagevo.views import queries

    suffix = out.suffix.lower() if out is not None else ""
    if out is not None and suffix not in (".png", ".svg", ".csv"):
        raise CLIError(f"{out}: write a .png or .svg figure, or the series as .csv")
    with open_store(db, readonly=True) as store:
        data = queries.lifecycle(store, run)
    run_id, rows = data["run"], data["series"]
    if not rows:
        if out is not None:
            raise CLIError(f"run {run_id} has no committed round yet: nothing to plot, {out} not written")
        if json:
            emit_json({"run": run_id, "series": []})
        else:
            console.print(text(f"run {run_id} has no committed round yet: nothing to plot"))
        return
    df = pl.DataFrame(rows)
    if out is not None and suffix == ".csv":
        from diagevo.files import replaced

        with replaced(out, binary=True) as fh:
            df.write_csv(fh)
    elif out is not None:
        from diagevo.report import figures

        figures.save(figures.lifecycle(df, title=f"Memory lifecycle, run {run_id}"), out)
    if json:
        emit_json({"run": run_id, "series": df.to_dicts()})
        return
    top = max(1, *(r["active"] + r["mastered"] for r in rows))
    # a row is "round NNN " + bar + " act NNNN mas NNNN nod NNN ε 0.000": the bar takes what is left
    width = max(10, min(50, console.width - 10 - 36))
    console.print(
        text(("█", "yellow"), " active  ", ("▒", "green"), f" mastered   (run {run_id}; bar: causes, at most {top})"),
        soft_wrap=True,
    )
    for r in rows:
        a = round(width * r["active"] / top)
        m = round(width * r["mastered"] / top)
        console.print(
            text(
                f"round {r['round']:>3} ",
                ("█" * a, "yellow"),
                ("▒" * m, "green"),
                " " * (width - a - m),
                f" act {r['active']:>4} mas {r['mastered']:>4} nod {r['nodes']:>3} ε {r['epsilon_next']:.3f}",
            )
        )
    console.print(text(("act: active causes  mas: mastered  nod: skill nodes  ε: ε_t+1", "dim")))
    if out is not None:
        console.print(text(f"wrote {out}"))
