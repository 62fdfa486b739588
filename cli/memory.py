"""``diagevo memory replay/show/why/events``: read the error-cause memory.

The commands that move a log (``ingest``, ``export``) and verify it are
:mod:`diagevo.cli.operate`'s: a read loads neither the interchange format nor the verification
of every view.
"""

from __future__ import annotations

from contextlib import suppress
from functools import partial
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from diagevo.catalog import CATALOG as EVENT_TYPES
from diagevo.catalog import CauseCreated, CausePromoted, CauseReactivated, FailureAttributed, NodesMerged
from diagevo.cli.common import CLIError, DbOpt, JsonOpt, RunOpt, console, emit_json, round_from_0
from diagevo.cli.follow import FollowOpt, UntilOpt, followed_run, say
from diagevo.cli.safe import text
from diagevo.cli.store import open_store
from diagevo.log import payload
from diagevo.memory.state import node_order
from diagevo.results.memory import MemoryView
from diagevo.text.untrusted import shorten
from diagevo.text.words import did_you_mean, plural
from diagevo.views import queries
from diagevo.views.events import EventFilter, event_json, follow_matching, list_events
from diagevo.views.stories import RECENT, Entry, FailureEvidence


def render_memory(view: MemoryView, title: str) -> None:
    """M_t drawn from the library's query, the result ``--json`` prints: the tree and the JSON cannot disagree."""
    causes = {c.cause_id: c for c in view.causes}
    tree = Tree(text((title, "bold"), "  run ", view.run))
    for node in sorted(view.nodes, key=lambda n: node_order(n.node_id)):
        members = sorted(
            (causes[i] for i in node.causes), key=lambda c: (c.state != "active", -c.frequency, c.cause_id)
        )
        branch = tree.add(
            text((node.node_id, "bold cyan"), " ", node.label, "  ", (f"({plural(len(members), 'cause')})", "dim"))
        )
        for c in members:
            style = "yellow" if c.state == "active" else "green"
            p = f"  p={view.p_next[c.cause_id]:.3f}" if c.cause_id in view.p_next else ""
            branch.add(text((f"{c.cause_id} {c.state:8s} f={c.frequency}", style), p, "  ", c.description))
    console.print(tree)
    # F_t, then the reference F_1 of Eq. 1 (said once at t = 1, where the two are one figure)
    reference = "   F_1 not fixed yet" if view.F1 is None else "" if view.t == 1 else f"   F_1 = {view.F1}"
    # numbers only, yet built as Text like every line here: nothing printed is read as markup
    console.print(text(f"F_{view.t} = {view.F}{reference}   k = {view.k:g}   ε_{view.t + 1} = {view.epsilon_next:.4f}"))
    active = sum(c.state == "active" for c in view.causes)
    console.print(text(f"active {active}, mastered {len(view.causes) - active}, nodes {len(view.nodes)}"))


def replay(
    at_round: Annotated[int, typer.Option("--round", "-r", callback=round_from_0, help="Committed round to rebuild.")],
    db: DbOpt = None,
    run: RunOpt = None,
    json: JsonOpt = False,
) -> None:
    with open_store(db, readonly=True) as store:
        view = queries.memory_at(store, at_round, run)
    if json:
        emit_json(view.to_dict())
    else:
        render_memory(view, f"M_{at_round}")


def show(db: DbOpt = None, run: RunOpt = None, json: JsonOpt = False) -> None:
    with open_store(db, readonly=True) as store:
        current = queries.show(store, run)
    if json:
        emit_json(current.to_dict())
    else:
        title = f"M_{current.t}" + (f" + round {current.open_round} so far" if current.open_round else "")
        render_memory(current, title)
        versions = (("run opened", current.diagevo), (f"M_{current.t} committed", current.committed_diagevo))
        if said := "; ".join(f"{what} by diagevo {wrote}" for what, wrote in versions if wrote):
            console.print(text((said, "dim")))


