"""Benchmark files of Table 1 in their public formats (JSONL, JSON, Parquet, GPQA's CSV), read
into :class:`BenchmarkQuestion` lists: each kind's columns are in ``benchmarks.toml``, and any column can be
remapped (``--field NAME.ROLE=COLUMN``). Grading
follows the kind: ``math`` through the answer checker, ``choice`` by the option letter, ``text``
(BBEH) by normalised exact match.
"""

from __future__ import annotations

import csv
import hashlib
import random
import re
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from diagevo.curriculum.answers import extract_answer
from diagevo.errors import Argument, BadInput, require_use
from diagevo.text.parsing import MAX_CHARS, file_lines, loads, read_text

Grader = Literal["math", "choice", "text"]
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_MATH_DELIMITER = re.compile(r"(?<!\\)\$")


@dataclass(frozen=True, slots=True)
class BenchmarkQuestion:
    """One benchmark question, ready to prompt and grade."""

    index: int  # position in the file: the key of resumable outputs
    source_id: str  # the file's own id, when it has one
    text: str  # the user message: question (and context, options)
    gold: str  # math answer, option letter, or BBEH target
    grader: Grader
    options: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)  # subject, level, task ... for inspection


@dataclass(frozen=True)
class BenchmarkFormat:
    """How one benchmark's public format reads: ``roles`` maps a role to candidate columns, tried
    in order; ``mean_at_k`` marks the benchmarks reported as mean@k (AMC, AIME)."""

    name: str
    title: str
    roles: Mapping[str, tuple[str, ...]]
    read: Callable[[BenchmarkRow], BenchmarkQuestion]
    mean_at_k: bool = False
    extra: tuple[str, ...] = ()


@dataclass(frozen=True)
class Benchmark:
    """A loaded benchmark file."""

    name: str
    kind: BenchmarkFormat
    path: Path
    sha256: str
    questions: tuple[BenchmarkQuestion, ...]


class BenchmarkError(BadInput):
    """A benchmark file or its spec cannot be used (one line, names the file and line)."""


# --- reading a row ----------------------------------------------------------------------------


class _Missing(Exception):
    def __init__(self, role: str, tried: Sequence[str]) -> None:
        super().__init__(role)
        self.role, self.tried = role, tuple(tried)


@dataclass(frozen=True)
class BenchmarkRow:
    """The ``index``-th row of a file of ``kind``, read through the columns the user mapped
    (``fields``: role -> column)."""

    kind: BenchmarkFormat
    values: Mapping[str, Any]
    fields: Mapping[str, str]
    index: int

    def get(self, role: str, required: bool = True) -> Any:
        """The value of ``role``: the column the user mapped, else the first of the kind's
        candidate columns present and non-empty."""
        tried = (self.fields[role],) if role in self.fields else self.kind.roles.get(role, ())
        for col in tried:
            value = self.values.get(col)
            if value is not None and value != "" and value != []:
                return value
        if required:
            raise _Missing(role, tried)
        return None

    def question(self, text: str, gold: str, grader: Grader, options: tuple[str, ...] = ()) -> BenchmarkQuestion:
        """The row's question, with the file's own id and the kind's columns kept for inspection."""
        source_id = self.get("id", required=False)
        extra = {k: self.values[k] for k in self.kind.extra if self.values.get(k) not in (None, "")}
        return BenchmarkQuestion(
            self.index, "" if source_id is None else _text(source_id), text, gold, grader, options, extra
        )


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():  # AMC's answers are floats: 142.0
        return str(int(value))
    return str(value).strip()


def _math(row: BenchmarkRow) -> BenchmarkQuestion:
    text = _text(row.get("question"))
    context = row.get("context", required=False)
    if context:  # OlympiadBench: shared context of a multi-part problem
        text = f"{_text(context)}\n\n{text}"
    answer = row.get("answer", required=False)
    if answer is None:  # Minerva's release: the answer is the last \boxed of the solution
        solution = row.get("solution", required=False)
        answer = extract_answer(str(solution)) if solution else None
        if answer is None:
            raise _Missing("answer", (*row.kind.roles.get("answer", ()), *row.kind.roles.get("solution", ())))
    if isinstance(answer, (list, tuple)):  # OlympiadBench: final_answer is a list
        answer = ", ".join(_text(a) for a in answer)
    gold = _MATH_DELIMITER.sub("", _text(answer)).strip()  # "$-3$, $3$" -> "-3, 3"; "\\$36" stays
    if row.kind.name == "gsm8k":
        gold = gsm8k_answer(gold)
    return row.question(text, gold, "math")


