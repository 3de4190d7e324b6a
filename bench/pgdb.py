"""A fresh PostgreSQL database per benchmark run, on the server of a given URL (loopback in this project)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable


def fresh_database(server_url: str, prefix: str = "scalar_bench") -> tuple[str, Callable[[], None]]:
    """Create an empty database on the server ``server_url`` names; return its SQLAlchemy URL and the
    function that drops it (forcing out any connection left open)."""
    import psycopg
    from psycopg import sql
    from sqlalchemy import make_url

    admin = make_url(server_url)
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
    conninfo = admin.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    def drop() -> None:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    url = admin.set(drivername="postgresql+psycopg", database=name).render_as_string(hide_password=False)
    return url, drop
