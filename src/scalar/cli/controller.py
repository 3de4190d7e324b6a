"""``scalar controller``: the control plane without the HTTP server (multi-controller deployments).

Run several against one PostgreSQL database (``SCALAR_DATABASE_URL``): exactly one leads, the others stand
by and take over within the lease's TTL of its death. Stops cleanly on Ctrl-C or SIGTERM (giving the lease
up, so a standby takes over at once).
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import typer

from scalar.cli.errors import fail, user_errors
from scalar.runtime import ControlPlane, SettingsError, load_settings


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


@user_errors
def controller(
    config: Path | None = typer.Option(
        None, "--config", help="scalar.toml (default: ./scalar.toml if present)"
    ),
    data_dir: Path | None = typer.Option(
        None, "--data-dir", help="where SQLite state lives (default ./.scalar)"
    ),
    time_scale: float | None = typer.Option(
        None, "--time-scale", help="built-in market N times faster: boot delays and contracts divided by N"
    ),
    seed: int | None = typer.Option(None, "--seed", help="the built-in market's seed (new markets only)"),
    log_level: str = typer.Option("warning", "--log-level", help="debug, info, warning or error"),
) -> None:
    """Run the controller (leader election, engine loop, action executor) without the HTTP server."""
    level = getattr(logging, log_level.upper(), None)
    if not isinstance(level, int):
        fail(f"--log-level: unknown level {log_level!r}; use debug, info, warning or error")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = load_settings(
            config, {"data_dir": data_dir, "time_scale": time_scale, "market_seed": seed}
        )
    except SettingsError as err:
        fail(str(err))
    stop = threading.Event()

    def _stop(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    plane = ControlPlane(settings)
    plane.start()
    _say(f"scalar controller {settings.holder} on {plane.store.url if plane.store else '?'}")
    role = None
    try:
        while not stop.wait(0.5):
            now = "leader" if plane.is_leader else "standby"
            if now != role:
                role = now
                _say(f"role: {role}")
    finally:
        plane.stop()
        _say("stopped")


def register(app: typer.Typer) -> None:
    app.command("controller")(controller)
