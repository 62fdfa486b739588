"""Writes the old-chain fixtures: logs written by diagevo of the migration chain that came before
the baseline (``0001_event_log`` ... ``0019_evidence_rules``, removed in 209e07d), and what that
diagevo exported of each. ``tests/test_old_chain_upgrade.py`` upgrades a copy of each with this
diagevo (``db upgrade``) and compares its export with the old one byte for byte.

    chain-0007.db, chain-0007.jsonl  diagevo at de21703 (the last commit whose chain head was 0007:
                                     texts in ``artifacts``, no ``texts`` column, no ``views``)
    chain-0012.db, chain-0012.jsonl  diagevo at ea238af (the last commit whose chain head was 0012)
    chain-0019.db, chain-0019.jsonl  diagevo at eac6d33 (the last commit of the old chain: head 0019)
    chain-0001.db                    the old chain's own 0001 (the id the baseline reuses), created by
                                     de21703's ``upgrade(url, "0001")``, holding chain-0007.db's rows
    chain-0019.pg.sql, .pg.jsonl     PostgreSQL: a schema eac6d33 wrote (its ``memory ingest`` of
                                     chain-0019.jsonl), as ``pg_dump --inserts`` printed it, and
                                     eac6d33's export of it

Each SQLite log is a 2-round simulator run ``fx`` (8 challenger and 24 curriculum questions a round,
the static embedder), written by the old code's own ``diagevo train``, then its ``memory export``:

    git worktree add --detach ../old-0007 de21703c05b1f660a170c9cf5e4cf2f2654b18fd
    git worktree add --detach ../old-0012 ea238af99aeb94dbb60679b951c9365c6aded48b
    git worktree add --detach ../old-0019 eac6d33bd35f4c960319ffb2b4ceda50f2e246bd
    pip install --no-deps --target /tmp/oc/site 'sqlmodel>=0.0.22'   # the old code's log tables need it
    python tests/data/old_chain/make_old_chain.py 0007=../old-0007 0012=../old-0012 \
        0019=../old-0019 --at-0001 ../old-0007 --pg ../old-0019 --site /tmp/oc/site
    git worktree remove ../old-0007; git worktree remove ../old-0012; git worktree remove ../old-0019

(the old code runs from ``PYTHONPATH`` with this checkout's ``.venv`` Python, its ``cli/`` and
``migrations/`` loaded as its pyproject installs them; ``--pg`` needs PostgreSQL on 127.0.0.1,
database ``test``, and ``psql``/``pg_dump``). Written once; never rewritten (the point is the bytes
an older diagevo wrote).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRAIN = [
    "train", "--rounds", "2", "--run", "fx",
    "--set", "train.challenger_questions=8", "--set", "train.curriculum_questions=24",
    "--set", 'diagnosis.embedder="static"',
]  # fmt: skip
# the old checkout's cli/ and migrations/ as diagevo.cli and diagevo.migrations (its pyproject's
# package-dir), ahead of this checkout's editable install, which maps those names here
MAIN = """
import importlib, importlib.util, os, sys, tomllib
root = sys.argv.pop(1)
for sub in ("cli", "migrations"):
    if not os.path.exists(f"{root}/{sub}/__init__.py"):
        continue  # a namespace folder: found on the path as it is
    spec = importlib.util.spec_from_file_location(
        f"diagevo.{sub}", f"{root}/{sub}/__init__.py", submodule_search_locations=[f"{root}/{sub}"]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
import diagevo
assert diagevo.__file__.startswith(root), diagevo.__file__
with open(f"{root}/pyproject.toml", "rb") as f:
    entry = tomllib.load(f)["project"]["scripts"]["diagevo"]  # its own entry point: cli.app or diagevo.cli.app
where, name = entry.split(":")
sys.argv[0] = "diagevo"
getattr(importlib.import_module(where), name)()
"""


def old_diagevo(checkout: str, site: str, cwd: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (checkout, site) if p)}
    env.pop("DIAGEVO_DB", None)
    done = subprocess.run(
        [sys.executable, "-c", MAIN, checkout, *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"the old diagevo at {checkout} failed: {' '.join(args)}\n{done.stderr}")
    return done.stdout


def write(revision: str, checkout: str, site: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        url = "sqlite:///old.db"
        old_diagevo(checkout, site, work, *TRAIN, "--db", url)
        out = HERE / f"chain-{revision}.jsonl"
        old_diagevo(checkout, site, work, "memory", "export", "--db", url, "--run", "fx", "--out", str(out))
        wal = work / "old.db-wal"  # a WAL left behind would be a second half of the file
        if wal.exists() and wal.stat().st_size:
            raise SystemExit(f"{wal} left beside the database")
        shutil.copyfile(work / "old.db", HERE / f"chain-{revision}.db")


# the old chain's first revision, as its own migration 0001 created it, holding chain-0007.db's rows
AT_0001 = """
import sys
from diagevo.events.ownership import upgrade
assert upgrade(sys.argv[1], "0001") == (None, "0001")
"""
COLUMNS_0001 = "seq, event_id, run_id, round, type, schema_version, data, recorded_at, prev_hash, hash"


def write_0001(checkout: str, site: str) -> None:
    """chain-0001.db: no diagevo ever stopped there (0001 and 0002 came in one commit), but a
    database at it shares the baseline's id; its schema by the old 0001 itself (``upgrade(url,
    "0001")`` of the checkout at de21703), its events and artifacts chain-0007.db's rows (so its
    export is chain-0007.jsonl)."""
    out = HERE / "chain-0001.db"
    out.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (checkout, site) if p)}
    subprocess.run([sys.executable, "-c", AT_0001, f"sqlite:///{out}"], env=env, check=True, cwd=checkout)
    with sqlite3.connect(out) as db:
        db.execute("ATTACH DATABASE ? AS old", (str(HERE / "chain-0007.db"),))
        db.execute(f"INSERT INTO events ({COLUMNS_0001}) SELECT {COLUMNS_0001} FROM old.events ORDER BY seq")
        db.execute("INSERT INTO artifacts (sha256, text) SELECT sha256, text FROM old.artifacts")
    sqlite3.connect(out).close()


PG_SCHEMA = "old_chain_0019"  # the dump's schema name, which a test replaces by its own


def write_pg(checkout: str, site: str, admin_url: str) -> None:
    """chain-0019.pg.sql: a PostgreSQL schema of the old chain at 0019, written by the checkout at
    eac6d33 (its ``memory ingest`` of chain-0019.jsonl: the same events, new ``recorded_at``),
    dumped by ``pg_dump --inserts`` (the rows go in before the triggers); chain-0019.pg.jsonl: that
    diagevo's export of it."""
    env = {**os.environ, "PGHOST": "127.0.0.1", "PGUSER": "postgres"}
    psql = ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", "test", "-c"]
    subprocess.run(
        [*psql, f"DROP SCHEMA IF EXISTS {PG_SCHEMA} CASCADE; CREATE SCHEMA {PG_SCHEMA}"], env=env, check=True
    )
    url = f"{admin_url}?options=-csearch_path%3D{PG_SCHEMA}"
    old_diagevo(checkout, site, HERE, "memory", "ingest", str(HERE / "chain-0019.jsonl"), "--db", url)
    out = HERE / "chain-0019.pg.jsonl"
    old_diagevo(checkout, site, HERE, "memory", "export", "--db", url, "--run", "fx", "--out", str(out))
    dump = subprocess.run(
        ["pg_dump", "-d", "test", f"--schema={PG_SCHEMA}", "--no-owner", "--no-privileges", "--inserts"],
        env=env, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    kept = [line for line in dump.splitlines() if not line.startswith(("\\", "CREATE SCHEMA "))]  # psql's own lines
    (HERE / "chain-0019.pg.sql").write_text("\n".join(kept) + "\n", encoding="utf-8")
    subprocess.run([*psql, f"DROP SCHEMA {PG_SCHEMA} CASCADE"], env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkouts", nargs="*", metavar="REVISION=CHECKOUT")
    parser.add_argument("--site", default="", help="a folder of the old code's extra packages (sqlmodel)")
    parser.add_argument("--at-0001", metavar="CHECKOUT", help="write chain-0001.db with this checkout (de21703)")
    parser.add_argument("--pg", metavar="CHECKOUT", help="write chain-0019.pg.sql with this checkout (eac6d33)")
    args = parser.parse_args()
    for item in args.checkouts:
        revision, checkout = item.split("=", 1)
        write(revision, checkout, args.site)
    if args.at_0001:
        write_0001(args.at_0001, args.site)
    if args.pg:
        write_pg(args.pg, args.site, "postgresql+psycopg://postgres@127.0.0.1:5432/test")


if __name__ == "__main__":
    main()
