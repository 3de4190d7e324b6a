"""Typed errors of the store. Each says what went wrong and how to fix it."""

from __future__ import annotations

from scalar.domain.errors import DomainError


class StoreError(DomainError):
    """Base of every error the store raises on purpose."""


class UnsupportedDatabaseError(StoreError):
    """The database URL names a backend Scalar does not support."""


class DatabaseUnavailableError(StoreError):
    """The database could not be opened (server down, wrong URL, no permission)."""


class NotLeaderError(StoreError):
    """A write was fenced: the caller no longer holds the lease it wrote under.

    A deposed leader (its lease expired and another process took it over, bumping the epoch) must stop
    acting, rebuild its state from the log and try to acquire the lease again.
    """


class StaleStepError(StoreError):
    """A step computed outside its transaction lost a race at commit (some of its events were stored by
    someone else first): the transaction rolls back and the step is recomputed from the log."""


class DuplicateActionError(StoreError):
    """An action id was reused for a different action (another kind or payload)."""


class ActionNotClaimedError(StoreError):
    """An action was completed or released without holding its current claim.

    Raised when the action is not in flight, or when another worker reclaimed it since (its ``attempts``
    moved on). The surrounding transaction must roll back so the result's events are not recorded twice.
    """


class UnknownActionError(StoreError):
    """No action has this id."""


class UnknownProjectionError(StoreError, ValueError):
    """A projection table name that the schema does not have."""
