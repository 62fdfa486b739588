"""A run as a dataset: Parquet files a researcher loads without diagevo, and their card.

``questions``: the curriculum (and the challenger's questions), with the cause each targeted, the
votes, the pseudo-label, whether it was retained and the score that decided its cause's
promotion (Eq. 5); ``failures``: each failed response with its diagnosis and the cause it was
attributed to; ``nodes`` and ``causes``: the memory at the last round exported; ``cause_states``:
every cause's state and frequency at every commit (its history). The card (``README.md``) carries
the YAML header Hugging Face ``datasets`` reads (configs, features, sizes), leaves the license
to whoever shares it, and says how the data was produced with the run's config.

Everything a model wrote (questions, responses, diagnoses, cause descriptions, node labels) is
data in the Parquet files only; the card holds the run's id and config, fenced.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from diagevo.api import version
from diagevo.catalog import (
    CauseCreated,
    CausePromoted,
    DiagnosisFailed,
    FailureAttributed,
    FailureDiagnosed,
    FailureRecorded,
    NodeCreated,
)
from diagevo.errors import Argument, BadInput, NotFound, require_use
from diagevo.files.written import building, export_dir, write_replacing, write_table
from diagevo.log import Recorder
from diagevo.memory.deciders import promotion_scores
from diagevo.memory.state import Memory
from diagevo.rounds.questions import logged_questions
from diagevo.text.calls import validated
from diagevo.text.redaction import redact_config
from diagevo.text.words import did_you_mean
from diagevo.views.admission import admitted_rows
from diagevo.views.memory import commit_memories, committed_rounds

if TYPE_CHECKING:
    import polars as pl

CARD = "README.md"
"""The dataset card's file name (the one Hugging Face reads)."""
CARD_MARK = "<!-- written by diagevo export dataset; sha256 of the card above: "
"""The card's last line up to its digest (:func:`signed`)."""

COLUMNS: dict[str, dict[str, tuple[str, str]]] = {
    table: {column: (kind, what) for column, (kind, what) in columns.items()}
    for table, columns in tomllib.loads(Path(__file__).with_name("dataset.toml").read_text(encoding="utf-8")).items()
}
"""Each table's columns (``dataset.toml``): the type the card's features name (polars' types in
:func:`_frame`) and what it holds."""
TABLES = tuple(COLUMNS)
"""The files of an exported run (``<name>.parquet``), in the card's order."""


class ExportError(BadInput):
    """A dataset that cannot be exported as asked."""


@dataclass(frozen=True, slots=True)
class ExportedFile:
    name: str
    rows: int
    bytes: int


@dataclass(frozen=True, slots=True)
class Exported:
    """What :func:`export_dataset` wrote."""

    run: str
    directory: str
    round: int
    retained_only: bool
    files: list[ExportedFile] = field(default_factory=list)


def questions(store: Recorder, run: str, upto: int, retained_only: bool) -> pl.DataFrame:
    """One row per scored question of rounds 1..``upto``, with its cause's promotion score."""
    logged = logged_questions(store, run, upto=upto)
    promoted = {
        (e.round, p.cause_id)
        for e in admitted_rows(store, run, types=(CausePromoted,))
        if isinstance(p := e.event, CausePromoted)
    }
    per_round: dict[int, list[tuple[str | None, float]]] = {}
    for q in logged:
        per_round.setdefault(q.round, []).append((q.asked.active_cause, q.votes.p1))
    acc = {(t, c): float(a) for t, ev in per_round.items() for c, (a, _n) in promotion_scores(ev).items()}
    out = []
    for q in logged:
        if q.votes.retained or not retained_only:  # a question without a cause has no promotion score
            cause = (q.round, q.asked.active_cause) if q.asked.active_cause is not None else None
            scores = {"promotion_score": acc.get(cause), "promoted": cause in promoted} if cause else {}
            out.append({"round": q.round, **q.asked.model_dump(), **q.votes.model_dump(), **scores})
    return _frame(out, "questions")


