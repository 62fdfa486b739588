"""Where a database's schema must stand, told without Alembic: the migrations' head revision, and
the one read (:func:`revision_if_plain`) that finds a database already there. A log at its head
opens on this module alone; anything else (empty, older, foreign, an earlier diagevo's chain) is
:mod:`diagevo.log.schema`'s, which loads Alembic to look closer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from diagevo.log.backends import connect, sqlalchemy_errors

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

# The newest migration; a test checks it against Alembic's head. A database already there is
# opened without importing Alembic at all (about a fifth of a second of every command).
HEAD_REVISION = "0001"
BASELINE = "0001"  # the first revision of this chain, where an earlier diagevo's log is carried over


def revision_if_plain(engine: Engine, url: str) -> str | None:
    """The database's single ``alembic_version`` row when it also has diagevo's events table (with
    ``texts``, which the old chain's ``0001`` lacks); None when that is not simply so (then Alembic
    looks closer)."""
    with connect(engine, url) as conn:
        try:
            rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").fetchall()
            conn.exec_driver_sql("SELECT seq, event_id, run_id, data, hash, texts FROM events WHERE 1 = 0").fetchall()
        except sqlalchemy_errors("DBAPIError"):
            return None
    return str(rows[0][0]) if len(rows) == 1 else None


# old_chain: a revision of the migrations before the baseline (diagevo.log.old_chain); unknown:
# one this diagevo does not know over diagevo's log (a newer diagevo wrote it)
State = Literal["up_to_date", "outdated", "old_chain", "empty", "unknown", "foreign"]


@dataclass(frozen=True)
class RevisionStatus:
    url: str  # redacted
    current: str | None
    head: str
    state: State
    objects: tuple[str, ...] = ()  # what a foreign database holds (tables, views, ...)
    passed_over: tuple[str, ...] = ()  # an upgrade's: each old row whose data it could not read, in a line

    @property
    def up_to_date(self) -> bool:
        return self.state == "up_to_date"
