"""Alembic migrations of the store. Run them with ``scalar.store.migrate.migrate(url)``."""
