"""Database schema, migrations and repositories: SQLite by default, PostgreSQL by URL."""
