"""verl's rollout dumps read back into a round's failures.

verl's trainer writes ``{step}.jsonl`` under ``trainer.rollout_data_dir``, one line per response
(``_write_generations``): ``input`` (the prompt, decoded without special tokens), ``output``,
``gts`` (the ground truth: the pseudo-label), ``score``, ``step``, and per response the reward
extras its trainer keeps (``uid``; the legacy trainer also each key :func:`~diagevo.verl.compute_score`
returned, ``question_id`` among them). A line is matched to a retained question of the round by
that ``question_id`` where the dump has one, else by the question's text in ``input``.

A dump is read beside the export it trained on: the manifest ``verl.json`` that ``diagevo
export verl`` wrote, in the dump's directory or the one above it (the recipe dumps into the
export's directory), must name the run, the round and the retained questions the dump is read
for, so a dump of another round, run or question set is refused even where its questions'
texts and labels are the same.

A failure is a response the solver's reward scores -1 against the pseudo-label (diagevo's
answer check, again); a dump whose ``score`` says otherwise was scored by another reward
function, and is refused. An empty response has nothing to diagnose and is left out; past the
run's ``diagnosis.max_failures_per_question`` a question's failures are left out, as diagevo's
own loop leaves them (the first ones kept, in step order). A failure's id derives from the
question, the step and the failure's place among that question's failures in the step's file,
so reading the same dump again gives the same failures (recording them again is a no-op) and a
changed dump names a failure whose content changed (refused by
:meth:`~diagevo.rounds.Round.record_failures`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagevo.catalog import FailureRecorded, QuestionGenerated, failure_id
from diagevo.catalog.failure import Failure
from diagevo.curriculum.prompts import SOLVER_SYSTEM
from diagevo.curriculum.reward import solver_scores
from diagevo.errors import Argument, BadInput, NotFound
from diagevo.log import Recorder
from diagevo.rounds import LoggedQuestion, logged_questions, round_state, run_config
from diagevo.text.formats import RolloutLine, read_lines
from diagevo.text.parsing import error_line, file_lines, loads_object, quoted
from diagevo.views.admission import admitted_rows

MANIFEST = "verl.json"
"""The manifest ``diagevo export verl`` writes beside its files: what a dump must match."""
STEP_FILE = re.compile(r"(0|[1-9][0-9]{0,8})\.jsonl")
"""The name verl gives a step's dump: the global step, ``.jsonl``."""


def _words(text: str) -> str:
    return " ".join(text.split())


class QuestionFinder:
    """Which retained question a dumped prompt asks. A prompt is the chat template around the
    solver prompt, decoded; the question is searched for after the solver's system message (which
    comes first), the longest question first. The template's text around the question is the same
    in every line of a dump, so once one line has been matched by search, the others are looked up
    directly."""

    def __init__(self, questions: Iterable[LoggedQuestion]) -> None:
        self.by_text: dict[str, list[str]] = {}
        for q in questions:
            self.by_text.setdefault(_words(q.text), []).append(q.question_id)
        self.longest_first = sorted(self.by_text, key=len, reverse=True)
        self._around: tuple[int, int] | None = None  # characters before and after the question
        self.system = _words(SOLVER_SYSTEM)

    def find(self, prompt: str) -> list[str]:
        """The ids of the retained questions of this text (several when one text was retained
        under several ids), or none."""
        words = _words(prompt)
        system = words.find(self.system)
        if system >= 0:
            words = words[system + len(self.system) :]
        if self._around is not None:
            before, after = self._around
            hit = self.by_text.get(words[before : len(words) - after])
            if hit is not None:
                return hit
        for text in self.longest_first:
            at = words.rfind(text)
            if at >= 0:
                self._around = (at, len(words) - at - len(text))
                return self.by_text[text]
        return []


