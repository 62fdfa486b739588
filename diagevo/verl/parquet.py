"""A round as the Parquet files verl trains on, in the layout of its ``RLHFDataset``.

One row per prompt: ``data_source``, ``prompt`` (chat messages, the tokenizer's chat template
applied by verl), ``ability``, ``reward_model`` (``style: "rule"``, ``ground_truth``) and
``extra_info`` (``index`` and what the reward functions read). Four files, each written only
when the round has its rows, and a manifest:

- ``solver.parquet``: Q^cur, the round's retained questions, each as the paper's solver prompt,
  its pseudo-label the ground truth of :func:`~diagevo.verl.compute_score`;
- ``challenger.parquet``: Q^chal, the challenger's update prompts (Appendix J, free, targeted or
  stitched as the schedule of M_{t-1} drew them), with the run's settings of the challenger
  reward (:func:`~diagevo.verl.challenger_score`) in ``extra_info``;
- ``curriculum.parquet``: the requests the updated challenger generates Q^cur from, the same
  layout (verl's generation entry point reads it);
- ``construct.parquet``: once the challenger has written Q^cur (verl's generation output of
  ``curriculum.parquet``, its ``responses`` column), the question of each request as a solver
  prompt, for the solver's N construction responses (verl's generation again), which
  :func:`generated_candidates` reads back as the round's candidates (``diagevo round record
  --from-verl``);
- ``verl.json``: the manifest, what verl needs of the round and a rollout dump must match: the
  run, the round, a digest of the retained questions (ids, texts, pseudo-labels; ``diagevo
  diagnose --from-verl`` refuses a dump beside another), and for each file to train on the batch
  settings its rows need (``overrides``: verl gets no step from fewer rows than
  ``data.train_batch_size``).

The requests are drawn only while the round is open (the same for the same run, round and
seed, as ``Round.requests`` draws them). A file is written atomically, and only over a file
this export wrote for the same run and round (its Parquet metadata, the manifest's run and round
say so): anything else in the directory stays as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from diagevo.curriculum.prompts import parse_question, solver_messages
from diagevo.errors import BadInput, NotFound, open_call, require_use
from diagevo.files.written import export_dir, replaced, write_replacing
from diagevo.log import Recorder
from diagevo.rounds import Candidate, LoggedQuestion, ProtocolError, Request, Round, logged_questions, round_state
from diagevo.text.parsing import loads, one_line, quoted
from diagevo.text.words import did_you_mean
from diagevo.verl.dumps import MANIFEST, export_tag, manifest_tag, questions_digest, read_manifest, tag_round
from diagevo.verl.rewards import ACTOR_CALLS, ChallengerSettings

ABILITY = "math"
MARK = b"diagevo.verl"
"""The key of the Parquet metadata that says which run and round diagevo wrote a file for."""
REQUEST_FIELDS = ("mode", "active_cause", "mastered_cause", "node")


@dataclass(frozen=True, slots=True)
class VerlFile:
    """One file written: its name, its rows, its size in bytes, the verl overrides that train on
    its rows (batch settings), and how many rows of its input were left out (``construct.parquet``:
    generated outputs with no ``<question>`` block)."""

    name: str
    rows: int
    bytes: int
    overrides: list[str] = field(default_factory=list)
    left_out: int = 0


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
    """pyarrow, with the submodule ``pyarrow.parquet`` loaded; refused naming the data extra
    where it is not installed."""
    require_use("export verl", "verl's Parquet files")
    import pyarrow
    import pyarrow.parquet  # noqa: F401  (the submodule pyarrow.parquet.write_table lives in)

    return pyarrow


def _schemas(pa: Any) -> dict[str, Any]:
    messages = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    reward_model = pa.struct([("style", pa.string()), ("ground_truth", pa.string())])
    ids = [
        ("run", pa.string()),
        ("round", pa.int64()),
        ("question_id", pa.string()),
        ("index", pa.int64()),
        ("export", pa.string()),
    ]
    request = [(name, pa.string()) for name in REQUEST_FIELDS]
    reward = [(f.name, pa.int64() if f.type == "int" else pa.float64()) for f in fields(ChallengerSettings)]

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
    construct = layout([*ids, *request, ("question", pa.string())])
    return {"solver": layout(ids), "challenger": requests, "curriculum": requests, "construct": construct}


def _row(name: str, messages: list[dict[str, str]], label: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "data_source": f"diagevo/{name}",  # verl groups its metrics by it
        "prompt": messages,
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": label},
        "extra_info": extra,
    }


def solver_rows(rnd: Round, retained: Iterable[LoggedQuestion]) -> list[dict[str, Any]]:
    """Q^cur: the round's ``retained`` questions that have a pseudo-label, in the order recorded, as solver prompts."""
    labelled = [q for q in retained if q.pseudo_label]
    return [
        _row("solver", solver_messages(q.text), q.pseudo_label, _ids(rnd, q.question_id, i))
        for i, q in enumerate(labelled)
    ]


