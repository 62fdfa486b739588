"""The tables of the event log, in SQLAlchemy Core.

The schema is created only through Alembic (``migrations/``); these declarations are the
target metadata for autogenerate and the column reference for the store's Core statements.
The store writes through SQLAlchemy Core / the DBAPI (executemany), never an ORM per row.

JSON columns are TEXT holding compact JSON: the hash chain covers ``events.data`` byte for byte,
so the database must store exactly the text the store hashed (PostgreSQL's JSONB would not).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, MetaData, String, Table, Text, text

from diagevo.catalog import KEY_FIELDS, MILESTONES, type_names

# the same rows in each dialect's cheapest form: SQLite fills an ephemeral b-tree with an IN list
# for every inserted row (0012), PostgreSQL compares against an array
MILESTONES_SQLITE = " OR ".join(f"type = '{t}'" for t in sorted(type_names(MILESTONES)))
MILESTONES_POSTGRES = "type IN (" + ", ".join(f"'{t}'" for t in sorted(type_names(MILESTONES))) + ")"

# On SQLite ``INTEGER PRIMARY KEY`` aliases the rowid (fast, 64-bit); BIGINT would not.
SeqType = BigInteger().with_variant(Integer(), "sqlite")

metadata = MetaData()

# One appended event. Rows are never updated or deleted (database triggers refuse it).
events = Table(
    "events",
    metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=False),
    Column("event_id", String, nullable=False),
    Column("run_id", String, nullable=False),
    Column("round", Integer, nullable=False),
    Column("type", String, nullable=False),
    Column("schema_version", Integer, nullable=False),
    Column("data", Text, nullable=False),
    Column("recorded_at", String(40), nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
    # {field: text} of the texts ``data`` names as {"$artifact": sha256} (0008; 0011 moved older ones here)
    Column("texts", Text, nullable=True),
    # ids the data names, copied out of it at append time (diagevo.log.recorder.key_values), for indexed reads
    *(Column(f, String, nullable=True) for f in KEY_FIELDS),
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

# A view's saved state for a run (a memory snapshot at a committed round, the stats read model,
# the vector index's checkpoint): a cache, always rebuildable from the log, read only when the
# event at ``seq`` still has ``hash`` (0010). ``writer`` is the role that saved it (PostgreSQL
# sets it; '' on SQLite): a reader trusts its own states and the owner's.
views = Table(
    "views",
    metadata,
    Column("name", String, primary_key=True),
    Column("run_id", String, primary_key=True),
    Column("part", Integer, primary_key=True, autoincrement=False),
    Column("writer", String, primary_key=True, server_default=""),
    Column("seq", BigInteger, nullable=False),
    Column("hash", String(64), nullable=False),
    Column("state", Text, nullable=False),
)
