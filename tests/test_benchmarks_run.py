"""The scale benchmarks run to their end on a small log: a script that no longer fits the library
(a read shape that changed under it) fails here rather than when someone needs its figures. The
figures themselves are not checked: a benchmark reports, it does not assert."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def bench(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_reads_of_a_small_log(tmp_path: Path) -> None:
    out = bench("bench_reads.py", "--events", "3000", "--hot", "50", "--db", f"sqlite:///{tmp_path / 'log.db'}")
    assert "why" in out and "events --cause" in out


def test_ingest_growth_of_a_small_run() -> None:
    out = bench("bench_ingest_growth.py", "--events", "3000", "--parts", "3")
    assert "part   3:" in out and "growth first -> last part" in out


def test_audits_of_a_small_log(tmp_path: Path) -> None:
    out = bench("bench_audits.py", "--events", "3000", "--hot", "100", "--append", "300", "--work", str(tmp_path))
    assert "targets met:" in out and "why H0" in out
