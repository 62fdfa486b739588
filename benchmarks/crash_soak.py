"""Crash soak: producers SIGKILLed every few seconds, on SQLite and PostgreSQL; nothing lost,
duplicated, partial or decided twice.

Per backend, for ``--seconds`` seconds, four producer processes write into one database:

- two *batch* producers append batches of 8 events (4 questions, each generated, then scored)
  with ids derived from (producer, batch) and write each batch number to an ack file (fsync'ed)
  once ``append`` returned; restarted, a producer re-sends its last unacknowledged batch (the
  resume a real trainer does);
- two *round* producers race each other driving the same run through the round protocol
  (open, requests, record, promote, commit), each resuming from the log after a kill.

Every 1-4 s (uniformly) one producer, picked at random, is SIGKILLed and started again. At the
end every producer is killed and the log is checked from outside:

- lost: acknowledged batches not (fully) in the log;
- duplicated: (run, event id) stored more than once, or a batch's events stored twice;
- partial: batches of which only some events are stored;
- decided twice: rounds with more than one ``promotions.decided`` (or ``round.committed``);
- and ``verify`` (hash chains, invariants, snapshots, cut-off tails) of both runs.

All must be 0. Run: ``python benchmarks/crash_soak.py --seconds 60 [--backends sqlite,postgres] [--batch 8]``
(PostgreSQL on 127.0.0.1:5432, database ``test``, trust auth; a scratch schema is dropped after).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from diagevo.catalog import PromotionsDecided, QuestionGenerated, QuestionScored, RoundCommitted
from diagevo.log import open_log

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BATCH = 8  # events per batch (--batch): a few, as a trainer's flushes; thousands keep a COPY streaming when killed
BATCH_RUN = "soak-batches"
ROUND_RUN = "soak-rounds"
PG_ADMIN = os.environ.get("DIAGEVO_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


# --- producers (run as ``crash_soak.py --producer KIND ...``) ----------------------------------


def _batch_events(name: str, n: int, size: int) -> list[Any]:
    """Batch ``n`` of producer ``name``: ``size // 2`` questions, each generated, then scored (the
    order the rules hold a run's questions to)."""
    from bench_store import unvalidated  # beside this script: as many as the producer can append

    def event(i: int, type_: str, data: dict[str, object]) -> Any:
        return unvalidated(type_, BATCH_RUN, 1, f"{name}-b{n:06d}-e{i}", data)

    events = []
    for q in range(size // 2):
        question = f"{name}-q{n}-{q}"
        events.append(event(2 * q, "question.generated", {"question_id": question, "mode": "free", "text": "1+1="}))
        scored = {"question_id": question, "n": 8, "p1": 0.5, "p2": 0.5, "pseudo_label": "1", "retained": True}
        events.append(event(2 * q + 1, "question.scored", {**scored, "reference": ""}))
    return events


def _batch_producer(url: str, name: str, acks: Path, size: int) -> None:
    done = [int(x) for x in acks.read_text().split()] if acks.exists() else []
    n = (done[-1] + 1) if done else 0
    with open_log(url) as store, acks.open("a") as ack:
        while True:
            events = _batch_events(name, n, size)
            store.append(events)
            ack.write(f"{n}\n")
            ack.flush()
            os.fsync(ack.fileno())
            n += 1


def _round_producer(url: str, name: str) -> None:
    from diagevo import rounds

    def cand(req: rounds.Request) -> rounds.Candidate:
        agree = 6 + (hash(req.question_id) % 6)
        answers = ["7"] * agree + [str(100 + i) for i in range(12 - agree)]
        return rounds.Candidate(
            req.question_id,
            req.mode,
            f"question {req.question_id}?",
            req.active_cause,
            req.mastered_cause,
            req.node,
            answers=tuple(answers),
        )

    with open_log(url) as store:
        rounds.start_run(store, ROUND_RUN, {"k": 1.0, "memory": {"theta_up": 0.5}}, seed=3)
        while True:
            try:
                st = rounds.round_state(store, ROUND_RUN)
                t = st.open_round or rounds.open_round(store, ROUND_RUN)
                reqs = rounds.Round(store, ROUND_RUN, t).requests(6)
                rounds.Round(store, ROUND_RUN, t).record([cand(r) for r in reqs])
                if t not in rounds.round_state(store, ROUND_RUN).promoted:
                    rounds.Round(store, ROUND_RUN, t).promote()
                rounds.Round(store, ROUND_RUN, t).commit({"heldout_acc": 0.5})
            except rounds.ProtocolError:
                continue  # the other producer moved the round on: read the state again


# --- the soak ----------------------------------------------------------------------------------


def _fresh_url(backend: str, tmp: Path) -> tuple[str, str | None]:
    if backend == "sqlite":
        return f"sqlite:///{tmp / 'soak.db'}", None
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    schema = f"soak_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    admin.dispose()
    url = make_url(PG_ADMIN).update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False), schema


