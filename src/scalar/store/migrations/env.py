"""Alembic environment: runs the revisions on the connection ``scalar.store.migrate`` hands over.

Run programmatically only (``migrate(url)``), so there is no alembic.ini; a URL given as the main option
``sqlalchemy.url`` also works, e.g. for ``alembic -x``-free tooling built on ``migrate.alembic_config``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from scalar.store.db import make_engine
from scalar.store.schema import metadata

config = context.config


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        compare_type=True,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no connection and no sqlalchemy.url given to the Scalar migrations")
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            _run(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("Scalar migrations run online only: use scalar.store.migrate.migrate(url)")
run_migrations_online()
