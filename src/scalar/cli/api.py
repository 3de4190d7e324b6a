"""``scalar api``: HTTP API replicas without the controller; the worker processes of ``scalar up``.

An API process opens the store and the built-in market's tables (``ControlPlane.open()``, no loops) and
serves the HTTP API: reads come from the committed projections, a submission is acknowledged once its
inbox row commits, and whichever ``scalar controller`` (or ``scalar up``) holds the lease consumes it. Run
any number of them against one database (PostgreSQL across hosts; SQLite: processes on one host).

``scalar up --api-workers N`` starts N of these itself, each serving the listening socket it was handed
(``--listen-fd``: the kernel spreads the connections over the processes), and stops them with itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from scalar.cli.errors import fail, user_errors

if TYPE_CHECKING:
    from scalar.runtime.settings import Settings

log = logging.getLogger("scalar.api")
PARENT_CHECK_S = 0.5


def server_settings(config: Path | None, overrides: dict[str, Any]) -> Settings:
    """The settings a server command runs with (file < environment < flags); exits 2 naming a bad value,
    or ``--no-auth`` on an address other machines can reach."""
    from scalar.runtime import SettingsError, load_settings
    from scalar.runtime.auth import is_loopback_only

    try:
        settings = load_settings(config, overrides, os.environ)
    except SettingsError as exc:
        fail(str(exc))
    if not settings.auth_required and not is_loopback_only(settings.host):
        fail(
            f"--no-auth: refused while serving on {settings.host}, which other machines can reach; "
            "serve on 127.0.0.1 (--host 127.0.0.1), or keep authentication on"
        )
    return settings


def default_api_workers() -> int:
    """One API process per core beyond the controller's, at least one, at most eight."""
    return max(1, min(8, (os.cpu_count() or 2) - 1))


def serve(settings: Any, sock: socket.socket, *, parent_pid: int | None = None) -> int:
    """Serve the API on ``sock`` in this process until SIGINT/SIGTERM (or the parent ``parent_pid`` is
    gone); the exit code."""
    import uvicorn

    from scalar.api.app import create_app
    from scalar.runtime import ControlPlane

    plane = ControlPlane(settings)
    try:
        plane.open()
    except Exception as exc:
        sys.stderr.write(f"error: the API could not open the database: {exc}\n")
        return 1
    config = uvicorn.Config(
        create_app(plane, shared_limits=True),
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=3,
    )
    server = uvicorn.Server(config)
    if parent_pid is not None:  # a worker of `scalar up`: never outlive it (even after a kill -9)

        def orphaned() -> None:
            while not server.should_exit:
                if os.getppid() != parent_pid:
                    server.should_exit = True
                    return
                time.sleep(PARENT_CHECK_S)

        threading.Thread(target=orphaned, name="scalar-api-parent", daemon=True).start()
    # uvicorn stops gracefully on SIGINT/SIGTERM, then re-raises the signal to the handler it found: make
    # that one a no-op, so a stopped API process exits 0 after closing the store.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    try:
        server.run(sockets=[sock])  # in the main thread: uvicorn handles SIGINT/SIGTERM itself
    finally:
        plane.stop()
    return 0


def spawn_workers(
    count: int, sock: socket.socket, args: list[str], env: dict[str, str] | None = None
) -> list[subprocess.Popen[bytes]]:
    """``count`` ``scalar api`` processes serving ``sock`` (inherited by file descriptor)."""
    fd = sock.fileno()
    os.set_inheritable(fd, True)
    command = [
        sys.executable,
        "-m",
        "scalar",
        "api",
        "--listen-fd",
        str(fd),
        "--parent-pid",
        str(os.getpid()),
    ]
    return [subprocess.Popen([*command, *args], pass_fds=(fd,), env=env) for _ in range(count)]


