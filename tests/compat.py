"""``make compat``: diagevo installs beside the RL stacks of requirements/compat.toml without
changing their torch, and its core brings none of the heavy packages.

Each stack is resolved twice by uv's resolver from package metadata alone (nothing is downloaded
but metadata, for CPython 3.11 on manylinux x86_64, from the public index): once alone, once with
the wheel of this checkout and the extras the stack names. The torch of the first resolution,
and every package the stack names, must stay the same version in the second. A resolution that
fails is a failure too: the stack cannot have diagevo at all.

Then the reader's fast event constructor, which sets pydantic's own attributes, is tested again
under the newest pydantic 2.x (:func:`newest_pydantic`: its wheels are this check's one download).

Prints one line a stack, and one for pydantic; exit code 1 when any fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from uv import find_uv_bin

from tests.wheels import build_wheel

ROOT = Path(__file__).resolve().parent.parent
STACKS = ROOT / "requirements" / "compat.toml"
TARGET = ["--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28"]


@dataclass(frozen=True)
class Stack:
    """One stack of compat.toml: what a researcher has, and the extras they add diagevo with."""

    name: str
    requires: list[str]
    extras: list[str]
    forbidden: list[str] = field(default_factory=list)
    forbidden_prefixes: list[str] = field(default_factory=list)


def stacks() -> list[Stack]:
    return [Stack(**s) for s in tomllib.loads(STACKS.read_text(encoding="utf-8"))["stack"]]


def name_of(requirement: str) -> str:
    """A requirement's project name, normalized as resolvers compare them."""
    found = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert found, requirement
    return re.sub(r"[-_.]+", "-", found.group(0)).lower()


def resolve(requirements: list[str], work: Path) -> dict[str, str]:
    """Name to version of everything ``requirements`` installs; raises CalledProcessError with
    the resolver's explanation when they cannot be installed together."""
    wanted = work / "wanted.in"
    wanted.write_text("".join(r + "\n" for r in requirements), encoding="utf-8")
    command = [find_uv_bin(), "pip", "compile", "--no-config", "--quiet", "--no-header", *TARGET, str(wanted)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    pins = (re.match(r"([A-Za-z0-9._-]+)(?:\[[^\]]*\])?==([^\s;]+)", line) for line in done.stdout.splitlines())
    return {name_of(p.group(1)): p.group(2) for p in pins if p}


def check(stack: Stack, wheel: Path, work: Path) -> tuple[list[str], str]:
    """What is wrong with installing diagevo into ``stack`` (nothing: an empty list), and a
    summary of the resolution."""
    extras = f"[{','.join(stack.extras)}]" if stack.extras else ""
    try:
        alone = resolve(stack.requires, work) if stack.requires else {}
        both = resolve([*stack.requires, f"diagevo{extras} @ {wheel.as_uri()}"], work)
    except subprocess.CalledProcessError as refused:
        reason = " ".join(refused.stderr.split())[:400]
        return [f"cannot resolve: {reason}"], ""
    held = {name_of(r) for r in stack.requires} | ({"torch"} & alone.keys())
    problems = [f"{n} {alone[n]} becomes {both.get(n, 'absent')}" for n in sorted(held) if both.get(n) != alone[n]]
    brought = sorted(n for n in both if n in stack.forbidden or n.startswith(tuple(stack.forbidden_prefixes)))
    problems += [f"the core brings {n}" for n in brought]
    shown = ", ".join(f"{n} {both[n]}" for n in sorted(held | {"torch"} if stack.requires else held) if n in both)
    return problems, f"{len(both)} packages" + (f"; {shown}" if shown else "")


NEWEST_PYDANTIC_TESTS = ["tests/test_event_classes.py"]
"""The event classes' tests, the reader's fast constructor among them (it sets what
``model_construct`` sets, pydantic's own attributes): run again under the newest pydantic 2.x, so
that a pydantic which keeps another attribute is found here before a user meets it."""


def newest_pydantic(tmp: Path) -> tuple[bool, str]:
    """The fast constructor's tests under the newest pydantic 2.x and its core, installed apart
    (``uv pip install --target``, the one download of this check) and put before the tested
    versions on the path: (passed, what to print)."""
    target = tmp / "newest-pydantic"
    install = [find_uv_bin(), "pip", "install", "--quiet", "--target", str(target), "pydantic>=2,<3"]
    done = subprocess.run(install, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return False, f"the newest pydantic 2.x did not install: {done.stderr.strip()[-300:]}"
    probe = "import pydantic, pydantic_core; print(pydantic.VERSION, pydantic_core.__version__)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT)])}
    version = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=False)
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *NEWEST_PYDANTIC_TESTS]
    run = subprocess.run(pytest, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    last = (run.stdout.strip().splitlines() or ["no output"])[-1]
    return run.returncode == 0, f"pydantic {version.stdout.strip() or '(unknown)'}: {last}"


def main() -> int:
    failed = 0
    with tempfile.TemporaryDirectory(prefix="diagevo-compat-") as tmp:
        wheel = build_wheel(Path(tmp))
        for stack in stacks():
            problems, summary = check(stack, wheel, Path(tmp))
            extras = f"[{','.join(stack.extras)}]" if stack.extras else ""
            if problems:
                failed += 1
                print(f"FAIL {stack.name} + diagevo{extras}: " + "; ".join(problems))
            else:
                print(f"ok   {stack.name} + diagevo{extras}: {summary}")
        passed, said = newest_pydantic(Path(tmp))
        failed += not passed
        print(f"{'ok  ' if passed else 'FAIL'} the reader's fast constructor under the newest {said}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