def export_tag(run: str, t: int, name: str, rows: list[dict[str, Any]]) -> str:
    """The tag of one exported file (``r{t}-`` and 12 hex digits of a digest of the run, the
    round, the file's name and its rows), written into each row's ``extra_info`` (``export``)
    and into the manifest (``exports``): what ties verl's output back to this export, where
    verl carries ``extra_info`` (its generation's rows) or what :func:`~diagevo.verl.compute_score`
    returns (the legacy trainer's dump). The same rows give the same tag, so exporting a round
    again leaves a file's tag as it was; its round is in the tag, so a refusal can name it."""
    digest = hashlib.sha256(json.dumps([run, t, name, rows], ensure_ascii=False, sort_keys=True).encode())
    return f"r{t}-{digest.hexdigest()[:12]}"


def tag_round(tag: str) -> str:
    """The round an export tag names (``r3-...`` -> ``3``), or ``?`` for a tag of no export."""
    head = tag.partition("-")[0]
    return head[1:] if head.startswith("r") and head[1:].isdigit() else "?"


def manifest_tag(manifest: Mapping[str, Any], path: Path, name: str) -> str:
    """The tag the manifest at ``path`` holds for the file ``name``; a manifest of an older
    export (no ``exports``) or one without that file is refused in one line: the lines read
    against it could not be told from another export's."""
    tags = manifest.get("exports")
    tag = tags.get(name) if isinstance(tags, dict) else None
    if not isinstance(tag, str):
        raise BadInput(
            f"{path} names no export tag for {name}: written by an older diagevo export verl (or {name} was not "
            "exported); export the round again and train on that export"
        )
    return tag


def questions_digest(questions: Iterable[LoggedQuestion]) -> str:
    """A digest of a round's retained questions (ids, texts, pseudo-labels), whatever their order."""
    rows = sorted((q.question_id, q.text, q.pseudo_label) for q in questions)
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode()).hexdigest()


MANIFEST_CHARS = 1_000_000
"""Largest manifest read: ``diagevo export verl`` writes a few hundred bytes."""


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest at ``path`` as a JSON object, read as untrusted text (bounded in size and
    depth: a manifest nested 100,000 deep is refused in one line, never a ``RecursionError``);
    anything else is a :class:`BadInput` naming the file."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(MANIFEST_CHARS + 1)
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {error_line(exc)}") from None
    try:
        manifest = loads_object(raw, str(path), max_chars=MANIFEST_CHARS)
    except BadInput as exc:
        raise BadInput(f"{exc}: not the manifest diagevo export verl writes") from None
    if not all(key in manifest for key in ("run", "round", "questions")):
        raise BadInput(f"{path} is not the manifest diagevo export verl writes (no run, round and questions)")
    return manifest


def check_manifest(dump: Path, run: str, t: int, questions: Iterable[LoggedQuestion]) -> tuple[Path, dict[str, Any]]:
    """Refuse, in one line, a dump that was not trained on this export of round ``t`` of ``run``:
    the manifest beside it names another run or round, or other retained questions. Returns the
    manifest's path and the manifest."""

    found = [p for p in (dump / MANIFEST, dump.parent / MANIFEST) if p.is_file() and not p.is_symlink()]
    if not found:
        raise BadInput(
            f"no {MANIFEST} in {dump} or the directory above it: a dump is read beside the export it trained on "
            f"(diagevo export verl writes {MANIFEST}; set trainer.rollout_data_dir inside the export's directory)"
        )
    path = found[0]
    manifest = read_manifest(path)
    theirs = (manifest.get("run"), manifest.get("round"), manifest.get("questions"))
    if theirs[:2] != (run, t):
        raise BadInput(
            f"{dump} was trained on round {quoted(theirs[1])} of run {quoted(theirs[0])} ({path}), not round {t} "
            f"of run {quoted(run)}: name this round's dump"
        )
    if theirs[2] != questions_digest(questions):
        raise BadInput(
            f"{dump} was trained on other questions than round {t}'s retained ones ({path}): export the round "
            "again once its questions are recorded, and train on that export"
        )
    return path, manifest