def wait_ready(url: str, workers: list[subprocess.Popen[bytes]], timeout_s: float = 60.0) -> str | None:
    """Wait until ``url``/healthz answers; ``None`` when it does, else what went wrong."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        dead = [w for w in workers if w.poll() is not None]
        if dead:
            return f"an API worker exited with code {dead[0].returncode} at start; see the messages above"
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                return None
        except urllib.error.HTTPError:
            return None  # it answered (e.g. 503 while the controller starts)
        except OSError:
            time.sleep(0.1)
    return f"the API workers did not answer within {timeout_s:g} s"


def stop_workers(workers: list[subprocess.Popen[bytes]], timeout_s: float = 10.0) -> None:
    for worker in workers:
        if worker.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                worker.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for worker in workers:
        try:
            worker.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(5)


def worker_args(config: Path | None, data_dir: Path | None, overrides: dict[str, Any]) -> list[str]:
    """The ``scalar api`` options that give a worker the settings of ``scalar up``."""
    args: list[str] = []
    if config is not None:
        args += ["--config", str(config)]
    if data_dir is not None:
        args += ["--data-dir", str(data_dir)]
    if overrides.get("time_scale") is not None:
        args += ["--time-scale", repr(float(overrides["time_scale"]))]
    if overrides.get("market_seed") is not None:
        args += ["--seed", str(int(overrides["market_seed"]))]
    if overrides.get("auth_required") is False:
        args += ["--no-auth"]
    return args


@user_errors
def api(
    host: str | None = typer.Option(None, "--host", help="Address to serve on (default 127.0.0.1)."),
    port: int | None = typer.Option(None, "--port", help="Port to serve on (default 8000; 0: any free)."),
    data_dir: Path | None = typer.Option(
        None, "--data-dir", help="Where the SQLite database lives (default ./.scalar)."
    ),
    config: Path | None = typer.Option(
        None, "--config", help="Settings file (default ./scalar.toml if present, else defaults)."
    ),
    workers: int = typer.Option(1, "--workers", help="API processes to run, sharing the port."),
    time_scale: float | None = typer.Option(
        None, "--time-scale", help="The built-in market's time scale (as the controller's)."
    ),
    seed: int | None = typer.Option(None, "--seed", help="The built-in market's seed (new markets only)."),
    log_level: str = typer.Option("warning", "--log-level", help="debug, info, warning or error."),
    no_auth: bool = typer.Option(
        False, "--no-auth", help="Serve without API tokens (refused unless --host is loopback)."
    ),
    listen_fd: int | None = typer.Option(None, "--listen-fd", hidden=True),
    parent_pid: int | None = typer.Option(None, "--parent-pid", hidden=True),
) -> None:
    """Run HTTP API replicas only (no controller): run `scalar controller` beside them on one database."""

    level = getattr(logging, log_level.upper(), None)
    if not isinstance(level, int):
        fail(f"--log-level: unknown level {log_level!r}; use debug, info, warning or error")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if port is not None and not 0 <= port <= 65535:
        fail(f"--port: must be from 0 to 65535, got {port}")
    if not 1 <= workers <= 64:
        fail(f"--workers: must be from 1 to 64, got {workers}")
    if config is not None and not config.is_file():
        fail(f"--config: {config}: file not found; check the path, or leave --config out for defaults")
    overrides: dict[str, Any] = {
        "host": host,
        "port": port,
        "data_dir": data_dir,
        "time_scale": time_scale,
        "market_seed": seed,
        "auth_required": False if no_auth else None,
    }
    settings = server_settings(config, overrides)
    if listen_fd is not None:  # a worker of `scalar up` / `scalar api --workers`
        raise typer.Exit(serve(settings, socket.socket(fileno=listen_fd), parent_pid=parent_pid))
    from scalar.cli.up import base_url, listen

    try:
        sock = listen(settings.host, settings.port)
    except OSError as exc:
        fail(
            f"cannot listen on {settings.host}:{settings.port} ({exc.strerror or exc}); "
            "pick another --port, or stop what uses it"
        )
    url = base_url(settings.host, sock)
    if workers == 1:
        print(f"scalar api on {url} ({settings.holder})", flush=True)
        raise typer.Exit(serve(settings, sock))
    from scalar.runtime.step_metrics import multiprocess_metrics

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with multiprocess_metrics():  # the workers' counters summed on whichever /metrics answers
        code = _run_workers(workers, sock, url, worker_args(config, data_dir, overrides), stop)
    raise typer.Exit(code)


def _run_workers(workers: int, sock: socket.socket, url: str, args: list[str], stop: threading.Event) -> int:
    procs = spawn_workers(workers, sock, args)
    code = 0
    try:
        problem = wait_ready(url, procs)
        if problem is not None:
            sys.stderr.write(f"error: {problem}\n")
            code = 1
        else:
            print(f"scalar api on {url} ({workers} processes)", flush=True)
            while not stop.wait(0.5):
                if any(p.poll() is not None for p in procs):
                    sys.stderr.write("error: an API worker stopped unexpectedly\n")
                    code = 1
                    break
    finally:
        stop_workers(procs)
        sock.close()
    return code


def register(app: typer.Typer) -> None:
    app.command("api")(api)