def failures(store: Recorder, run: str, upto: int) -> pl.DataFrame:
    """One row per recorded failure of rounds 1..``upto``, with its diagnosis and attribution."""
    types = (FailureRecorded, FailureDiagnosed, DiagnosisFailed, FailureAttributed, CauseCreated)
    rows: dict[str, dict[str, Any]] = {}
    for e in admitted_rows(store, run, types=types, texts=True):  # a refused row, a withdrawn batch: never met
        if not 1 <= e.round <= upto:
            continue
        match e.event:
            case FailureRecorded(failure_id=fid) as f:
                rows[fid] = {"round": e.round, "failure_id": fid, "question_id": f.question_id}
                rows[fid] |= {"response": f.response, "reference": f.reference}
            case FailureDiagnosed(failure_id=fid, matched_cause=matched, error_cause=new) as d if fid in rows:
                kind = "matched" if matched else "new cause" if new else "slip"
                rows[fid] |= {"diagnosis": kind, "matched_cause": matched, "error_cause": new}
                rows[fid]["diagnostician"] = d.model or None
            case DiagnosisFailed(failure_id=str(fid)) if fid in rows:
                rows[fid].setdefault("diagnosis", "failed")
            case FailureAttributed(failure_id=fid, cause_id=cause, via=via) if fid in rows:
                rows[fid] |= {"attributed_cause": cause, "attributed_via": via}
            case CauseCreated(failure_id=str(fid), cause_id=cause) if fid in rows:
                rows[fid] |= {"attributed_cause": cause, "attributed_via": "created"}
    return _frame(list(rows.values()), "failures")


def memory_tables(memories: list[Memory], node_rounds: Mapping[str, int]) -> dict[str, pl.DataFrame]:
    """``nodes``, ``causes`` (the last memory) and ``cause_states`` (every memory)."""
    last = memories[-1]
    nodes = [{"node_id": n.id, "label": n.label, "created_round": node_rounds.get(n.id)} for n in last.nodes_in_order()]
    causes = [
        {
            "cause_id": c.id,
            "node_id": c.node,
            "description": c.description,
            "created_round": c.created_round,
            "state": c.state.value,
            "frequency": c.frequency,
        }
        for c in last.causes.values()
    ]
    states = [
        {"round": m.committed, "cause_id": c.id, "node_id": c.node, "state": c.state.value, "frequency": c.frequency}
        for m in memories
        for c in m.causes.values()
    ]
    return {
        "nodes": _frame(nodes, "nodes"),
        "causes": _frame(causes, "causes"),
        "cause_states": _frame(states, "cause_states"),
    }


def _frame(rows: list[dict[str, Any]], table: str) -> pl.DataFrame:
    import polars as pl

    types = {"int64": pl.Int64, "float64": pl.Float64, "bool": pl.Boolean, "string": pl.String}
    schema = {col: types[kind] for col, (kind, _) in COLUMNS[table].items()}
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema, orient="row")


def signed(card: str) -> str:
    """``card`` with a last line holding its digest: how a later export knows the card as its own
    (a ``README.md`` of the user's, or one edited since, is never replaced)."""
    return f"{card}{CARD_MARK}{hashlib.sha256(card.encode()).hexdigest()} -->\n"


def own_card(path: Path) -> bool:
    """Whether ``path`` is a card an export wrote (:func:`signed`) and nobody edited since."""
    if path.is_symlink() or not path.is_file():
        return False
    card, mark, digest = path.read_bytes().decode("utf-8", "replace").rpartition(CARD_MARK)
    return bool(mark) and digest == f"{hashlib.sha256(card.encode()).hexdigest()} -->\n"


