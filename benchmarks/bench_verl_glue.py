"""The verl glue on hostile answers, as a user runs it (issue 74): ``diagevo round record
--from-verl`` on a construction generation of 5 questions x 4 responses, every response a
distinct hostile answer of the forms in ``bench_answercheck.py`` (20 in all; was 277 s), and
``diagevo diagnose --from-verl`` on a rollout dump of 6 hostile lines (was 71 s). Each command is
timed whole, in its own process (start-up, the export's checks, the votes or the dump's reward
check, the append). Targets: under 30 s and under 10 s. The files and the log are written under
a temporary folder.

Run: ``.venv/bin/python benchmarks/bench_verl_glue.py``
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

import diagevo
from diagevo.curriculum.prompts import solver_messages
from diagevo.verl import compute_score, export_round

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_answercheck import hostile  # noqa: E402  (the benchmark's own hostile forms)

RUN = "hostile"
SIZES = ["train.curriculum_questions=5", "train.challenger_questions=5", "grpo.construction_responses=4"]


def generated(source: Path, out: Path, answer: list[list[str]]) -> Path:
    """verl's generation output of ``source``: its rows and ``responses`` (``answer[i]`` for row i)."""
    frame = pd.read_parquet(source)
    frame["responses"] = answer[: len(frame)]
    frame.to_parquet(out)
    return out


def cli(*args: str) -> tuple[float, str]:
    """Seconds one ``diagevo`` command took, in its own process, and its output (it must succeed)."""
    t0 = time.perf_counter()
    done = subprocess.run([str(Path(sys.executable).parent / "diagevo"), *args], capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"diagevo {' '.join(args[:3])} failed: {done.stderr.strip()}")
    return seconds, done.stdout


def record_case(work: Path) -> float:
    """``round record --from-verl`` on 5 questions x 4 distinct hostile responses."""
    db = f"sqlite:///{work / 'record.db'}"
    with diagevo.open_store(db) as store:
        diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES))
        diagevo.Round.open(store, RUN)
        export_round(store, RUN, work / "r1")
        asked = generated(
            work / "r1" / "curriculum.parquet",
            work / "r1" / "questions.parquet",
            [[f"<question>What is {i} + {i}?</question>"] for i in range(5)],
        )
        export_round(store, RUN, work / "r1", questions=asked)
    answers = [[f"So \\boxed{{{hostile(4 * i + k)}}}" for k in range(4)] for i in range(5)]
    made = generated(work / "r1" / "construct.parquet", work / "r1" / "constructed.parquet", answers)
    seconds, out = cli("round", "record", "--from-verl", str(made), "--run", RUN, "--db", db, "--json")
    assert json.loads(out)["recorded"] == 5
    return seconds


def diagnose_case(work: Path) -> float:
    """``diagnose --from-verl`` on a dump of 6 hostile lines (the v1 trainer's: no reward extras)."""
    db = f"sqlite:///{work / 'diagnose.db'}"
    with diagevo.open_store(db) as store:
        diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES))
        rnd = diagevo.Round.open(store, RUN)
        texts = [f"What is {i} + {i}?" for i in range(3)]
        rnd.record(
            [
                diagevo.Candidate(q.question_id, q.mode, text, responses=(f"\\boxed{{{2 * i}}}",) * 3 + ("\\boxed{1}",))
                for i, (q, text) in enumerate(zip(rnd.requests(3), texts, strict=True))
            ]
        )
        rnd.promote()
        export_round(store, RUN, work / "d1")
    lines = []
    for j in range(6):
        i, response = j % 3, f"So \\boxed{{{hostile(100 + j)}}}"
        messages = solver_messages(texts[i])
        prompt = "".join(f"{m['role']}\n{m['content']}\n" for m in messages) + "assistant\n"
        score = compute_score("diagevo/solver", response, str(2 * i))["score"]
        lines.append(
            {"input": prompt, "output": response, "gts": str(2 * i), "score": score, "step": 1, "uid": f"u{j}"}
        )
    dump = work / "d1" / "rollouts"
    dump.mkdir()
    (dump / "1.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    print(f"  dump: 6 lines, {(dump / '1.jsonl').stat().st_size:,} bytes")
    args = ("diagnose", "--from-verl", str(dump), "--run", RUN, "--db", db, "--diagnostician", "heuristic", "--json")
    seconds, out = cli(*args)
    assert json.loads(out)["recorded"] == 6
    return seconds


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        record_s = record_case(work)
        print(f"round record --from-verl, 5 questions x 4 distinct hostile answers: {record_s:.1f} s (target < 30 s)")
        diagnose_s = diagnose_case(work)
        print(f"diagnose --from-verl, 6 hostile dump lines: {diagnose_s:.1f} s (target < 10 s)")


if __name__ == "__main__":
    main()