def step_files(folder: Path) -> list[tuple[int, Path]]:
    """The dump's step files, by step."""
    if not folder.is_dir():
        raise NotFound(f"no directory {folder}: name verl's trainer.rollout_data_dir")
    steps = sorted((int(p.stem), p) for p in folder.iterdir() if STEP_FILE.fullmatch(p.name) and p.is_file())
    if not steps:
        below = folder / "rollouts"
        if (folder / MANIFEST).is_file() and below.is_dir():  # the round's export folder, named for its dump
            raise NotFound(f"{folder} is the round's export, not its dump: name {below} (its trainer.rollout_data_dir)")
        raise NotFound(f"{folder} holds no rollout dump (STEP.jsonl, as verl's trainer.rollout_data_dir holds)")
    return steps


def rollout_failures(
    store: Recorder, run: str, dump: Path, *, t: int | None = None, allow_repeats: bool = False
) -> list[Failure]:
    """The failures in verl's rollout dump ``dump`` (its ``trainer.rollout_data_dir``) of the
    retained questions of round ``t`` of ``run`` (default: its open round), each as
    :meth:`~diagevo.rounds.Round.record_failures` takes it and as a line of ``diagevo diagnose``'s
    FAILURES.jsonl holds it (with its question, pseudo-label and known causes). A dump beside the
    manifest of another export (``check_manifest``) is refused; so is a line of another round's
    questions, or one scored by another reward function, naming its file and line; and an untagged
    line that repeats an earlier round's failure at the same place (``DumpTie.check_copy``),
    unless ``allow_repeats``: a genuine dump whose short answers repeat the earlier round's."""
    st = round_state(store, run)
    if t is None:
        if st.open_round is None:
            raise BadInput(f"run {run!r} has no open round to read failures into (last committed {st.last_committed})")
        t = st.open_round
    questions = {q.question_id: q for q in logged_questions(store, run, t=t, retained=True)}
    if not questions:
        raise BadInput(f"round {t} of run {run!r} has no retained question: record the round's questions first")
    steps = step_files(dump)
    tie = DumpTie.of(store, run, t, *check_manifest(dump, run, t, questions.values()))
    finder = QuestionFinder(questions.values())
    cap = run_config(store, run).diagnosis.max_failures_per_question
    kept: Counter[str] = Counter()
    failures: list[Failure] = []
    for step, path in steps:
        seen: Counter[str] = Counter()
        for n, _obj, line in read_lines(file_lines(path), RolloutLine, str(path)):
            where = f"{path} line {n}"
            tie.check_tag(line, where)
            q = questions[_question_of(line, finder, questions, where)]
            [scored] = solver_scores([line.output], q.pseudo_label)
            if (scored.score > 0) != (line.score > 0):
                raise BadInput(
                    f"{where}: score {line.score:g}, but the solver's reward against the pseudo-label is "
                    f"{scored.score:g}: a dump scored by another reward function than diagevo.verl.compute_score"
                )
            if scored.score > 0 or not scored.checked or not line.output.strip():  # unchecked: no failure known
                continue
            k = seen[q.question_id]
            seen[q.question_id] += 1
            if not allow_repeats:
                tie.check_copy(line, q, f"s{step}-{k}", where)
            if cap is not None and kept[q.question_id] >= cap:
                continue
            kept[q.question_id] += 1
            failures.append(
                Failure(
                    failure_id=failure_id(q.question_id, f"s{step}", k),
                    question_id=q.question_id,
                    response=line.output,
                    reference=q.votes.reference,
                    question=q.text,
                    pseudo_label=q.pseudo_label,
                    known_causes=q.known_causes,
                )
            )
    return failures


