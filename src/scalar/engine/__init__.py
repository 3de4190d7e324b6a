"""The controller: in-memory cluster state and ``step(now, events) -> actions``. Imports domain only."""
