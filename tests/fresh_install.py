"""A plain ``pip install`` of this checkout's wheel into a fresh virtual environment, with no extra,
and what it weighs: ``python -m tests.fresh_install [--constraints]``.

Prints the install's wall time, the distributions it added and the megabytes it added to
site-packages (pip and setuptools, which the venv starts with, left out of both), then runs the
jobs the core promises there, away from the checkout: ``diagevo train --rounds 1`` (the embedded
default), ``examples/external_trainer.py --rounds 2`` (the copy the wheel ships, found by
``diagevo docs --path``) and ``diagevo memory verify``. Without
``--constraints`` pip takes the newest releases, as a user's would; with it, the tested versions
of requirements/constraints.txt (the slow test, tests/test_fresh_install.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.wheels import ROOT, build_wheel

CONSTRAINTS = ROOT / "requirements" / "constraints.txt"
HEAVY = ("torch", "transformers", "sentence-transformers", "vllm", "trl", "accelerate", "deepspeed")


@dataclass(frozen=True)
class Installed:
    """A fresh venv after ``pip install diagevo``: where it is and what the install added."""

    env: Path
    seconds: float
    distributions: list[str]
    megabytes: float

    def run(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """A command of the venv's bin/ (or its python), with none of the checkout's environment."""
        return subprocess.run(
            [str(self.env / "bin" / args[0]), *args[1:]], cwd=cwd, env=_away(self.env), capture_output=True, text=True
        )


def _away(env: Path) -> dict[str, str]:
    """This process's environment without what points into the checkout or its venv."""
    keep = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DIAGEVO_DB", "VIRTUAL_ENV")}
    keep["PATH"] = f"{env / 'bin'}:/usr/bin:/bin"
    return keep


def _site(env: Path) -> tuple[dict[str, str], int]:
    """The venv's distributions (name to version) and the bytes of its site-packages, read away
    from the checkout (whose diagevo.egg-info a python started there would count)."""
    code = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.name.lower(): d.version for d in m.distributions()}))"
    )
    names = json.loads(
        subprocess.run(
            [str(env / "bin" / "python"), "-c", code],
            cwd=env,
            check=True,
            capture_output=True,
            text=True,
            env=_away(env),
        ).stdout
    )
    (site,) = (env / "lib").glob("python3*/site-packages")
    size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file() and not f.is_symlink())
    return names, size


def install(wheel: Path, env: Path, *, constraints: bool) -> Installed:
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    before, size_before = _site(env)
    pip = [str(env / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(wheel)]
    started = time.perf_counter()
    constrained = ["-c", str(CONSTRAINTS)] if constraints else []
    subprocess.run(pip + constrained, check=True, capture_output=True, env=_away(env))
    seconds = time.perf_counter() - started
    after, size_after = _site(env)
    added = sorted(f"{n} {v}" for n, v in after.items() if n not in before)
    return Installed(env, seconds, added, (size_after - size_before) / 1e6)


def the_core_runs(installed: Installed, work: Path) -> list[str]:
    """The jobs a plain install promises, each a failure message when it fails."""
    example = installed.run("diagevo", "docs", "--path", "examples/external_trainer.py", cwd=work)
    if example.returncode != 0:
        return [f"docs --path examples/external_trainer.py: exit {example.returncode}: {example.stderr.strip()}"]
    jobs = [
        ("diagevo", "train", "--rounds", "1", "--run", "plain", "--db", "sqlite:///fresh.db"),
        (
            "python",
            example.stdout.strip(),
            "--db",
            "sqlite:///fresh.db",
            "--run",
            "ext",
            "--rounds",
            "2",
        ),
        ("diagevo", "memory", "verify", "--db", "sqlite:///fresh.db"),
    ]
    failures = []
    for job in jobs:
        done = installed.run(*job, cwd=work)
        if done.returncode != 0:
            failures.append(f"{' '.join(job[:3])}: exit {done.returncode}: {done.stderr.strip()[-600:]}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--constraints", action="store_true", help="the tested versions (requirements/constraints.txt)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="diagevo-fresh-") as tmp:
        wheel = build_wheel(Path(tmp))
        installed = install(wheel, Path(tmp) / "env", constraints=args.constraints)
        heavy = [d for d in installed.distributions if d.split()[0] in HEAVY or d.startswith("nvidia-")]
        print(
            f"install: {installed.seconds:.0f} s, {len(installed.distributions)} distributions, "
            f"{installed.megabytes:.0f} MB in site-packages"
        )
        print("heavy packages: " + (", ".join(heavy) or "none"))
        work = Path(tmp) / "work"
        work.mkdir()
        failures = the_core_runs(installed, work)
        print("train --rounds 1, external_trainer.py --rounds 2, memory verify: " + ("; ".join(failures) or "ok"))
    return 1 if failures or heavy else 0


if __name__ == "__main__":
    sys.exit(main())
