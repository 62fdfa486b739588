"""A round as the Parquet files verl trains on, in the layout of its ``RLHFDataset``.

One row per prompt: ``data_source``, ``prompt`` (chat messages, the tokenizer's chat template
applied by verl), ``ability``, ``reward_model`` (``style: "rule"``, ``ground_truth``) and
``extra_info`` (``index`` and what the reward functions read). Three files, each written only
when the round has its rows:

- ``solver.parquet``: Q^cur, the round's retained questions, each as the paper's solver prompt,
  its pseudo-label the ground truth of :func:`~diagevo.verl.compute_score`;
- ``challenger.parquet``: Q^chal, the challenger's update prompts (Appendix J, free, targeted or
  stitched as the schedule of M_{t-1} drew them), with the run's settings of the challenger
  reward (:func:`~diagevo.verl.challenger_score`) in ``extra_info``;
- ``curriculum.parquet``: the requests the updated challenger generates Q^cur from, the same
  layout (verl's generation entry point reads it).

The requests are drawn only while the round is open (the same for the same run, round and
seed, as ``Round.requests`` draws them). A file is written atomically, and only over a file
this export wrote for the same run and round (its Parquet metadata says so): anything else in
the directory stays as it is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagevo.errors import BadInput, NotFound, Unavailable
from diagevo.files import export_dir

if TYPE_CHECKING:
    from diagevo.log import Recorder
    from diagevo.rounds import Request, Round

ABILITY = "math"
SOURCES = {"solver": "diagevo/solver", "challenger": "diagevo/challenger", "curriculum": "diagevo/curriculum"}
"""Each file's ``data_source`` (verl groups its metrics by it)."""
MARK = b"diagevo.verl"
"""The key of the Parquet metadata that says which run and round diagevo wrote a file for."""


@dataclass(frozen=True, slots=True)
class VerlFile:
    """One file written: its name, its rows and its size in bytes."""

    name: str
    rows: int
    bytes: int


@dataclass(frozen=True, slots=True)
class VerlExport:
    """What :func:`export_round` wrote: the round, whether it is open (its requests drawn), and the files."""

    run: str
    round: int
    directory: str
    open: bool
    files: list[VerlFile] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401  (the submodule pyarrow.parquet.write_table lives in)
    except ImportError:
        from diagevo.fixes import Fix, Install

        raise Unavailable(
            "writing verl's Parquet files needs pyarrow ({command})", fix=Fix.of(Install("data"))
        ) from None
    return pyarrow


def _schemas(pa: Any) -> dict[str, Any]:
    messages = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    reward_model = pa.struct([("style", pa.string()), ("ground_truth", pa.string())])
    ids = [("run", pa.string()), ("round", pa.int64()), ("question_id", pa.string()), ("index", pa.int64())]
    request = [
        ("mode", pa.string()),
        ("active_cause", pa.string()),
        ("mastered_cause", pa.string()),
        ("node", pa.string()),
    ]
    reward = [
        ("votes", pa.int64()),
        ("temperature", pa.float64()),
        ("top_p", pa.float64()),
        ("lam", pa.float64()),
        ("cluster_distance_threshold", pa.float64()),
    ]

    def layout(extra: list[tuple[str, Any]]) -> Any:
        return pa.schema(
            [
                ("data_source", pa.string()),
                ("prompt", messages),
                ("ability", pa.string()),
                ("reward_model", reward_model),
                ("extra_info", pa.struct(extra)),
            ]
        )

    requests = layout([*ids, *request, *reward])
    return {"solver": layout(ids), "challenger": requests, "curriculum": requests}


def _row(name: str, messages: list[dict[str, str]], label: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "data_source": SOURCES[name],
        "prompt": messages,
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": label},
        "extra_info": extra,
    }


def solver_rows(rnd: Round) -> list[dict[str, Any]]:
    """Q^cur: the round's retained questions in the order recorded, as solver prompts."""
    from diagevo.catalog import QuestionGenerated, QuestionScored
    from diagevo.curriculum import solver_messages

    texts: dict[str, str] = {}
    labels: dict[str, str] = {}
    for _s, _r, typ, d, _v in rnd.store.rows(
        rnd.run, types=(QuestionGenerated, QuestionScored), in_round=rnd.t, texts=True
    ):
        if typ == QuestionGenerated.name:
            texts[d["question_id"]] = d["text"]
        elif d["retained"] and d.get("pseudo_label"):
            labels[d["question_id"]] = d["pseudo_label"]
    retained = [qid for qid in texts if qid in labels]
    return [
        _row("solver", solver_messages(texts[qid]), labels[qid], _ids(rnd, qid, i)) for i, qid in enumerate(retained)
    ]