def _describe(entry: Entry) -> str:
    f, a = entry.failure, entry.attribution
    q = None if f is None else f.question
    failure = None if f is None else f.failure_id
    qtxt = f" on {q.question_id} ({q.mode})" if q is not None else ""
    sim = f", similarity {a.similarity:.3f}" if a is not None and a.similarity is not None else ""
    match entry.event:
        case CauseCreated(node_id=node):
            diag = (None if f is None or f.diagnosis is None else f.diagnosis.model) or "?"
            return f"created under {node} from failure {failure}{qtxt}, diagnosed by {diag}"
        case FailureAttributed(via=via):
            return f"failure {failure}{qtxt} attributed via {via}{sim}"
        case CausePromoted(acc=acc, n_candidates=n):
            return f"promoted to Mastered: acc {acc:.3f} over {plural(n, 'candidate')}"
        case CauseReactivated():
            return f"reactivated by failure {failure}{qtxt} via {None if a is None else a.via}{sim}"
        case NodesMerged(absorbed=absorbed, survivor=survivor, label=label):
            return f"node {entry.from_node} merged: {absorbed} into {survivor} as '{label}'"


def why(
    cause: Annotated[str, typer.Argument(help="Cause id, e.g. C12.")],
    db: DbOpt = None,
    run: RunOpt = None,
    all_entries: Annotated[
        bool, typer.Option("--all", help="Every attribution (default: the most recent ones and how many more).")
    ] = False,
    json: JsonOpt = False,
) -> None:
    with open_store(db, readonly=True) as store:
        story = queries.why(store, cause, run, recent=None if all_entries or json else RECENT)
        # said while the store is open: an entry a raw row made unreadable (an ``acc`` that is a
        # text) names that row, before anything is printed
        said = [] if json else [_describe(entry) for entry in story.timeline]
    if json:
        emit_json(story.to_dict())
        return
    console.print(text((cause, "bold"), f" ({story.story.node}): ", story.story.description))
    table = Table("round", "seq", "what")
    more = story.more_attributions
    attributed = [i for i, e in enumerate(story.timeline) if isinstance(e.event, FailureAttributed)]
    # the row of those left out comes before the most recent ones (older ones shown explain a reactivation)
    cut = attributed[-min(RECENT, len(attributed))] if more and attributed else None
    for i, entry in enumerate(story.timeline):
        if i == cut:
            table.add_row(
                "…", "…", text((f"{more:,} more {'attribution' if more == 1 else 'attributions'} (use --all)", "dim"))
            )
        table.add_row(str(entry.round), str(entry.seq), text(said[i]))
    console.print(table)
    if more:
        console.print(
            text(
                (
                    f"{story.attributions:,} attributions in all, {len(attributed)} shown (the most recent): "
                    f"... {more:,} more attributions (use --all)",
                    "dim",
                )
            )
        )
    created = next((e for e in story.timeline if isinstance(e.event, CauseCreated)), None)
    if created is not None and created.failure is not None:
        console.print(creation_story(created.failure))


TRAJECTORY_SHOWN = 400
"""Characters of a trajectory ``memory why`` shows (the middle cut; ``--json`` has it whole)."""


def _trajectory(response: str | None) -> str:
    """A trajectory on a few lines: whitespace folded, the middle cut when it is long."""
    return shorten(response or "", TRAJECTORY_SHOWN, middle=True, fold=True) or "-"


def creation_story(failure: FailureEvidence) -> Text:
    """How the cause came to be, told in the terminal as ``--json`` has it: the question, how
    sure its pseudo-label was, the failing and the reference trajectories (shortened) and the
    diagnosis. Model text is shown as text, never read as markup."""
    out = Text()
    q, f, d = failure.question, failure.recorded, failure.diagnosis
    if q is not None:
        out.append_text(text((f"question {q.question_id} ({q.mode}): ", "dim")))
        out.append_text(text(str(q.text or ""), newlines=True)).append("\n")
    s = None if q is None else q.scored
    if s is not None:
        sure = (
            f"p1={s.p1:.3f}, p2={s.p2:.3f}" if isinstance(s.p1, float) and isinstance(s.p2, float) else "votes unknown"
        )
        over = f" of {s.n} construction answers" if s.n else ""
        out.append_text(text(("pseudo-label: ", "dim"), f"{s.pseudo_label} ({sure}{over})")).append("\n")
    response, reference = (None, None) if f is None else (f.response, f.reference)
    out.append_text(text((f"failing response ({failure.failure_id}): ", "dim"), _trajectory(response))).append("\n")
    out.append_text(text(("reference: ", "dim"), _trajectory(reference))).append("\n")
    if d is not None:
        said = d.error_cause or (f"matches {d.matched_cause}" if d.matched_cause else "no skill error")
        out.append_text(text((f"diagnosis ({d.model or '?'}): ", "dim"), str(said)))
    return out