def _drop_schema(schema: str) -> None:
    from sqlalchemy import create_engine, text

    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


def soak(backend: str, seconds: float, seed: int, batch: int = BATCH) -> dict[str, object]:
    from diagevo.views.verify import verify_run

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp_:
        tmp = Path(tmp_)
        url, schema = _fresh_url(backend, tmp)
        with open_log(url) as store:  # migrated once, before the producers race
            from diagevo import rounds

            rounds.start_run(store, BATCH_RUN, {"k": 1.0})
        specs = {f"batch{k}": ["batch", f"p{k}", str(tmp / f"acks-{k}.txt")] for k in range(2)}
        specs |= {f"round{k}": ["round", f"r{k}", ""] for k in range(2)}
        env = {**os.environ, "PYTHONPATH": str(ROOT)}

        def start(key: str) -> subprocess.Popen[bytes]:
            kind, name, acks = specs[key]
            return subprocess.Popen(
                [sys.executable, __file__, "--producer", kind, "--url", url, "--name", name, "--acks", acks]
                + ["--batch", str(batch)],
                env=env,
                stderr=subprocess.PIPE,
            )

        procs = {key: start(key) for key in specs}
        kills = crashed = 0
        errors: list[str] = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(rng.uniform(1.0, 4.0))
            for key, p in procs.items():  # a producer that died on its own is a finding
                if p.poll() is not None:
                    crashed += 1
                    errors.append(f"{key}: {(p.stderr.read() if p.stderr else b'').decode().strip()[-300:]}")
                    procs[key] = start(key)
            key = rng.choice(sorted(procs))
            procs[key].send_signal(signal.SIGKILL)
            procs[key].wait()
            kills += 1
            procs[key] = start(key)
        for p in procs.values():
            p.send_signal(signal.SIGKILL)
            p.wait()

        with open_log(url, create=False) as store:
            events = list(store.read(BATCH_RUN, types=(QuestionGenerated, QuestionScored)))
            ids = Counter(e.event_id for e in events)
            per_batch = Counter(e.event_id.rsplit("-e", 1)[0] for e in events)
            acked = (
                {f"p{k}-b{int(n):06d}" for k in range(2) for n in (tmp / f"acks-{k}.txt").read_text().split()}
                if events
                else set()
            )
            lost = sum(1 for b in acked if per_batch.get(b, 0) != batch)
            partial = sum(1 for c in per_batch.values() if c != batch)
            duplicated = sum(c - 1 for c in ids.values() if c > 1)
            decided = Counter(e.round for e in store.read(ROUND_RUN, types=(PromotionsDecided,)))
            committed = Counter(e.round for e in store.read(ROUND_RUN, types=(RoundCommitted,)))
            twice = sum(1 for c in decided.values() if c > 1) + sum(1 for c in committed.values() if c > 1)
            problems = verify_run(store, BATCH_RUN) + verify_run(store, ROUND_RUN)
        if schema is not None:
            _drop_schema(schema)
    return {
        "backend": backend,
        "seconds": seconds,
        "batch": batch,
        "kills": kills,
        "crashed_on_their_own": crashed,
        "batches_stored": len(per_batch),
        "batches_acked": len(acked),
        "events_stored": len(events),
        "rounds_committed": len(committed),
        "lost": lost,
        "duplicated": duplicated,
        "partial": partial,
        "decided_twice": twice,
        "verify_problems": problems,
        "errors": errors[:3],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=BATCH, help="events per batch (even)")
    ap.add_argument("--producer", choices=["batch", "round"])
    ap.add_argument("--url")
    ap.add_argument("--name")
    ap.add_argument("--acks")
    args = ap.parse_args()
    if args.producer == "batch":
        _batch_producer(args.url, args.name, Path(args.acks), args.batch)
        return
    if args.producer == "round":
        _round_producer(args.url, args.name)
        return
    failed = False
    for backend in args.backends.split(","):
        result = soak(backend, args.seconds, args.seed, args.batch)
        print(json.dumps(result), flush=True)
        failed |= any(
            result[k]
            for k in ("lost", "duplicated", "partial", "decided_twice", "verify_problems", "crashed_on_their_own")
        )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
