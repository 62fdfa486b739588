"""Work that must not grow with the stored log (a script, not a test).

(a) ``memory ingest`` of a 50,000-event part (validation against the stored memory, the append,
    the snapshots) into a log of ~50k events and into a log of ~1M events of the same run: the
    ratio should be about 1;
(b) one training round's own log work (the reads ``Trainer`` does, through the entry points it
    calls: committed rounds, the round's rebuild from its progress, the run's config and M_{t-1},
    the diagnosis pipeline's prior outcomes, the report's row of the run's statistics, the
    commit's snapshot refresh) at ~50k and at ~1M stored events: for a fresh round (what every
    round pays), for a round resumed after its solver phase (its events all stored), and the extra
    read of a round resumed before its solver (its questions with their texts); against the
    baseline measured in the same run: the answers of a resumed round from full scans of the run
    (how they were read before the indexes of migration 0003).

The 1M log is ``bench_store.build_log``'s (``--db``; built once if missing, then reused; the
benchmark works on a copy of it).

    python benchmarks/bench_growth.py [--db sqlite:////tmp/diagevo-bench-1m.db] [--part 50000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import build_log, realistic_events  # noqa: E402

from diagevo.catalog import FailureAttributed, FailureDiagnosed, QuestionGenerated, QuestionScored, RoundCommitted  # noqa: E402
from diagevo.diagnosis.stages import prior_outcomes  # noqa: E402
from diagevo.interchange import ingest  # noqa: E402
from diagevo.log import Recorder, open_log, payload, sqlite_path  # noqa: E402
from diagevo.rounds import Round  # noqa: E402
from diagevo.views.caches import refresh as refresh_snapshots  # noqa: E402
from diagevo.views.memory import committed_rounds, load_memory  # noqa: E402
from diagevo.views.stats import round_stats  # noqa: E402

# what a round resumed before its solver reads back (the training loop's solver input)
SOLVER_INPUT_TYPES = (QuestionGenerated, QuestionScored)


def _line(e) -> str:  # noqa: ANN001
    return json.dumps({"type": e.type, "run": e.run, "round": e.round, "event_id": e.event_id, "data": e.data})


def part_after(run: str, start: int, size: int) -> list[str]:
    """Events ``start+1 .. start+size`` of the generator's run, as JSONL lines."""
    events = realistic_events(run, start + size + 20_000)
    return [_line(e) for e in itertools.islice(events, start, start + size)]


def round_work(store: Recorder, run: str, t: int) -> None:
    """The log reads of round t, through the entry points the training loop calls. The round is
    not opened (opening a fresh round appends ``round.started``; the milestones that decision
    reads are read again by the round's progress)."""
    committed_rounds(store, run)  # where a resumed run goes on
    rnd = Round(store, run, t)
    rnd.progress()  # the rebuild: the phases done, with their figures, and the checkpoint
    _ = rnd.base  # the run's config and M_{t-1}, read once for the round's schedule and decisions
    prior_outcomes(store, run, t)  # what the round's diagnosis already decided
    round_stats(store, run)  # the report: the round's row of the run's statistics
    refresh_snapshots(store, run)  # what the commit refreshes


def solver_input(store: Recorder, run: str, t: int) -> None:
    """What a round resumed before its solver reads on top: its questions, texts inline."""
    for _ in store.read(run, in_round=t, types=SOLVER_INPUT_TYPES, texts=True):
        pass


def round_work_scans(store: Recorder, run: str, t: int) -> None:
    """The answers of a resumed round from full scans of the run (the baseline)."""
    [r.round for r in store.rows(run) if r.type == RoundCommitted.name]
    questions: dict[str, object] = {}
    for e in store.rows(run, texts=True):
        if e.round == t and e.type == QuestionGenerated.name:
            questions[payload(e)["question_id"]] = payload(e)
    load_memory(store, run, t - 1)
    [payload(r) for r in store.rows(run, types=(FailureDiagnosed, FailureAttributed)) if r.round == t]
    Counter(r.type for r in store.rows(run) if r.round == t)
    load_memory(store, run)


def best(fn, n: int = 3) -> float:  # noqa: ANN001
    out = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t0)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="sqlite:////tmp/diagevo-bench-1m.db")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--part", type=int, default=50_000)
    args = ap.parse_args(argv)
    src = sqlite_path(args.db)
    if src is None:
        raise SystemExit("--db must be a SQLite file (the benchmark copies it)")
    if not src.exists():
        build_log(args.db, args.events)
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        big = f"sqlite:///{Path(tmp) / 'big.db'}"
        shutil.copy(src, sqlite_path(big))
        with open_log(big) as store:
            run = store.runs()[0]
            n_big = store.last_seq(run)
            refresh_snapshots(store, run)  # as the training run left it
        small = f"sqlite:///{Path(tmp) / 'small.db'}"
        with open_log(small) as store:
            first = list(realistic_events(run, args.part))
            store.append(first)
            refresh_snapshots(store, run)
            n_small = store.last_seq(run)
        rows = []
        for name, url, start in (("small", small, n_small), ("big", big, n_big)):
            lines = part_after(run, start, args.part)
            with open_log(url) as store:
                t0 = time.perf_counter()
                res = ingest(store, lines)
                ingest_s = time.perf_counter() - t0
                t = max(committed_rounds(store, run))
                fresh = best(lambda s=store, t=t: round_work(s, run, t + 1))
                resumed = best(lambda s=store, t=t: round_work(s, run, t))
                extra = best(lambda s=store, t=t: solver_input(s, run, t))
                scans = best(lambda s=store, t=t: round_work_scans(s, run, t), n=1)
            rows.append((name, start, res.appended, ingest_s, fresh, resumed, extra, scans))
    print(" " * 35 + "a round's own log work".rjust(36))
    print(
        f"{'stored log':<12}{'events':>10}{'ingest part':>13}{'fresh':>10}{'resumed':>10}{'+ solver input':>16}"
        f"{'full scans':>12}{'speed-up':>10}"
    )
    for name, start, _appended, ingest_s, fresh, resumed, extra, scans in rows:
        print(
            f"{name:<12}{start:>10,}{ingest_s:>12.2f}s{fresh * 1000:>8.0f}ms{resumed * 1000:>8.0f}ms"
            f"{extra * 1000:>14.0f}ms{scans:>11.2f}s{scans / resumed:>9.0f}x"
        )
    print(f"parts of {args.part:,} events; speed-up: full scans / resumed round")
    (_, _, _, i_small, f_small, r_small, _, _), (_, _, _, i_big, f_big, r_big, _, _) = rows
    print(
        f"growth from the small to the big log: ingest {i_big / i_small:.2f}x, "
        f"fresh round {f_big / f_small:.2f}x, resumed round {r_big / r_small:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