def gsm8k_answer(answer: str) -> str:
    """GSM8K's gold: the number after ``####``, without thousands separators."""
    if "####" in answer:
        answer = answer.rsplit("####", 1)[1]
    return answer.strip().replace(",", "")


def _choice_gold(answer: Any, options: Sequence[str]) -> str | None:
    """A gold option as a letter: a letter, a 0-based index, or the option's text."""
    if isinstance(answer, bool):
        return None
    if isinstance(answer, int) or (isinstance(answer, float) and answer.is_integer()):
        idx = int(answer)
        return LETTERS[idx] if 0 <= idx < len(options) else None
    text = str(answer).strip()
    m = re.fullmatch(r"\(?([A-Za-z])\)?\.?", text)
    if m and LETTERS.index(m.group(1).upper()) < len(options):
        return m.group(1).upper()
    matches = [LETTERS[j] for j, o in enumerate(options) if o.strip() == text]
    return matches[0] if len(matches) == 1 else None


def choice_prompt(question: str, options: Sequence[str]) -> str:
    """The question followed by its options, one ``A. ...`` line each."""
    lines = "\n".join(f"{LETTERS[j]}. {o}" for j, o in enumerate(options))
    return f"{question}\n\n{lines}"


def _choice(row: BenchmarkRow) -> BenchmarkQuestion:
    question = _text(row.get("question"))
    options = row.get("options", required=False)
    if options is None and row.kind.name == "gpqa_diamond":
        return _gpqa(row, question)
    if not isinstance(options, (list, tuple)) or not options:
        raise _Missing("options", row.kind.roles.get("options", ()))
    opts = tuple(_text(o) for o in options)
    if len(opts) > len(LETTERS):
        raise ValueError(f"{len(opts)} options: at most {len(LETTERS)} can be lettered")
    raw = row.get("answer")
    gold = _choice_gold(raw, opts)
    if gold is None:
        raise ValueError(f"answer {raw!r} names none of the {len(opts)} options")
    return row.question(choice_prompt(question, opts), gold, "choice", opts)


def _gpqa(row: BenchmarkRow, question: str) -> BenchmarkQuestion:
    """GPQA's release: a correct answer and three incorrect ones, shuffled with a seed derived
    from the question, so every run sees the same order."""
    correct = _text(row.get("correct"))
    opts = [correct, *(_text(row.get(f"incorrect{j}")) for j in (1, 2, 3))]
    random.Random(hashlib.sha256(question.encode()).hexdigest()).shuffle(opts)
    return row.question(choice_prompt(question, opts), LETTERS[opts.index(correct)], "choice", tuple(opts))


def _mixed(row: BenchmarkRow) -> BenchmarkQuestion:
    """A validation file mixing math questions and multiple-choice ones (MATH + MMLU)."""
    return _choice(row) if row.get("options", required=False) is not None else _math(row)


def _text_answer(row: BenchmarkRow) -> BenchmarkQuestion:
    return row.question(_text(row.get("question")), _text(row.get("answer")), "text")


READERS: dict[str, Callable[[BenchmarkRow], BenchmarkQuestion]] = {
    "math": _math,
    "choice": _choice,
    "text": _text_answer,
    "mixed": _mixed,
}
"""How a row becomes a question, by the name ``benchmarks.toml`` gives it."""


def _kinds(formats: Mapping[str, Any]) -> dict[str, BenchmarkFormat]:
    """Each kind of ``benchmarks.toml``, its columns those of its shared table with its own over them."""
    kinds = {}
    for name, k in formats["kinds"].items():
        roles = {
            role: tuple(columns) for role, columns in {**formats["columns"][k["columns"]], **k.get("roles", {})}.items()
        }
        kinds[name] = BenchmarkFormat(
            name, k["title"], roles, READERS[k["read"]], k.get("mean_at_k", False), tuple(k.get("extra", ()))
        )
    return kinds


_FORMATS = tomllib.loads(Path(__file__).with_name("benchmarks.toml").read_text(encoding="utf-8"))
KINDS = _kinds(_FORMATS)
"""The benchmarks' public formats (``benchmarks.toml``), by name."""
_ALIASES: dict[str, str] = _FORMATS["aliases"]


