"""``scalar demo``: the decision toolkit answering the seeds' worked examples (filled in at integration)."""

import typer


def register(app: typer.Typer) -> None:
    return None