def request_rows(rnd: Round, name: str, requests: Sequence[Request]) -> list[dict[str, Any]]:
    """Requests as challenger prompts, with the run's settings of the challenger reward."""
    cfg = rnd.config
    reward = {
        "votes": cfg.grpo.construction_responses,
        "temperature": cfg.grpo.temperature,
        "top_p": cfg.grpo.top_p,
        "lam": cfg.reward.lam,
        "cluster_distance_threshold": cfg.reward.cluster_distance_threshold,
    }
    return [
        _row(
            name,
            q.messages(),
            "",
            {
                **_ids(rnd, q.question_id, i),
                **{k: getattr(q, k) for k in ("mode", "active_cause", "mastered_cause", "node")},
                **reward,
            },
        )
        for i, q in enumerate(requests)
    ]


def _ids(rnd: Round, question_id: str, index: int) -> dict[str, Any]:
    return {"run": rnd.run, "round": rnd.t, "question_id": question_id, "index": index}


def export_round(store: Recorder, run: str, out: Path, *, t: int | None = None) -> VerlExport:
    """Write round ``t`` of ``run`` (default: its open round, else its last committed one) into
    the directory ``out``: ``solver.parquet`` once questions are retained, and while the round
    is open ``challenger.parquet`` (|Q^chal| requests) and ``curriculum.parquet`` (|Q^cur|
    requests), the sizes of the run's config."""
    from diagevo.rounds import Round, round_state
    from diagevo.words import did_you_mean

    pa = _pyarrow()
    if not store.has_run(run):
        raise NotFound(f"no run {run!r} in the database{did_you_mean(run, store.runs())}")
    st = round_state(store, run)
    if t is None:
        t = st.open_round or st.last_committed
    if t < 1 or t > st.last_committed and t != st.open_round:
        opened = f", its open round {st.open_round}" if st.open_round else ", and no round is open"
        raise BadInput(
            f"round {t} of run {run!r} is neither committed nor open (last committed {st.last_committed}{opened})"
        )
    rnd = Round(store, run, t)
    tables = {"solver": solver_rows(rnd)}
    is_open = t == st.open_round
    if is_open:
        cfg = rnd.config
        tables["challenger"] = request_rows(
            rnd, "challenger", rnd.requests(cfg.challenger_questions, purpose="challenger")
        )
        tables["curriculum"] = request_rows(rnd, "curriculum", rnd.requests(cfg.curriculum_questions))
    folder = _output_dir(out)
    written = {name: rows for name, rows in tables.items() if rows}
    for name in written:
        _refuse_foreign(folder / f"{name}.parquet", run, t)
    schemas = _schemas(pa)
    mark = json.dumps({"run": run, "round": t}).encode()
    files = []
    for name, rows in written.items():
        path = folder / f"{name}.parquet"
        table = pa.Table.from_pylist(rows, schema=schemas[name].with_metadata({MARK: mark}))
        _write(pa, table, path)
        files.append(VerlFile(path.name, table.num_rows, path.stat().st_size))
    return VerlExport(run, t, str(folder), is_open, files)


def _output_dir(out: Path) -> Path:
    export_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _refuse_foreign(path: Path, run: str, t: int) -> None:
    """Refuse to replace ``path`` unless this export wrote it for the same run and round."""
    from diagevo.parsing import quoted

    if not path.exists() and not path.is_symlink():
        return
    written_for = _written_for(path)
    if written_for is None:
        raise BadInput(f"{path} exists and was not written by diagevo's verl export: remove it, or export elsewhere")
    if written_for != {"run": run, "round": t}:
        theirs = f"round {quoted(written_for.get('round'))} of run {quoted(written_for.get('run'))}"
        raise BadInput(
            f"{path} holds {theirs}, not round {t} of run {quoted(run)}: export each round into its own directory"
        )


def _written_for(path: Path) -> dict[str, Any] | None:
    """The run and round in the metadata of a Parquet file this export wrote; None for any other file."""
    import pyarrow.parquet as pq

    if path.is_symlink() or not path.is_file():
        return None
    try:
        metadata = pq.read_schema(path).metadata or {}
        mark = json.loads(metadata[MARK])
    except (OSError, KeyError, ValueError, TypeError):  # pyarrow's ArrowInvalid is a ValueError
        return None
    return mark if isinstance(mark, dict) else None


def _write(pa: Any, table: Any, path: Path) -> None:
    from diagevo.files import replaced

    with replaced(path, binary=True) as fh:
        pa.parquet.write_table(table, fh)
