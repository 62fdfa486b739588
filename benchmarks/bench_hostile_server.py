"""What a hostile (or broken) model server costs ``diagevo diagnose``: storage and time.

1. A 60 MB reply to Prompt 1 of one failure (beside one answered at once: a round whose every
   failure fails is refused): the growth of the SQLite log in bytes, with the
   default ``[limits]`` (the client stops reading past ``reply_factor x text_bytes`` = 1 MiB and
   counts the call as failed) and with ``reply_factor = 1024`` (the reply is read whole and
   stored cut at ``text_bytes``, marked with its length and SHA-256); then ``memory verify``.
2. A server that drips its reply one byte a second: the seconds ``diagnose`` takes for one such
   failure (beside one answered at once), and for a round of 20 failures of which one drips and
   19 are answered at once, against the baseline of 20 answered at once (the same run).

Each ``diagnose`` is the real CLI in its own process against a real loopback HTTP server (in
this process, :mod:`tests.llm_server`), at the diagnosis config's defaults
(``request_timeout_s`` and ``failure_timeout_s``: 60 s) unless ``--timeout`` says otherwise.
``--code DIR`` measures the diagevo checkout in DIR instead of this one (e.g. an earlier
version, for a before/after).

Run: ``.venv/bin/python benchmarks/bench_hostile_server.py`` (``--skip-drip``: the storage part only).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.llm_server import Drip, LLMServer  # noqa: E402

RUN = "hostile"
CAUSE = "fails to check candidate solutions against the original domain after a transformation"
LABEL = "verify candidate solutions against the domain and constraints of the original equation"
GOOD = json.dumps({"matched_cause_id": "C1", "error_cause": None})
BIG = "big reply: "  # a failure whose Prompt 1 the server answers with --reply-mb of text

# round 1 through the protocol, in its order: a free question recorded and retained, the
# promotions decided, a failure of it recorded, diagnosed as cause C1 of node N1 (a cause is
# created from the failure that revealed it), committed
SEED = """
import json, sys
from diagevo import rounds
from diagevo.catalog import CauseCreated, FailureDiagnosed, NodeCreated
from diagevo.catalog.failure import Failure
from diagevo.log import open_log
config = json.loads(sys.argv[2])
with open_log(sys.argv[1], create=True) as s:
    rounds.start_run(s, "hostile", config, seed=0)
    rnd = rounds.Round.open(s, "hostile")
    (req,) = rnd.requests(1)
    answers = ("6",) * 6 + tuple(str(i) for i in range(6))  # p1 = 1/2: retained
    q = rnd.record([rounds.Candidate(req.question_id, req.mode, "Solve sqrt(x+3) = x - 3.", answers=answers)])
    rnd.promote()
    rnd.record_failures([Failure(failure_id="f0", question_id=q.retained[0].question_id, response="x = 1",
                                 reference="x = 6")])
    rnd.append_diagnosis([
        rnd.event("n1", NodeCreated(node_id="N1", label=sys.argv[3])),
        rnd.event("dx/f0", FailureDiagnosed(failure_id="f0", error_cause=sys.argv[4])),
        rnd.event("c1", CauseCreated(cause_id="C1", node_id="N1", description=sys.argv[4], failure_id="f0")),
    ])
    rnd.commit()
"""

CALLS = """
import json, sys
from diagevo.catalog import DiagnosisFailed, FailureDiagnosed, LLMCalled
from diagevo.log import open_log
try:
    from diagevo.log import payload
except ImportError:  # a diagevo before payload: its stored events carry their data
    payload = lambda e: e.data
with open_log(sys.argv[1]) as s:
    out = []
    for e in s.read("hostile", types=(LLMCalled, DiagnosisFailed, FailureDiagnosed), texts=True):
        d = payload(e)
        out.append({"type": e.type, "raw_bytes": len(d.get("raw", "").encode()), "cut": d.get("cut"),
                    "error": d.get("error") or d.get("reason")})
print(json.dumps(out))
"""

CLI = "import sys; from diagevo.cli.app import main; sys.argv = ['diagevo', *sys.argv[1:]]; main()"


def python(code: Path, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(code), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, *args], cwd=code, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def log_bytes(path: Path) -> int:
    """The database file's size, its write-ahead log included."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def stored_bytes(path: Path) -> int:
    """What the run's events hold: their data and texts columns."""
    import sqlite3

    with sqlite3.connect(path) as con:
        row = con.execute(
            "SELECT COALESCE(SUM(LENGTH(CAST(data AS BLOB)) + COALESCE(LENGTH(CAST(texts AS BLOB)), 0)), 0) "
            "FROM events WHERE run_id = ?",
            (RUN,),
        ).fetchone()
    return int(row[0])


def failures_file(tmp: Path, n: int, marked: int, mark: str = "drip drip: ") -> Path:
    """``n`` failures, the first ``marked`` of them with questions that start with ``mark`` (the
    server's cue for its hostile reply)."""
    f = tmp / f"failures-{n}-{marked}-{mark.split()[0]}.jsonl"
    lines = []
    for i in range(n):
        question = mark if i < marked else ""
        lines.append(
            json.dumps(
                {
                    "failure_id": f"f{i + 1}",
                    "question_id": f"q{i + 1}",
                    "question": question + f"Find all real x with sqrt(x+{i}) = x - 3.",
                    "pseudo_label": "6",
                    "response": "x = 1 or x = 6 ... so 1",
                    "reference": "x = 6 after checking",
                    "known_causes": ["C1"],
                }
            )
        )
    f.write_text("\n".join(lines) + "\n")
    return f


