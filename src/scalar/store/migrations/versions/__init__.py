"""Alembic revisions, one module per schema change, applied in order by ``migrate``."""