def request_rows(rnd: Round, name: str, requests: Sequence[Request]) -> list[dict[str, Any]]:
    """Requests as challenger prompts, with the run's settings of the challenger reward."""
    reward = asdict(ChallengerSettings.from_config(rnd.config))
    return [_row(name, q.messages(), "", {**_request_ids(rnd, q, i), **reward}) for i, q in enumerate(requests)]


def _ids(rnd: Round, question_id: str, index: int) -> dict[str, Any]:
    return {"run": rnd.run, "round": rnd.t, "question_id": question_id, "index": index}


def _request_ids(rnd: Round, q: Request, index: int) -> dict[str, Any]:
    """A request's row's ids and the request's draw (mode, causes, node), which the rows made of it carry on."""
    return {**_ids(rnd, q.question_id, index), **{k: getattr(q, k) for k in REQUEST_FIELDS}}


def export_round(
    store: Recorder, run: str, out: Path, *, t: int | None = None, questions: Path | None = None
) -> VerlExport:
    """Write round ``t`` of ``run`` (default: its open round; with none open, refused naming the
    last committed one, which is exported when named) into
    the directory ``out``: ``solver.parquet`` once questions are retained, and while the round
    is open ``challenger.parquet`` (|Q^chal| requests) and ``curriculum.parquet`` (|Q^cur|
    requests), the sizes of the run's config; with ``questions`` (verl's generation output of
    ``curriculum.parquet``) also ``construct.parquet``; and the manifest ``verl.json``."""
    pa = _pyarrow()
    if not store.has_run(run):
        raise NotFound(f"no run {run!r} in the database{did_you_mean(run, store.runs())}")
    st = round_state(store, run)
    if t is None:
        if not st.open_round:  # the next step's files are the open round's: none is
            last = st.last_committed
            said = f"round {last} is committed (name it to export it again)" if last else "it has no round yet"
            raise BadInput(f"run {run!r} has no open round: {said}; open round {last + 1} first with", open_call(run))
        t = st.open_round
    if t < 1 or t > st.last_committed and t != st.open_round:
        opened = f", its open round {st.open_round}" if st.open_round else ", and no round is open"
        raise BadInput(
            f"round {t} of run {run!r} is neither committed nor open (last committed {st.last_committed}{opened})"
        )
    rnd = Round(store, run, t)
    is_open = t == st.open_round
    if questions is not None and not is_open:
        raise BadInput(f"round {t} of run {run!r} is committed: generated questions are recorded into the open round")
    cfg = rnd.config
    retained = logged_questions(store, run, t=t, retained=True)
    tables = {"solver": solver_rows(rnd, retained)}
    left_out = 0
    if is_open:
        tables["challenger"] = request_rows(
            rnd, "challenger", rnd.requests(cfg.challenger_questions, purpose="challenger")
        )
        tables["curriculum"] = request_rows(rnd, "curriculum", rnd.requests(cfg.train.curriculum_questions))
        if questions is not None:
            tables["construct"], left_out = construct_rows(rnd, questions)
    folder = export_dir(out)
    folder.mkdir(parents=True, exist_ok=True)
    written = {name: tagged(run, t, name, rows) for name, rows in tables.items() if rows}
    for name in [*(f"{name}.parquet" for name in written), MANIFEST]:
        _refuse_foreign(folder / name, run, t)
    schemas = _schemas(pa)
    mark = json.dumps({"run": run, "round": t}).encode()
    files = []
    for name, rows in written.items():
        path = folder / f"{name}.parquet"
        table = pa.Table.from_pylist(rows, schema=schemas[name].with_metadata({MARK: mark}))
        with replaced(path, binary=True) as fh:
            pa.parquet.write_table(table, fh)
        skipped = left_out if name == "construct" else 0
        files.append(VerlFile(path.name, table.num_rows, path.stat().st_size, overrides(rnd, name, rows), skipped))
    kept = _kept_from(folder, run, t, written)
    manifest = {
        "run": run,
        "round": t,
        "questions": questions_digest(retained),
        "exports": {
            **kept["exports"],
            **{f"{name}.parquet": rows[0]["extra_info"]["export"] for name, rows in written.items()},
        },
        "overrides": {**kept["overrides"], **{f.name: f.overrides for f in files}},
    }
    write_replacing(folder / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    return VerlExport(run, t, str(folder), is_open, files)


EXPORTED = frozenset(f"{name}.parquet" for name in ("challenger", "curriculum", "construct", "solver"))
"""The files an export writes (a manifest's other names are nobody's)."""


def _kept_from(folder: Path, run: str, t: int, written: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """What the manifest in ``folder`` (of this run and round) says of the files this export does
    not write again that still lie there (``construct.parquet`` after an export without
    ``--questions``): their tags and overrides, kept, so a later record of their generation is
    still told apart from another export's."""
    kept: dict[str, dict[str, Any]] = {"exports": {}, "overrides": {}}
    if not (folder / MANIFEST).is_file():
        return kept
    old = read_manifest(folder / MANIFEST)
    if (old.get("run"), old.get("round")) != (run, t):
        return kept
    rewritten = {f"{name}.parquet" for name in written}
    for part in ("exports", "overrides"):
        held = old.get(part)
        for name, value in held.items() if isinstance(held, dict) else ():
            if name in EXPORTED and name not in rewritten and (folder / name).is_file():
                kept[part][name] = value
    return kept


def tagged(run: str, t: int, name: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with the file's export tag (:func:`~diagevo.verl.dumps.export_tag`) in each
    row's ``extra_info``: verl's generation keeps it in its output, and ``compute_score`` returns
    it, so the round record and the dump reader can tell this export's rows from another's."""
    tag = export_tag(run, t, f"{name}.parquet", rows)
    return [{**row, "extra_info": {**row["extra_info"], "export": tag}} for row in rows]


def overrides(rnd: Round, name: str, rows: list[dict[str, Any]]) -> list[str]:
    """The verl overrides that train on a file's ``rows`` (or generate from them) with the run's
    config: a step is ``data.train_batch_size`` prompts of the file, and verl takes no step from
    fewer rows than that, so the batch is the role's ``batch_size`` or the rows, whichever is
    fewer (for the challenger also no more than verl's reward worker can gather at once,
    :func:`~diagevo.verl.rewards.step_size`, in more steps); G rollouts each; saved at the last step.
    The solver's reward is given the file's export tag, so a solver.parquet of another round is
    refused at its first call (:func:`~diagevo.verl.compute_score`), not at ``diagnose``."""

    cfg = rnd.config
    if name == "curriculum":
        return ["actor_rollout_ref.rollout.n=1"]
    if name == "construct":
        return [f"actor_rollout_ref.rollout.n={cfg.grpo.construction_responses}"]
    role = cfg.solver if name == "solver" else cfg.challenger
    wanted = min(role.batch_size, len(rows))
    batch = min(wanted, ACTOR_CALLS // role.group_size) if name == "challenger" else wanted
    steps = role.max_steps * wanted // batch  # the role's prompts, in steps of the batch
    tag = [f"++reward.custom_reward_function.reward_kwargs.export={rows[0]['extra_info']['export']}"]
    return [
        f"data.train_batch_size={batch}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={batch}",
        f"actor_rollout_ref.rollout.n={role.group_size}",
        f"trainer.total_training_steps={steps}",
        f"trainer.save_freq={steps}",
        *(tag if name == "solver" else []),
    ]


def construct_rows(rnd: Round, path: Path) -> tuple[list[dict[str, Any]], int]:
    """The questions the challenger wrote for the round's requests (verl's generation output of
    ``curriculum.parquet``: one response per request), each as a solver prompt with its request;
    and how many responses held no ``<question>`` block (left out: nothing to answer)."""
    requests = {q.question_id: q for q in rnd.requests(rnd.config.train.curriculum_questions)}
    rows: list[dict[str, Any]] = []
    left_out = 0
    for where, info, responses in generated_rows(path, rnd.run, rnd.t, "curriculum.parquet"):
        q = requests.get(info["question_id"])
        if q is None:
            raise BadInput(f"{where}: {quoted(info['question_id'])} is not a request of round {rnd.t}")
        if len(responses) != 1:
            raise BadInput(
                f"{where}: {len(responses)} responses to one request: generate Q^cur with actor_rollout_ref.rollout.n=1"
            )
        text = parse_question(responses[0])
        if text is None:
            left_out += 1
            continue
        rows.append(_row("construct", solver_messages(text), "", {**_request_ids(rnd, q, len(rows)), "question": text}))
    return rows, left_out


def generated_candidates(path: Path, run: str, t: int, *, responses: int | None = None) -> list[Candidate]:
    """The round's candidates from verl's generation output of ``construct.parquet`` (its
    ``responses``: the solver's N construction responses to each question), as
    :meth:`~diagevo.rounds.Round.record` takes them (``diagevo round record --from-verl``). Each
    row must hold N responses: the ``actor_rollout_ref.rollout.n`` the export's manifest set for
    ``construct.parquet`` (``verl.json`` beside the file or the folder above it, of this round),
    else ``responses`` (the run's ``grpo.construction_responses``): a generation made with
    another n would be voted on and filtered with the wrong N, and is refused naming both. Where
    both are known, the run's config decides: a manifest that sets another n (edited by hand) is
    refused, naming both, before any row is read."""
    found = round_manifest(path, run, t)
    n, said = (found and _construct_n(*found)) or (responses, "the run's grpo.construction_responses")
    if responses is not None and n != responses:
        raise BadInput(
            f"{said} is {n}, and the run's grpo.construction_responses is {responses}: the run's config decides; "
            "export the round again with its questions (verl.json is the export's, not to be edited)",
            about="actor_rollout_ref.rollout.n",
            value=n,
        )
    out = []
    for where, info, texts in generated_rows(path, run, t, "construct.parquet"):
        if not isinstance(info.get("question"), str):
            raise BadInput(f"{where}: its extra_info has no question: a generation of construct.parquet has one")
        if n is not None and len(texts) != n:
            raise BadInput(
                f"{where}: {len(texts)} responses to its question, and {said} is {n}: generate construct.parquet "
                f"with actor_rollout_ref.rollout.n={n}"
            )
        fields: dict[str, Any] = {k: info.get(k) for k in REQUEST_FIELDS}
        try:
            out.append(Candidate(info["question_id"], text=info["question"], responses=tuple(texts), **fields))
        except ProtocolError as exc:
            raise BadInput(f"{where}: {exc}") from None
    return out


def round_manifest(path: Path, run: str, t: int) -> tuple[Path, dict[str, Any]] | None:
    """The manifest of this round's export beside ``path`` or in the folder above it (verl's
    output is written into the export's folder, or one below it), and its path; None where
    there is none of this run and round."""
    for manifest_path in (path.parent / MANIFEST, path.parent.parent / MANIFEST):
        if not manifest_path.is_file() or manifest_path.is_symlink():
            continue
        manifest = read_manifest(manifest_path)
        if (manifest["run"], manifest["round"]) == (run, t):
            return manifest_path, manifest
    return None


def _construct_n(manifest_path: Path, manifest: Mapping[str, Any]) -> tuple[int, str] | None:
    """The ``actor_rollout_ref.rollout.n`` the manifest set for ``construct.parquet``, and where
    it was read; None where it sets none."""
    overrides = manifest.get("overrides")
    given = overrides.get("construct.parquet", []) if isinstance(overrides, dict) else []
    for item in given if isinstance(given, list) else []:
        key, _, value = str(item).partition("=")
        if key != "actor_rollout_ref.rollout.n":
            continue
        if not (value.isascii() and value.isdigit()):  # "²" is a digit to str.isdigit, not to int()
            raise BadInput(
                f"{manifest_path}: its actor_rollout_ref.rollout.n of construct.parquet, {quoted(value, 40)}, is no "
                "whole number (export the round again: the export writes it)",
                about="actor_rollout_ref.rollout.n",
                value=value,
            )
        return int(value), f"{manifest_path}'s actor_rollout_ref.rollout.n"
    return None


def generated_rows(path: Path, run: str, t: int, source: str) -> Iterable[tuple[str, Mapping[str, Any], list[str]]]:
    """``(where, extra_info, responses)`` of each row of verl's generation output (the input's
    columns and ``responses``), checked to be of ``run``'s round ``t``: a row of another round or
    run, or without what the export wrote, is refused naming the file and row."""

    pq = _pyarrow().parquet  # the data extra, named in one line where it is missing
    if not path.is_file():
        raise NotFound(f"no file {path}: name the Parquet file verl's generation wrote (its data.output_path)")
    try:
        names = pq.read_schema(path).names
        rows = pq.read_table(path, columns=[c for c in ("extra_info", "responses") if c in names]).to_pylist()
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise BadInput(f"{path} is not a Parquet file verl's generation wrote: {one_line(str(exc))[:200]}") from None
    missing = [c for c in ("extra_info", "responses") if c not in names]
    if missing:
        raise BadInput(
            f"{path} has no column {', '.join(missing)}: verl's generation of {source} writes its columns and responses"
        )
    if not rows:
        raise BadInput(f"{path} holds no rows")
    found = round_manifest(path, run, t)
    for i, row in enumerate(rows, 1):
        where, info, responses = f"{path} row {i}", row["extra_info"], row["responses"]
        if not isinstance(info, dict) or not isinstance(info.get("question_id"), str):
            raise BadInput(f"{where}: its extra_info has no question_id: not a generation of diagevo's {source}")
        if (info.get("run"), info.get("round")) != (run, t):
            theirs = f"round {quoted(info.get('round'))} of run {quoted(info.get('run'))}"
            raise BadInput(f"{where} is of {theirs}, not round {t} of run {quoted(run)}: another round's generation")
        _check_tag(info.get("export"), found, where, source)
        if not isinstance(responses, list):
            raise BadInput(f"{where}: responses is not a list of texts (it is {type(responses).__name__})")
        odd = next((i for i, r in enumerate(responses) if not isinstance(r, str)), None)
        if odd is not None:
            shown = "None" if responses[odd] is None else f"a {type(responses[odd]).__name__}"
            raise BadInput(f"{where}: response {odd} of {len(responses)} is {shown}, not a text")
        yield where, info, responses


def _check_tag(tag: object, found: tuple[Path, Mapping[str, Any]] | None, where: str, source: str) -> None:
    """Refuse a generated row of another export of ``source`` than the manifest beside it names
    (``found``: its path and content; None: no manifest of the round there, any tag of this round's
    export holds), or of an export that wrote no tag. The real cause first: a generation of another
    file of the export is named as that file's, before any tag is compared."""
    if not isinstance(tag, str):
        raise BadInput(
            f"{where}: its extra_info has no export tag: a generation of {source} exported by an older diagevo; "
            "export the round again and generate from that export"
        )
    if found is None:
        return
    tags = found[1].get("exports")
    other = next((name for name, t in tags.items() if t == tag), None) if isinstance(tags, dict) else None
    if other is not None and other != source:
        raise BadInput(f"{where} is a generation of {other}, not of {source}: name verl's generation of {source}")
    want = manifest_tag(found[1], found[0], source)
    if tag != want:  # construct.parquet exported since with another chunk of questions: that chunk's export again
        fix = (
            "export the round again with the questions it was generated from (the same questions give the same tag), "
            "then record it"
            if source == "construct.parquet"
            else "generate from the file the manifest names, or export the round into its own folder"
        )
        raise BadInput(
            f"{where} belongs to round {tag_round(tag)}'s export of {source} (tag {quoted(tag, 40)}), not the one "
            f"beside it ({want}): {fix}"
        )


def _refuse_foreign(path: Path, run: str, t: int) -> None:
    """Refuse to replace ``path`` unless this export wrote it for the same run and round."""

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
    """The run and round of a file this export wrote (a Parquet file's metadata, the manifest's
    own keys); None for any other file."""
    pq = _pyarrow().parquet
    if path.is_symlink() or not path.is_file():
        return None
    try:
        if path.name == MANIFEST:
            mark = read_manifest(path)  # BadInput, a ValueError: not this export's
            mark = {"run": mark["run"], "round": mark["round"]}
        else:
            mark = loads((pq.read_schema(path).metadata or {})[MARK], str(path))
    except (OSError, KeyError, ValueError, TypeError):  # pyarrow's ArrowInvalid is a ValueError
        return None
    return mark if isinstance(mark, dict) else None
