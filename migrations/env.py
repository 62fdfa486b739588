"""Alembic environment for diagevo.

The store runs migrations programmatically and hands over its own connection, already inside
a locked transaction (``config.attributes["connection"]``); the ``alembic`` command line builds
an engine from env ``DIAGEVO_DB`` or ``sqlalchemy.url`` in ``alembic.ini``.
"""

from __future__ import annotations

import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy import create_engine, pool
from sqlalchemy.engine import Connection

from diagevo.log.registry import has_table, register_types
from diagevo.log.tables import metadata

config = context.config
if config.config_file_name is not None:  # the `alembic` command line; the store logs nothing
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite cannot ALTER most things
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
        _register_event_types(connection)


def _register_event_types(connection: Connection) -> None:
    """PostgreSQL: the event types of this diagevo, as the database checks inserts against them
    (:mod:`diagevo.log.registry`), written after every upgrade, one with nothing to migrate too."""
    if connection.dialect.name != "postgresql":
        return
    if has_table(connection):
        register_types(connection)


def run_migrations_offline() -> None:
    context.configure(
        url=os.environ.get("DIAGEVO_DB") or config.get_main_option("sqlalchemy.url"),
        target_metadata=metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    given = config.attributes.get("connection")
    if given is not None:
        _run(given)
        return
    url = os.environ.get("DIAGEVO_DB") or config.get_main_option("sqlalchemy.url") or "sqlite:///diagevo.db"
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            _run(connection)
            connection.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
