"""A reader cannot hold ``db upgrade`` for ever (issue 52, item 2): the migration waits a bounded
time for a lock another session holds, then fails in one line naming that session, and succeeds
once the session lets go.

The migrators' lock is an advisory lock, which any role may take: a read-only role's session
holding it (the reader fixture's grants: read everything, write nothing) stands for any session
that holds what a migration needs."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.engine import make_url

from diagevo.log.errors import LockTimeout
from diagevo.log.recorder import LOCK_WAIT_S
from diagevo.log.revision import HEAD_REVISION
from diagevo.log.schema import MIGRATE_LOCK_KEY, upgrade
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_log_shapes_pg import reader  # noqa: F401 - the fixture
from tests.test_log_trainer_role import Roles, roles  # noqa: F401 - the fixture

pytestmark = pytest.mark.postgres


def _hold(reader: Any) -> tuple[Any, int]:  # noqa: F811 - the fixture's value
    """A reader's session (application ``long-reader``) holding the migrators' lock, in an open
    transaction: (its raw connection, its pid)."""
    raw = reader.raw_connection()
    cur = raw.cursor()
    cur.execute("SET application_name = 'long-reader'")
    cur.execute(f"SELECT pg_advisory_lock({MIGRATE_LOCK_KEY}), pg_backend_pid()")
    pid = cur.fetchone()[1]
    cur.execute("SELECT count(*) FROM events")  # a long read, its transaction left open
    return raw, pid


def test_a_reader_holding_the_migration_lock_makes_the_upgrade_fail_naming_it(roles: Roles, reader: Any) -> None:  # noqa: F811
    raw, pid = _hold(reader)
    try:
        with pytest.raises(LockTimeout) as caught:
            upgrade(roles.owner_url, lock_wait_s=0.2)
        message = str(caught.value)
        role = make_url(reader.url).username
        assert "waited 0.2 s for a lock and gave up" in message and "\n" not in message
        assert f"pid {pid}" in message and "application 'long-reader'" in message and f"role {role}" in message
    finally:
        raw.invalidate()  # the session ends: its lock goes
    assert upgrade(roles.owner_url, lock_wait_s=0.2) == (HEAD_REVISION, HEAD_REVISION)


def test_db_upgrade_says_who_holds_the_lock_in_one_line(
    roles: Roles,  # noqa: F811
    reader: Any,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    raw, pid = _hold(reader)
    try:
        code, _, err = run_cli(capsys, "db", "upgrade", "--db", roles.owner_url, "--lock-wait", "0.2")
        assert code == 1
        assert_one_line_error(code, err, "gave up: held by", f"pid {pid}", "'long-reader'")
    finally:
        raw.invalidate()
    code, out, _ = run_cli(capsys, "db", "upgrade", "--db", roles.owner_url, "--lock-wait", "0.2")
    assert code == 0 and f"already at revision {HEAD_REVISION}" in out


def test_the_cli_waits_as_long_as_an_append_by_default() -> None:
    """One default for every wait on a lock of the log (``limits.lock_wait_s``)."""
    import inspect

    from diagevo.cli.db import upgrade_cmd

    assert inspect.signature(upgrade_cmd).parameters["lock_wait"].default == LOCK_WAIT_S
