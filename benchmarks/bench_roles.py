"""PostgreSQL appends as the schema's owner and as the least-privilege trainer role (a script, not a test).

The database checks every row a role other than the owner inserts (the baseline revision: the
event's type and version, the shape of its data, its key columns, the run's opening), besides the
chain every inserter's rows get checked for; the owner's rows, which diagevo checks before it writes them and
whose triggers the owner could lift anyway, get the chain check alone. Here: the store's append of
the same realistic events (``bench_store.realistic_events``, batches of 1000) into a fresh schema,
as the owner and as a trainer with the documented grants (``docs/how-to/postgresql.md``), best of
``--runs``; with ``--baseline DIR`` (a checkout of an earlier diagevo) the same, timed in processes
of that checkout's own, interleaved with ours.

    python benchmarks/bench_roles.py [--events 20000] [--runs 3] [--baseline DIR]
        [--pg postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

ONE = r"""
import json, sys, time, uuid
import psycopg
sys.path.insert(0, sys.argv[1] + "/benchmarks")
from bench_store import realistic_events
from diagevo.log import open_log
from diagevo.log.schema import upgrade

n, admin, as_role = int(sys.argv[2]), sys.argv[3], sys.argv[4]
host = admin.split("@", 1)[1]
tag = uuid.uuid4().hex[:8]
schema, owner, trainer = f"bench_{tag}", f"bench_owner_{tag}", f"bench_trainer_{tag}"
with psycopg.connect(admin, autocommit=True) as c:
    c.execute(f"CREATE ROLE {owner} LOGIN")
    c.execute(f"CREATE ROLE {trainer} LOGIN")
    c.execute(f"CREATE SCHEMA {schema} AUTHORIZATION {owner}")


def url(role):
    return f"postgresql+psycopg://{role}@{host}?options=-csearch_path%3D{schema}"


try:
    upgrade(url(owner))
    with psycopg.connect(f"postgresql://{owner}@{host}", autocommit=True) as c:
        c.execute(f"SET search_path = {schema}")
        c.execute(f"GRANT USAGE ON SCHEMA {schema} TO {trainer}")
        c.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {trainer}")
        c.execute(f"GRANT INSERT ON events TO {trainer}")
        c.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {trainer}")
    events = list(realistic_events("mixed", n, seed=1))
    batches = [events[i : i + 1000] for i in range(0, len(events), 1000)]
    with open_log(url(owner if as_role == "owner" else trainer), create=False) as store:
        t0 = time.perf_counter()
        for b in batches:
            store.append(b)
        seconds = time.perf_counter() - t0
    print(json.dumps({"events": len(events), "eps": len(events) / seconds}))
finally:
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        for role in (trainer, owner):
            c.execute(f"DROP OWNED BY {role} CASCADE")
            c.execute(f"DROP ROLE {role}")
"""


def once(tree: Path, events: int, admin: str, role: str) -> float:
    """Events per second of one append of ``events`` as ``role``, by the diagevo of ``tree``."""
    done = subprocess.run(
        [sys.executable, "-c", ONE, str(tree), str(events), admin, role],
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        cwd=tree,
        check=False,
    )
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return float(json.loads(done.stdout.strip().splitlines()[-1])["eps"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline", type=Path, help="a checkout of an earlier diagevo to time beside this one")
    ap.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test", help="a superuser's URL (trust)")
    args = ap.parse_args(argv)
    trees = {"this diagevo": HERE.parent}
    if args.baseline is not None:
        trees = {"baseline": args.baseline.resolve(), **trees}
    best: dict[tuple[str, str], float] = {}
    for _ in range(args.runs):
        for role in ("owner", "trainer"):
            for name, tree in trees.items():
                eps = once(tree, args.events, args.pg, role)
                best[name, role] = max(best.get((name, role), 0.0), eps)
    print(f"appends of {args.events:,} realistic events in batches of 1000, best of {args.runs}, events/s")
    for role in ("owner", "trainer"):
        cells = "  ".join(f"{name} {best[name, role]:>9,.0f}" for name in trees)
        ratio = (
            f"  ({best['this diagevo', role] / best['baseline', role]:.2f}x the baseline)"
            if "baseline" in trees
            else ""
        )
        print(f"  as the {role:<8} {cells}{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