@dataclass(frozen=True, slots=True)
class DumpTie:
    """What ties a dump's lines to this round's export, where the lines' own fields cannot name
    the round: the export's tag of ``solver.parquet`` (a line of the legacy trainer carries the
    tag :func:`~diagevo.verl.compute_score` returned), and the failures earlier rounds recorded
    (a line of the v1 trainer carries no reward extra, only ``uid``: a line whose question text
    and response are those of a failure another round recorded is that round's line, copied)."""

    round: int
    tag: str
    earlier: dict[tuple[str, str, str], int]
    """(question text, place, response) -> the round that recorded that failure (words normalised)."""

    @classmethod
    def of(cls, store: Recorder, run: str, t: int, path: Path, manifest: Mapping[str, Any]) -> DumpTie:
        return cls(t, manifest_tag(manifest, path, "solver.parquet"), earlier_failures(store, run, t))

    def check_tag(self, line: RolloutLine, where: str) -> None:
        """Refuse, in one line naming the round it belongs to, a line that carries the tag of
        another export, or carries reward extras and no tag (the legacy trainer's line of an
        export by an older diagevo)."""
        tag = (line.model_extra or {}).get("export")
        if isinstance(tag, str) and tag:
            if tag != self.tag:
                raise BadInput(
                    f"{where} belongs to round {tag_round(tag)}'s export (tag {quoted(tag, 40)}), not round "
                    f"{self.round}'s ({self.tag}): a dump of another export's training, copied here?"
                )
            return
        if tag is not None or line.question_id is not None:  # the legacy trainer's, of an export with no tag
            raise BadInput(
                f"{where} carries no export tag: trained on an export by an older diagevo; export the round again "
                "and train on that export"
            )

    def check_copy(self, line: RolloutLine, q: LoggedQuestion, place: str, where: str) -> None:
        """Refuse, in one line naming the round, a line that carries no tag (the v1 trainer's)
        and is a failure another round recorded from its dump: the same question text, the same
        place (step, and place among the question's failures in the step) and the same response.
        A policy trained since answers otherwise; only a copy repeats all three."""
        tag = (line.model_extra or {}).get("export")
        if isinstance(tag, str) and tag:
            return  # tied by its tag
        other = self.earlier.get((_words(q.text), place, _words(line.output)))
        if other is not None:
            raise BadInput(
                f"{where} belongs to round {other}: its question and response are a failure round {other} "
                f"recorded, not a response of round {self.round}'s training (a dump copied from round {other}?); "
                f"round {self.round}'s own dump whose short answers repeat round {other}'s is read with",
                Argument("allow_repeats", True),
            )


def earlier_failures(store: Recorder, run: str, t: int) -> dict[tuple[str, str, str], int]:
    """(question text, place, response) of each failure recorded in another round of ``run``
    than ``t`` (its place: what its id says after the question's, ``s3-0`` for one read from a
    dump), words normalised, and the round (the first that recorded it)."""
    asked = ((e.round, e.event) for e in admitted_rows(store, run, types=(QuestionGenerated,), texts=True))
    texts = {q.question_id: q.text for r, q in asked if r != t and isinstance(q, QuestionGenerated)}
    out: dict[tuple[str, str, str], int] = {}
    for e in admitted_rows(store, run, types=(FailureRecorded,), texts=True):  # a withdrawn one: never recorded
        f = e.event
        if e.round != t and isinstance(f, FailureRecorded) and f.question_id in texts:
            place = f.failure_id.removeprefix(f"{f.question_id}-")
            out.setdefault((_words(texts[f.question_id]), place, _words(f.response)), e.round)
    return out


def _question_of(line: RolloutLine, finder: QuestionFinder, questions: Mapping[str, LoggedQuestion], where: str) -> str:
    """The id of the retained question a dumped line answers, checked against its ground truth."""

    if line.question_id:
        if line.question_id not in questions:
            raise BadInput(f"{where}: question {quoted(line.question_id)} is not a retained question of the round")
        ids = [line.question_id]
    else:
        ids = finder.find(line.input)
        if not ids:
            raise BadInput(
                f"{where}: its prompt asks none of the round's retained questions (a dump of another round?)"
            )
    labelled = [qid for qid in ids if line.gts is None or questions[qid].pseudo_label == line.gts]
    if not labelled:
        raise BadInput(
            f"{where}: ground truth {quoted(line.gts or '')} is not the pseudo-label of question {quoted(ids[0])}"
        )
    return labelled[0]
