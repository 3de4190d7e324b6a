"""Database schema, migrations and repositories: SQLite by default, PostgreSQL by URL.

The control plane is event-sourced with a transactional outbox: each controller step's input events, the
actions it decided, the projections it changed and the reasons it gave are written in one transaction
(``Store.write``), fenced by the leader lease. See docs/decisions/storage.md.
"""

from scalar.store.db import (
    DATABASE_URL_ENV,
    database_url_from_env,
    default_database_url,
    describe_url,
    make_engine,
    normalize_url,
)
from scalar.store.decisions import Decision, NewDecision
from scalar.store.errors import (
    ActionNotClaimedError,
    DatabaseUnavailableError,
    DuplicateActionError,
    NotLeaderError,
    StaleStepError,
    StoreError,
    UnknownActionError,
    UnknownProjectionError,
    UnsupportedDatabaseError,
)
from scalar.store.eventlog import AppendedEvent, Batch, BatchAppend, NewEvent, StoredEvent
from scalar.store.inbox import CANCEL, SUBMIT, InboxConflictError, InboxItem
from scalar.store.lease import Fence, Lease, LeaseState
from scalar.store.migrate import current_revision, head_revision, migrate, schema_diff
from scalar.store.outbox import DONE, FAILED, IN_FLIGHT, PENDING, Action, NewAction
from scalar.store.projections import Projection
from scalar.store.schema import PROJECTIONS
from scalar.store.store import Store, Tx

__all__ = [
    "CANCEL",
    "DATABASE_URL_ENV",
    "DONE",
    "FAILED",
    "IN_FLIGHT",
    "PENDING",
    "PROJECTIONS",
    "SUBMIT",
    "Action",
    "ActionNotClaimedError",
    "AppendedEvent",
    "Batch",
    "BatchAppend",
    "DatabaseUnavailableError",
    "Decision",
    "DuplicateActionError",
    "Fence",
    "InboxConflictError",
    "InboxItem",
    "Lease",
    "LeaseState",
    "NewAction",
    "NewDecision",
    "NewEvent",
    "NotLeaderError",
    "Projection",
    "StaleStepError",
    "Store",
    "StoreError",
    "StoredEvent",
    "Tx",
    "UnknownActionError",
    "UnknownProjectionError",
    "UnsupportedDatabaseError",
    "current_revision",
    "database_url_from_env",
    "default_database_url",
    "describe_url",
    "head_revision",
    "make_engine",
    "migrate",
    "normalize_url",
    "schema_diff",
]
