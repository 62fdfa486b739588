"""SQLModel tables of the event log.

The schema is created only through Alembic (``migrations/``); these declarations are the
target metadata for autogenerate and the column reference for the store's Core statements.
The store writes through SQLAlchemy Core / the DBAPI (executemany), never the ORM per row.

JSON columns are TEXT holding compact JSON: the hash chain covers ``events.data`` byte for byte,
so the database must store exactly the text the store hashed (PostgreSQL's JSONB would not).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, String, Text, text
from sqlmodel import Field, SQLModel

from diagevo.catalog import KEY_FIELDS, MILESTONES, type_names

# the same rows in each dialect's cheapest form: SQLite fills an ephemeral b-tree with an IN list
# for every inserted row (0012), PostgreSQL compares against an array
MILESTONES_SQLITE = " OR ".join(f"type = '{t}'" for t in sorted(type_names(MILESTONES)))
MILESTONES_POSTGRES = "type IN (" + ", ".join(f"'{t}'" for t in sorted(type_names(MILESTONES))) + ")"

# On SQLite ``INTEGER PRIMARY KEY`` aliases the rowid (fast, 64-bit); BIGINT would not.
SeqType = BigInteger().with_variant(Integer(), "sqlite")


class Event(SQLModel, table=True):
    """One appended event. Rows are never updated or deleted (database triggers refuse it)."""

    __tablename__ = "events"
    __table_args__ = (
        Index("uq_events_run_event_id", "run_id", "event_id", unique=True),  # ids are unique per run (0007)
        Index("ix_events_run_seq", "run_id", "seq"),
        Index("ix_events_run_type_seq", "run_id", "type", "seq"),
        Index("ix_events_run_round_type", "run_id", "round", "type"),
        *(
            Index(
                f"ix_events_{f}",
                "run_id",
                f,
                *(("seq", "type") if f == "cause_id" else ()),  # a cause's events in seq order, with their type (0017)
                sqlite_where=text(f"{f} IS NOT NULL"),
                postgresql_where=text(f"{f} IS NOT NULL"),
            )
            for f in KEY_FIELDS
        ),
        # at most one of each milestone per run and round (0009; SQLite's predicate 0012)
        Index(
            "uq_events_milestones",
            "run_id",
            "type",
            "round",
            unique=True,
            sqlite_where=text(MILESTONES_SQLITE),
            postgresql_where=text(MILESTONES_POSTGRES),
        ),
    )

    seq: int = Field(sa_column=Column("seq", SeqType, primary_key=True, autoincrement=False))
    event_id: str = Field(sa_column=Column("event_id", String, nullable=False))
    run_id: str = Field(sa_column=Column("run_id", String, nullable=False))
    round: int = Field(sa_column=Column("round", Integer, nullable=False))
    type: str = Field(sa_column=Column("type", String, nullable=False))
    schema_version: int = Field(sa_column=Column("schema_version", Integer, nullable=False))
    data: str = Field(sa_column=Column("data", Text, nullable=False))
    recorded_at: str = Field(sa_column=Column("recorded_at", String(40), nullable=False))
    prev_hash: str = Field(sa_column=Column("prev_hash", String(64), nullable=False))
    hash: str = Field(sa_column=Column("hash", String(64), nullable=False))
    # {field: text} of the texts ``data`` names as {"$artifact": sha256} (0008; 0011 moved older ones here)
    texts: str | None = Field(default=None, sa_column=Column("texts", Text, nullable=True))
    # ids the data names, copied out of it at append time (diagevo.log.recorder.key_values), for indexed reads
    cause_id: str | None = Field(default=None, sa_column=Column("cause_id", String, nullable=True))
    active_cause: str | None = Field(default=None, sa_column=Column("active_cause", String, nullable=True))
    mastered_cause: str | None = Field(default=None, sa_column=Column("mastered_cause", String, nullable=True))
    matched_cause: str | None = Field(default=None, sa_column=Column("matched_cause", String, nullable=True))
    failure_id: str | None = Field(default=None, sa_column=Column("failure_id", String, nullable=True))
    question_id: str | None = Field(default=None, sa_column=Column("question_id", String, nullable=True))


class View(SQLModel, table=True):
    """A view's saved state for a run (a memory snapshot at a committed round, the stats read
    model, the vector index's checkpoint): a cache, always rebuildable from the log, read only
    when the event at ``seq`` still has ``hash`` (0010). ``writer`` is the role that saved it
    (PostgreSQL sets it; '' on SQLite): a reader trusts its own states and the owner's."""

    __tablename__ = "views"

    name: str = Field(sa_column=Column("name", String, primary_key=True))
    run_id: str = Field(sa_column=Column("run_id", String, primary_key=True))
    part: int = Field(sa_column=Column("part", Integer, primary_key=True, autoincrement=False))
    writer: str = Field(sa_column=Column("writer", String, primary_key=True, server_default=""))
    seq: int = Field(sa_column=Column("seq", BigInteger, nullable=False))
    hash: str = Field(sa_column=Column("hash", String(64), nullable=False))
    state: str = Field(sa_column=Column("state", Text, nullable=False))


metadata = SQLModel.metadata
