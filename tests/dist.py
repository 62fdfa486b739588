"""The release's files, built and tried as a user gets them: ``make dist`` (``python -m tests.dist``).

``python -m build`` writes the sdist and then the wheel built from that sdist into ``dist/`` (so a
file the sdist lacks fails the wheel's build or shows in the comparison below); ``twine check
--strict`` reads both as the package index would. The wheel built from the sdist must hold what a
wheel built from the checkout holds (``pip install .``, tests/wheels.py), file for file. Then
each of the two is installed into a fresh venv of its own with the tested versions
(requirements/constraints.txt, as ``make install`` and tests/fresh_install.py install; pip's own
configuration finds the wheels the machine keeps on disk, torch among them, should anything ask
for it: the core asks for none, and a heavy package there fails this), where ``diagevo
--version`` names this version and schema, and the core's jobs run in a temporary folder:
``diagevo train --rounds 1`` on the embedded default, the shipped external trainer, ``memory
verify`` (:func:`tests.fresh_install.the_core_runs`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from diagevo.log.schema import head_revision
from tests.fresh_install import HEAVY, install, the_core_runs
from tests.wheels import REQUIRED, ROOT, build_wheel, source_copy


def build(out: Path) -> tuple[Path, Path]:
    """The sdist, and the wheel ``python -m build`` builds from it, into ``out`` (their older
    versions there removed first)."""
    out.mkdir(parents=True, exist_ok=True)
    for old in (*out.glob("diagevo-*.tar.gz"), *out.glob("diagevo-*.whl")):
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="diagevo-dist-") as tmp:
        source = source_copy(Path(tmp))
        subprocess.run([sys.executable, "-m", "build", "-q", "--outdir", str(out), str(source)], check=True)
    (sdist,) = out.glob("diagevo-*.tar.gz")
    (wheel,) = out.glob("diagevo-*.whl")
    return sdist, wheel


def wheel_problems(wheel: Path, reference: Path) -> list[str]:
    """What the wheel built from the sdist lacks or adds beside the one built from the checkout."""
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = set(zipfile.ZipFile(reference).namelist())
    problems = [f"{wheel.name} lacks {n}" for n in REQUIRED if n not in names]
    problems += [f"{wheel.name} lacks {n} (in the checkout's wheel)" for n in sorted(expected - names)]
    problems += [f"{wheel.name} adds {n} (not in the checkout's wheel)" for n in sorted(names - expected)]
    return problems


def tried(artifact: Path, tmp: Path, version: str) -> list[str]:
    """``artifact`` installed into a fresh venv and run there: each failure a line."""
    installed = install(artifact, tmp / "env", constraints=True)
    print(f"{artifact.name}: installed in {installed.seconds:.0f} s, {len(installed.distributions)} distributions")
    heavy = [d for d in installed.distributions if d.split()[0] in HEAVY or d.startswith("nvidia-")]
    failures = [f"{artifact.name}: a heavy package came: {', '.join(heavy)}"] if heavy else []
    work = tmp / "work"
    work.mkdir()
    said = installed.run("diagevo", "--version", cwd=work)
    expected = f"diagevo {version} (schema {head_revision()})"
    if said.returncode != 0 or said.stdout.strip() != expected:
        failures.append(
            f"{artifact.name}: --version said {said.stdout.strip()!r} {said.stderr.strip()!r}, not {expected!r}"
        )
    failures += [f"{artifact.name}: {f}" for f in the_core_runs(installed, work)]
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="where the sdist and the wheel go")
    args = parser.parse_args()
    started = time.perf_counter()
    sdist, wheel = build(args.out.resolve())
    subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)], check=True)
    version = importlib.metadata.version("diagevo")
    failures = [] if wheel.name.startswith(f"diagevo-{version}-") else [f"{wheel.name} is not version {version}"]
    with tempfile.TemporaryDirectory(prefix="diagevo-dist-") as tmp, ThreadPoolExecutor(3) as pool:
        # at once: pip waits on the index and on its downloads as much as on the CPU
        for artifact in (sdist, wheel):
            (Path(tmp) / artifact.name).mkdir()
        runs = [pool.submit(tried, a, Path(tmp) / a.name, version) for a in (sdist, wheel)]
        reference = pool.submit(build_wheel, Path(tmp) / "checkout")
        failures += wheel_problems(wheel, reference.result())
        failures += [f for run in runs for f in run.result()]
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    said = "ok" if not failures else "FAILED"
    print(f"dist: {sdist.name}, {wheel.name}: {said} in {time.perf_counter() - started:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
