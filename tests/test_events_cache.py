"""The views' saved states are caches: once a command's events committed it exits 0, whatever
happens to the cache write after (no privilege, a dropped connection, a full disk), and readers
fold the log instead. On PostgreSQL: ``diagevo train`` under a trainer role that may only SELECT
and INSERT into the log (the documented grants, :data:`tests.test_log_trainer_role.TRAINER_GRANTS`)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from diagevo.catalog import RoundCommitted
from diagevo.log import open_log
from diagevo.views.memory import load_memory
from diagevo.views.verify import verify_run
from tests.conftest import Backend, PostgresBackend
from tests.test_cli_memory import run_cli
from tests.test_log_trainer_role import TRAINER_GRANTS
from tests.test_rounds import promote_on_a_question

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--set", "train.challenger_questions=16", "--set", "train.curriculum_questions=48"]


def _refuse_cache_writes(backend: Backend, url: str) -> None:
    """Make every snapshot/checkpoint write fail as a role without the privilege would see it."""
    engine = backend.engine(url)
    with engine.begin() as conn:
        if backend.name == "sqlite":
            for op in ("INSERT", "UPDATE"):
                conn.execute(
                    text(
                        f"CREATE TRIGGER no_views_{op.lower()} BEFORE {op} ON views "
                        "BEGIN SELECT RAISE(ABORT, 'permission denied (test)'); END"
                    )
                )
        else:
            conn.execute(
                text(
                    "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN RAISE EXCEPTION 'permission denied (test)' USING ERRCODE = 'insufficient_privilege'; "
                    "END $$"
                )
            )
            conn.execute(
                text(
                    "CREATE TRIGGER refuse_views BEFORE INSERT OR UPDATE ON views "
                    "FOR EACH ROW EXECUTE FUNCTION refuse()"
                )
            )
    engine.dispose()


def test_a_failed_snapshot_write_after_the_commit_is_a_warning(
    backend: Backend,
    db_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # a server database's vector index goes to the current directory
    open_log(db_url).close()  # migrated
    _refuse_cache_writes(backend, db_url)
    with caplog.at_level(logging.WARNING, logger="diagevo.cache"):
        code, _out, err = run_cli(
            capsys,
            "train",
            "--db",
            db_url,
            "--run",
            "c",
            "--rounds",
            "2",
            "--quiet",
            "--set",
            f'train.out_dir="{tmp_path / "ckpt"}"',
            *SMALL,
        )
    assert code == 0, err
    assert "permission denied" not in err  # logged, not printed
    assert any("views of run 'c' not saved" in r.getMessage() for r in caplog.records)
    with open_log(db_url, create=False) as store:
        assert store.view_states("memory", "c", anchored=False) == []
        assert load_memory(store, "c", 2).committed == 2  # folded from the log
        assert verify_run(store, "c") == []
    code, out, err = run_cli(capsys, "memory", "verify", "--db", db_url, "--run", "c")
    assert code == 0, out + err


def test_a_dropped_connection_after_the_commit_is_swallowed(backend: Backend, db_url: str, monkeypatch) -> None:
    """The snapshot write raises what a dropped connection or a full disk raises (a StoreError)."""
    from diagevo import rounds
    from diagevo.log import StoreError

    with open_log(db_url) as store:
        rounds.start_run(store, "d", {"k": 0.5})
        rnd = rounds.Round.open(store, "d")
        promote_on_a_question(rnd)

        def broken(*_a, **_k):
            raise StoreError(f"write to {db_url} failed: server closed the connection unexpectedly")

        monkeypatch.setattr(store, "put_view_states", broken)
        rnd.commit({"acc": 0.5})  # does not raise
        assert store.view_states("memory", "d") == []
        assert load_memory(store, "d", 1).committed == 1


# --- the least-privilege trainer role on PostgreSQL ------------------------------------------


def owner_grants(schema: str, role: str) -> list[str]:
    """What the README has an administrator do for the owner role: the schema is the owner's
    (``CREATE SCHEMA ... AUTHORIZATION``; here the test's schema exists already)."""
    return [f"ALTER SCHEMA {schema} OWNER TO {role}"]


@pytest.mark.postgres
@pytest.mark.slow
def test_train_under_an_insert_only_role(postgres_backend: PostgresBackend, tmp_path: Path) -> None:
    """An owner role that owns the schema (and nothing else) migrates it and grants the trainer
    role the README's privileges; the trainer runs two rounds of ``diagevo train``."""
    admin_url = postgres_backend.fresh_url()
    schema = make_url(admin_url).query["options"].split("=", 1)[1]
    tag = uuid.uuid4().hex[:8]
    owner, role = f"owner_{tag}", f"trainer_{tag}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE ROLE {owner} LOGIN"))
        conn.execute(text(f"CREATE ROLE {role} LOGIN"))
        for stmt in owner_grants(schema, owner):
            conn.execute(text(stmt))
    owner_url = make_url(admin_url).set(username=owner, password=None).render_as_string(hide_password=False)
    trainer_url = make_url(admin_url).set(username=role, password=None).render_as_string(hide_password=False)
    as_owner = create_engine(owner_url, isolation_level="AUTOCOMMIT")
    try:
        open_log(owner_url).close()  # the owner migrates: its tables, triggers and functions
        with as_owner.connect() as conn:
            assert (
                conn.execute(
                    text(
                        "SELECT tableowner FROM pg_tables WHERE tablename = 'events' AND schemaname = current_schema()"
                    )
                ).scalar_one()
                == owner
            )
            for stmt in TRAINER_GRANTS:
                conn.execute(text(stmt.format(schema=schema, role=role)))
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        cmd = [
            sys.executable,
            "-m",
            "diagevo.cli.app",
            "train",
            "--db",
            trainer_url,
            "--run",
            "least",
            "--rounds",
            "2",
            "--quiet",
            "--set",
            f'train.out_dir="{tmp_path / "ckpt"}"',
            *SMALL,
        ]
        done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr and "permission denied" not in done.stderr, done.stderr
        # the role really could not write the caches, and could not touch the log either
        with admin.connect() as conn:
            assert conn.execute(text(f"SELECT count(*) FROM {schema}.views")).scalar_one() == 0
        probe = create_engine(trainer_url)
        for sql in ("DELETE FROM views", "UPDATE events SET round = 0", "INSERT INTO views (name) VALUES ('x')"):
            with pytest.raises(Exception, match="permission denied"), probe.begin() as conn:
                conn.execute(text(sql))
        probe.dispose()
        verify = subprocess.run(
            [sys.executable, "-m", "diagevo.cli.app", "memory", "verify", "--db", trainer_url, "--run", "least"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert verify.returncode == 0, verify.stdout + verify.stderr
        with open_log(owner_url, create=False) as store:
            assert [e.round for e in store.read("least", types=(RoundCommitted,))] == [1, 2]
    finally:
        as_owner.dispose()
        with admin.connect() as conn:
            for r in (role, owner):
                conn.execute(text(f"DROP OWNED BY {r} CASCADE"))
                conn.execute(text(f"DROP ROLE {r}"))
        admin.dispose()


def test_the_library_logs_but_never_prints() -> None:
    """A warning on ``diagevo.cache`` with no handler of the application's shows nowhere (not on
    stderr through logging's last resort)."""
    code = "from diagevo.views.caches import log; log.warning('views of run %r not saved', 'c')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr == "" and done.stdout == ""