DEFAULT_LIMIT = 200
SHOWN_DATA = 140
"""Characters of an event's data on its line (``--json`` has it whole)."""


def _data_line(data: dict[str, Any]) -> str:
    """An event's data on one line: its scalar fields, floats rounded (``p1=0.667``), cut to
    :data:`SHOWN_DATA` characters."""
    shown = ", ".join(
        f"{k}={round(v, 3) if isinstance(v, float) else v}"
        for k, v in data.items()
        if v is not None and not isinstance(v, dict)
    )
    return shorten(shown, SHOWN_DATA)


def events(
    db: DbOpt = None,
    run: RunOpt = None,
    event_types: Annotated[
        list[str] | None, typer.Option("--type", help=f"Only these event types: {', '.join(sorted(EVENT_TYPES))}.")
    ] = None,
    cause: Annotated[str | None, typer.Option("--cause", help="Only events naming this cause.")] = None,
    failure: Annotated[str | None, typer.Option("--failure", help="Only events naming this failure.")] = None,
    question: Annotated[str | None, typer.Option("--question", help="Only events naming this question.")] = None,
    in_round: Annotated[int | None, typer.Option("--round", callback=round_from_0, help="Only this round.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many (0 = all).")] = DEFAULT_LIMIT,
    jsonl: Annotated[bool, typer.Option("--jsonl", help="Stream the events as JSON lines, one event a line.")] = False,
    follow: FollowOpt = False,
    until_round: UntilOpt = None,
    json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document: the run, the events, whether more matched.")
    ] = False,
) -> None:
    if limit < 0:
        raise CLIError(f"--limit {limit}: use 0 (all) or a positive number")
    if json and jsonl:
        raise CLIError("give --json or --jsonl, not both")
    classes = _event_classes(event_types or [])
    if until_round is not None and not follow:
        raise CLIError("--until-round goes with --follow")
    wanted = EventFilter(classes, cause, failure, question, in_round)
    if follow:
        _follow_events(db, run, wanted, json or jsonl, until_round)
        return
    with open_store(db, readonly=True) as store:
        page = list_events(store, run, wanted, limit)
    if jsonl:
        for e in page.events:
            emit_json(event_json(e, page.refused.get(e.seq)))
    elif json:
        emit_json(page.to_json())
    else:
        _print_events(page)


def _event_classes(types: list[str]) -> frozenset[Any]:
    """The classes of the event types named (the filter takes classes); an event type the
    catalog does not know is refused, with the one most likely meant."""
    unknown = sorted(set(types) - set(EVENT_TYPES))
    if unknown:
        shown = shorten(" ".join(unknown[0].split()), 40)
        raise CLIError(
            f"unknown event type {shown!r}{did_you_mean(shown, EVENT_TYPES)}; "
            "`diagevo memory events --help` lists the known types"
        )
    return frozenset(EVENT_TYPES[name] for name in types)


def _print_events(page: Any) -> None:
    table = Table("seq", "round", "type", "data", title=text(f"run {page.run}"), title_justify="left")
    for e in page.events:
        refused = page.refused.get(e.seq)
        kind = text(e.type) if refused is None else text(e.type, ("\npassed over: " + refused, "dim"))
        table.add_row(str(e.seq), str(e.round), kind, text(_data_line(payload(e))))
    console.print(table)
    if page.truncated:
        console.print(
            text(
                (
                    f"the first {plural(page.limit, 'event')} shown; "
                    "more match (--limit 0 for all, --limit N for more)",
                    "dim",
                )
            )
        )
    elif not page.events:
        console.print(text(("no events match", "dim")))


def _follow_events(db: str | None, run: str | None, wanted: Any, as_json: bool, until_round: int | None) -> None:
    """``memory events --follow``: a line per event as it comes (Ctrl-C ends it: nothing more
    printed, exit 0)."""
    with open_store(db, readonly=True) as store, suppress(KeyboardInterrupt):
        run_id = followed_run(store, run, "", as_json)
        for e in follow_matching(store, run_id, wanted, until_round):
            say(as_json, event_json(e), partial(_event_line, e))


def _event_line(e: Any) -> Text:
    return text(f"{e.seq:>7} {e.round:>4} {e.type:<20} ", _data_line(payload(e)))