def _output_dir(out: Path, force: bool) -> Path:
    """``out``, checked (:func:`~diagevo.files.written.export_dir`), holding no card but its own, and no file
    the export does not write unless ``force`` (those are then left as they are)."""
    export_dir(out)
    card = out / CARD
    if (card.exists() or card.is_symlink()) and not own_card(card):
        raise ExportError(
            f"{card} was not written by diagevo's dataset export, or was edited since: move it, or name a new directory"
        )
    ours = {f"{name}.parquet" for name in TABLES} | {CARD}
    others = sorted(p.name for p in out.iterdir() if p.name not in ours) if out.is_dir() else []
    if others and not force:
        raise ExportError(
            f"{out} holds files the export does not write ({', '.join(others[:3])}"
            f"{', ...' if len(others) > 3 else ''}): name a new directory, or write beside them",
            Argument("force", True),
            aside=True,
            about=out,
        )
    return out


@validated
def export_dataset(
    store: Recorder,
    run: str,
    out: Path | str,
    *,
    upto_round: int | None = None,
    retained_only: bool = False,
    force: bool = False,
) -> Exported:
    """Write ``run`` through committed round ``upto_round`` (default: its last) into the directory
    ``out`` as Parquet files (questions, failures, nodes, causes, cause_states) and a ``README.md`` dataset card.
    Written atomically (a new directory appears whole; an earlier export's files are each replaced
    whole); a directory holding other files is refused unless ``force``, and they are never
    replaced. Needs polars (the ``data`` extra)."""
    require_use("export dataset")
    folder = _output_dir(Path(out), force)
    if not store.has_run(run):
        raise NotFound(f"no run {run!r} in the database{did_you_mean(run, store.runs())}")
    done = committed_rounds(store, run)
    if not done:
        raise ExportError(f"run {run!r} has no committed round to export")
    upto = done[-1] if upto_round is None else upto_round
    if upto not in done:
        raise ExportError(f"round {upto} of run {run!r} is not committed (its last committed round is {done[-1]})")
    memories = [m for m in commit_memories(store, run) if m.committed <= upto]
    nodes = admitted_rows(store, run, types=(NodeCreated,))
    node_rounds = {n.node_id: e.round for e in nodes if 1 <= e.round <= upto and isinstance(n := e.event, NodeCreated)}
    frames = {
        "questions": questions(store, run, upto, retained_only),
        "failures": failures(store, run, upto),
        **memory_tables(memories, node_rounds),
    }
    exported = Exported(run, str(folder), upto, retained_only, [])
    with building(folder) as staging:
        for name in TABLES:
            path = staging / f"{name}.parquet"
            write_table(frames[name], path)
            exported.files.append(ExportedFile(f"{name}.parquet", frames[name].height, path.stat().st_size))
        write_replacing(staging / CARD, signed(dataset_card(exported, frames, dict(memories[-1].config))))
        exported.files.append(ExportedFile(CARD, 0, (staging / CARD).stat().st_size))
    return exported


def fenced(content: str, lang: str = "") -> str:
    """``content`` as a Markdown code block whose fence no backtick run inside can close."""
    ticks, current = 3, 0
    for ch in content:
        current = current + 1 if ch == "`" else 0
        ticks = max(ticks, current + 1)
    fence = "`" * ticks
    return f"{fence}{lang}\n{content}\n{fence}"


CARD_TEMPLATE = Path(__file__).with_name("dataset_card.md.jinja")
"""The card's text around the run's figures (a jinja2 template; Markdown, so nothing is escaped:
the run's id and config are fenced, every text a model wrote stays in the Parquet files)."""


def dataset_card(exported: Exported, frames: Mapping[str, pl.DataFrame], config: Mapping[str, Any]) -> str:
    """The ``README.md`` of an exported run: the YAML header ``datasets`` reads, then the card."""
    env = jinja2.Environment(
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined
    )
    env.filters["fenced"] = fenced
    return env.from_string(CARD_TEMPLATE.read_text(encoding="utf-8")).render(
        columns=COLUMNS,
        exported=exported,
        version=version(),
        rows={name: frame.height for name, frame in frames.items()},
        sizes={f.name: f.bytes for f in exported.files},
        config=json.dumps(redact_config(config), indent=2, sort_keys=True, ensure_ascii=True),
    )