def kind_of(name: str) -> BenchmarkFormat:
    """The kind a benchmark name refers to: ``KIND``, a name that begins with one (``aime2024``),
    or ``LABEL:KIND``."""
    label, _, explicit = name.partition(":")
    key = (explicit or label).lower().replace("-", "").replace("_", "")
    candidates = {k.replace("_", ""): k for k in KINDS} | _ALIASES
    if explicit:
        match = candidates.get(key)
    else:
        match = next((candidates[c] for c in sorted(candidates, key=len, reverse=True) if key.startswith(c)), None)
    if match is None:
        raise BenchmarkError(
            f"unknown benchmark {name!r}: name one of {', '.join(KINDS)} (a name may begin with one, e.g. aime2024), "
            f"or give LABEL:KIND"
        )
    return KINDS[match]


# --- reading a file ---------------------------------------------------------------------------


def _rows(path: Path) -> Iterator[tuple[int, Any]]:
    """(line or row number, row) of a JSONL, JSON, Parquet or CSV file."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        require_use("eval's Parquet benchmark files", f"reading the Parquet file {path.name}")
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several types for a broken file
            raise BenchmarkError(f"{path}: not a readable Parquet file ({' '.join(str(exc).split())[:200]})") from None
        yield from enumerate(table.to_pylist(), 1)
    elif suffix == ".csv":
        try:
            with path.open(encoding="utf-8", newline="") as fh:
                rows = list(csv.DictReader(fh, strict=True))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise BenchmarkError(f"{path}: not a readable CSV file ({' '.join(str(exc).split())[:200]})") from None
        # every value a text, an empty cell none, as the JSON formats give them
        yield from enumerate(({k: v if v != "" else None for k, v in row.items()} for row in rows), 2)
    elif suffix == ".json":
        try:
            data = loads(read_text(path, max_bytes=4 * MAX_CHARS), str(path), max_chars=4 * MAX_CHARS)
        except BadInput as exc:
            raise BenchmarkError(str(exc)) from None
        if isinstance(data, dict) and isinstance(data.get("examples"), list):  # BBEH's task.json
            data = data["examples"]
        if not isinstance(data, list):
            raise BenchmarkError(f'{path}: a JSON file must hold a list of questions (or {{"examples": [...]}})')
        yield from enumerate(data, 1)
    else:
        try:
            for n, line in enumerate(file_lines(path), 1):  # on "\n" only, as every JSONL diagevo reads
                if line.strip(" \t\r"):
                    yield n, loads(line, f"{path} line {n}")
        except BadInput as exc:
            raise BenchmarkError(str(exc)) from None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_benchmark(
    name: str, path: Path | str, fields: Mapping[str, str] | None = None, limit: int | None = None
) -> Benchmark:
    """Read ``path`` as benchmark ``name`` (see :func:`kind_of`); ``fields`` remaps roles to
    columns; ``limit`` keeps the first questions. :class:`BenchmarkError` names the file and line
    of the first problem."""
    kind = kind_of(name)
    path = Path(path)
    fields = dict(fields or {})
    known = {"question", "answer", "options", "id", "context", "solution", *kind.roles}
    for role in fields:
        if role not in known:
            raise BenchmarkError(
                f"{name}: unknown field role {role!r} (roles: {', '.join(sorted(known))})",
                about=name,
                value=role,
                allowed=tuple(sorted(known)),
            )
    if not path.is_file():
        raise BenchmarkError(f"no such file: {path}" if not path.exists() else f"{path} is not a file")
    label = name.partition(":")[0]
    questions: list[BenchmarkQuestion] = []
    for i, (n, row) in enumerate(_rows(path)):
        if limit is not None and i >= limit:
            break
        where = f"{path} line {n}" if path.suffix.lower() not in (".parquet", ".csv", ".json") else f"{path} row {n}"
        if not isinstance(row, dict):
            raise BenchmarkError(f"{where}: not a JSON object")
        try:
            questions.append(kind.read(BenchmarkRow(kind, row, fields, i)))
        except _Missing as exc:
            raise BenchmarkError(
                f"{where}: no {exc.role} (tried {', '.join(exc.tried) or 'nothing'}); map a column with",
                Argument("fields", {exc.role: "COLUMN"}),
                about=label,
            ) from None
        except ValueError as exc:
            raise BenchmarkError(f"{where}: {exc}") from None
    if not questions:
        raise BenchmarkError(f"{path} has no questions")
    return Benchmark(label, kind, path, _sha256(path), tuple(questions))