def diagnose(
    code: Path, tmp: Path, srv: LLMServer, name: str, failures: Path, config: dict[str, Any], timeout: float | None
) -> dict[str, Any]:
    db_path = tmp / f"{name}.db"
    db = f"sqlite:///{db_path}"
    seeded = python(code, "-c", SEED, db, json.dumps(config), LABEL, CAUSE)
    if seeded.returncode != 0:
        raise SystemExit(f"seeding failed: {seeded.stderr.strip()[-500:]}")
    args = ["diagnose", str(failures), "--run", RUN, "--round", "2", "--llm-url", srv.url, "--model", "test-model"]
    args += ["--embedder", srv.url, "--embed-model", "test-embed", "--db", db, "--json"]  # the models it serves
    if timeout is not None:
        cfg = tmp / f"{name}.toml"
        cfg.write_text(f"[diagnosis]\nrequest_timeout_s = {timeout}\nfailure_timeout_s = {timeout}\n")
        args += ["--config", str(cfg)]
    before, held = log_bytes(db_path), stored_bytes(db_path)
    t0 = time.perf_counter()
    done = python(code, "-c", CLI, *args)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"diagnose failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    summary = json.loads(done.stdout)
    after = log_bytes(db_path)
    verify = python(code, "-c", CLI, "memory", "verify", "--run", RUN, "--db", db)
    calls = json.loads(python(code, "-c", CALLS, db).stdout)
    return {
        "seconds": seconds,
        "growth": after - before,
        "stored": stored_bytes(db_path) - held,
        "failed": summary.get("failed"),
        "recurrences": summary.get("recurrences"),
        "verify": (verify.stdout + verify.stderr).strip().splitlines()[-1:] or [""],
        "verify_rc": verify.returncode,
        "calls": calls,
    }


def show(title: str, r: dict[str, Any]) -> None:
    print(f"\n{title}")
    print(f"  diagnose: {r['seconds']:.1f} s, failed {r['failed']}, recurrences {r['recurrences']}")
    print(f"  log growth: {r['growth']:,} bytes of the database file; events' data and texts: {r['stored']:,} bytes")
    seen: dict[str, int] = {}
    for c in r["calls"]:  # identical rows once, with their count
        cut = f", cut {json.dumps(c['cut'])}" if c.get("cut") else ""
        err = f", error: {c['error'][:110]}" if c.get("error") else ""
        line = f"{c['type']}: raw {c['raw_bytes']:,} bytes{cut}{err}"
        seen[line] = seen.get(line, 0) + 1
    for line, n in seen.items():
        print(f"    {n} x {line}")
    print(f"  memory verify: exit {r['verify_rc']}: {r['verify'][0][:120]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code", type=Path, default=ROOT, help="the diagevo checkout to measure")
    ap.add_argument("--reply-mb", type=float, default=60.0)
    ap.add_argument("--timeout", type=float, default=None, help="request_timeout_s and failure_timeout_s")
    ap.add_argument("--skip-drip", action="store_true")
    ap.add_argument("--skip-storage", action="store_true")
    ap.add_argument("--old", action="store_true", help="the code has no [limits] section (an earlier version)")
    args = ap.parse_args()
    # the hostile reply fails its failure: the round goes on and names it (the run's share of 1
    # allows it), since what it costs is the measure here, not the round's verdict on it
    base_config = {"k": 0.5, "diagnosis": {"max_failed_share": 1.0}}
    code = args.code.resolve()
    print(f"code: {code} ({python(code, '-c', 'import diagevo; print(diagevo.__version__)').stdout.strip()})")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as d, LLMServer() as srv:
        tmp = Path(d)
        # one hostile failure beside one answered at once: a round whose every failure fails is refused
        one = failures_file(tmp, 2, 1, BIG)
        if not args.skip_storage:
            size = int(args.reply_mb * 2**20)
            srv.default("extract", lambda body: "x" * size if BIG in body["messages"][1]["content"] else GOOD)
            print(f"\n1. a reply of {size:,} bytes to Prompt 1 of one failure (of two)")
            show("default [limits]", diagnose(code, tmp, srv, "big", one, base_config, args.timeout))
            if not args.old:
                config = {**base_config, "limits": {"reply_factor": 1024}}
                read = diagnose(code, tmp, srv, "big-read", one, config, args.timeout)
                show("[limits] reply_factor = 1024: read whole", read)
        if not args.skip_drip:

            def reply(body: dict[str, Any]) -> Any:
                return Drip(GOOD, interval_s=1.0) if "drip drip" in body["messages"][1]["content"] else GOOD

            srv.default("extract", reply)
            print(f"\n2. a reply dripped at 1 byte/s ({len(GOOD) + 250} bytes or so)")
            base = diagnose(code, tmp, srv, "base", failures_file(tmp, 20, 0), base_config, args.timeout)
            show("baseline: 20 failures answered at once", base)
            alone = diagnose(code, tmp, srv, "drip1", failures_file(tmp, 2, 1), base_config, args.timeout)
            show("one dripping failure (beside one answered at once)", alone)
            mixed = diagnose(code, tmp, srv, "drip20", failures_file(tmp, 20, 1), base_config, args.timeout)
            show("20 failures: 1 dripping, 19 answered at once", mixed)
            print(
                f"\n  round with a dripping reply / baseline: {mixed['seconds']:.1f} s / {base['seconds']:.1f} s = "
                f"{mixed['seconds'] / base['seconds']:.1f}x; one dripping failure alone: {alone['seconds']:.1f} s"
            )


if __name__ == "__main__":
    main()
