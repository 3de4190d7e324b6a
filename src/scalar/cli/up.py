"""``scalar up``: the API server, the control plane and the built-in market, started by one command.

The controller (lease, engine loop, executor) and the built-in market run in this process; the API runs in
``--api-workers`` ``scalar api`` processes sharing the listening socket (0: in this process too).

State lives in the database (SQLite under ``--data-dir``, or ``$SCALAR_DATABASE_URL``), so stopping and
starting again resumes where it was. ``--demo`` adds a seeded demo workload; without it, nothing is
submitted but what users send. Ctrl-C (SIGINT) or SIGTERM stops the server, then the control plane.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import typer

from scalar.cli.agent import local_agent_gpus, start_local_agent, stop_local_agent
from scalar.cli.demo_workload import DemoWorkload
from scalar.cli.errors import fail, user_errors
from scalar.wire.jobs import JobOut

STARTUP_FAILED = 1
ACTIVE_STATES = ("PENDING", "SCHEDULED", "RUNNING")
REPORT_EVERY_S = 2.0
log = logging.getLogger("scalar.up")


def say(text: str) -> None:
    """One line on stdout, flushed (``scalar up`` is watched through pipes too)."""
    print(text, flush=True)


def stamp() -> str:
    return datetime.now(UTC).strftime("%H:%M:%S")


# ------------------------------------------------------------------------------------------ job reporter


def _job_label(job: JobOut) -> str:
    name = f" ({job.name})" if job.name else ""
    return f"{job.id}{name} {job.tier} {job.gpu_count} GPU"


class JobReporter(threading.Thread):
    """Prints each job's moves (submitted, running, finished...) with its one-line reason."""

    def __init__(self, control_plane: Any, stop: threading.Event) -> None:
        super().__init__(name="scalar-job-reporter", daemon=True)
        self.control_plane = control_plane
        self.stop = stop
        self.known: dict[str, str] | None = None

    def active(self) -> dict[str, JobOut]:
        jobs: dict[str, JobOut] = {}
        for state in ACTIVE_STATES:
            for job in self.control_plane.list_jobs(state=state, limit=1000):
                jobs[job.id] = job
        return jobs

    def report_once(self) -> None:
        active = self.active()
        if self.known is None:
            if active:
                counts = ", ".join(
                    f"{sum(1 for j in active.values() if j.state == s)} {s}" for s in ACTIVE_STATES
                )
                say(f"[{stamp()}] resumed with {len(active)} unfinished jobs: {counts}")
            self.known = {k: j.state for k, j in active.items()}
            return
        for job_id, job in active.items():
            state = job.state
            before = self.known.get(job_id)
            if before != state:
                self._print(job, before)
        for job_id, before in self.known.items():
            if job_id not in active:
                job = self.control_plane.get_job(job_id)
                if job is not None and job.state != before:
                    self._print(job, before)
        self.known = {k: j.state for k, j in active.items()}

    def _print(self, job: JobOut, before: str | None) -> None:
        move = f"{before} -> {job.state}" if before else f"submitted, {job.state}"
        text = (job.reason or "").removeprefix(f"job {job.id} ")
        reason = f": {text}" if text else ""
        say(f"[{stamp()}] {_job_label(job)} {move}{reason}")

    def run(self) -> None:
        while not self.stop.wait(REPORT_EVERY_S):
            try:
                self.report_once()
            except Exception:
                log.exception("job reporter: reading the jobs failed")


# -------------------------------------------------------------------------------------------- the server


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: any free port). ``OSError`` if it cannot be had."""
    family, socktype, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, socktype, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def base_url(host: str, sock: socket.socket) -> str:
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "(unreadable URL)"


def banner(url: str, settings: Any, demo: bool, api_workers: int = 0) -> list[str]:
    database = settings.database_url
    sqlite = database.startswith("sqlite")
    scale = settings.time_scale
    speed = "real time" if scale == 1 else f"{scale:g}x faster than real time (boots take seconds)"
    example = '{"tier": "FAST", "gpu_count": 2, "vram_per_gpu_gb": 40, "expected_duration_sec": 120}'
    lines = [
        "Scalar is up.",
        f"  API         {url}   (OpenAPI docs: {url}/docs)",
        f"  Health      {url}/healthz",
        f"  Orderbook   {url}/orderbook?instance_type=8xH100&node_count=1",
        f"  Jobs        {url}/jobs",
        f"  Data dir    {Path(settings.data_dir).resolve()}"
        + ("" if sqlite else " (unused: database by URL)"),
        f"  Database    {_redact(database)}",
        f"  Market      built-in, {speed}",
        "  Processes   "
        + (
            f"controller and market in pid {os.getpid()}, API in {api_workers} worker process"
            + ("es" if api_workers > 1 else "")
            if api_workers
            else f"API, controller and market in pid {os.getpid()}"
        ),
        "  Demo        "
        + (
            "on: bursts of short interactive FAST jobs and long FLEX training runs (some restartable)"
            if demo
            else "off"
        ),
        "Submit a job:",
        f"  scalar submit --server {url} --gpus 2 --vram-gb 40 --duration 2m --tier FAST",
        f"  curl -X POST {url}/jobs -H 'content-type: application/json' -d '{example}'"
        + (
            f' -H "Authorization: Bearer $(cat {Path(settings.data_dir) / "admin.token"})"'
            if getattr(settings, "auth_required", False)
            else ""
        ),
        f"Watch jobs:  scalar jobs --server {url}",
        "Stop: Ctrl-C (the state is kept; `scalar up` again resumes it).",
    ]
    return lines


def _serve(app: Any, sock: socket.socket) -> tuple[Any, threading.Thread]:
    import uvicorn

    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=3
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="scalar-api", daemon=True)
    thread.start()
    return server, thread


class _Stopper:
    """SIGINT/SIGTERM set ``event``. A second Ctrl-C (SIGINT) more than a second later exits at once;
    repeats within that second (a signal sent to the process and to its group) are ignored."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.first_at: float | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if self.first_at is not None:
            if signum == signal.SIGINT and now - self.first_at > 1.0:
                say("stopping now (second Ctrl-C); the next start recovers the state")
                os._exit(130)
            return
        self.first_at = now
        say(f"\n[{stamp()}] stopping (Ctrl-C again to force)...")
        self.event.set()

    def install(self) -> None:
        signal.signal(signal.SIGINT, self)
        signal.signal(signal.SIGTERM, self)


def run_up(settings: Any, api_workers: int = 0, worker_args: list[str] | None = None) -> int:
    """Start everything, wait for a signal, stop everything; the exit code. ``api_workers`` > 0: the API
    runs in that many ``scalar api`` processes sharing the socket (``worker_args`` give them the settings),
    this process runs the controller and the built-in market; 0: the API in this process too."""
    from scalar.api.app import create_app
    from scalar.runtime import ControlPlane

    try:
        sock = listen(settings.host, settings.port)
    except OSError as exc:
        sys.stderr.write(
            f"error: cannot listen on {settings.host}:{settings.port} ({exc.strerror or exc}); "
            "pick another --port, or stop what uses it\n"
        )
        return STARTUP_FAILED
    stopper = _Stopper()
    stopper.install()
    data_dir = Path(settings.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    data_dir.chmod(0o700)  # admin.token, secret.key, scalar.db and the local agent's state live here
    control_plane = ControlPlane(settings)
    try:
        control_plane.start()
    except Exception as exc:
        sock.close()
        log.debug("control plane start failed", exc_info=True)
        sys.stderr.write(f"error: the control plane could not start: {exc}\n")
        with contextlib.suppress(Exception):
            control_plane.stop()
        return STARTUP_FAILED
    workers: list[threading.Thread] = []
    local_agent = None
    admin_token = _local_admin_token(control_plane, settings)
    server: Any = None
    server_thread: threading.Thread | None = None
    api_procs: list[Any] = []
    if api_workers > 0:
        from scalar.cli.api import spawn_workers, stop_workers, wait_ready

        api_procs = spawn_workers(api_workers, sock, worker_args or [])
    else:
        server, server_thread = _serve(create_app(control_plane), sock)

    def api_alive() -> bool:
        if server_thread is not None:
            return server_thread.is_alive()
        return all(p.poll() is None for p in api_procs)

    code = 0
    try:
        url = base_url(settings.host, sock)
        if server_thread is not None:
            while not server.started and server_thread.is_alive():
                if stopper.event.wait(0.05):
                    break
            if not server_thread.is_alive():
                sys.stderr.write("error: the API server stopped at start; see the messages above\n")
                return STARTUP_FAILED
        else:
            problem = wait_ready(url, api_procs)
            if problem is not None:
                sys.stderr.write(f"error: {problem}\n")
                return STARTUP_FAILED
        for line in banner(url, settings, settings.demo, api_workers):
            say(line)
        for line in auth_lines(settings, admin_token):
            say(line)
        reporter = JobReporter(control_plane, stopper.event)
        reporter.start()
        workers.append(reporter)
        if settings.demo:
            seed = settings.market_seed if settings.market_seed is not None else 0
            demo = DemoWorkload(
                control_plane, seed=seed, time_scale=settings.time_scale, stop=stopper.event, say=say
            )
            demo.start()
            workers.append(demo)
            # a local node agent with fake GPUs, so jobs with a command run as processes (docs/agent.md)
            local_agent = start_local_agent(control_plane, url, Path(settings.data_dir), settings)
            for line in local_agent_lines(url, Path(settings.data_dir)):
                say(line)
        while not stopper.event.wait(0.5):
            if not api_alive():
                sys.stderr.write("error: the API server stopped unexpectedly\n")
                code = STARTUP_FAILED
                break
    finally:
        stopper.event.set()
        if local_agent is not None:
            stop_local_agent(local_agent)
        for worker in workers:
            worker.join(timeout=5)
        if server_thread is not None:
            server.should_exit = True
            server_thread.join(timeout=10)
        if api_procs:
            stop_workers(api_procs)
        sock.close()
        control_plane.stop()
    say(f"[{stamp()}] stopped; the state is kept in {_redact(settings.database_url)}")
    return code


def local_agent_lines(url: str, data_dir: Path) -> list[str]:
    return [
        f"Local agent {local_agent_gpus(os.environ)} (fake GPUs; SCALAR_FAKE_GPUS=8xH100-80GB for others), output in {data_dir / 'agent.log'}; run a command:",
        f"  scalar submit --server {url} -- python -c \"import os; print(os.environ['CUDA_VISIBLE_DEVICES'])\"",
        f"  scalar logs --server {url} JOB",
    ]


def _local_admin_token(control_plane: Any, settings: Any) -> str | None:
    """On the first start with authentication on: a new admin token, saved 0600 in the data dir."""
    from scalar.runtime.auth import ensure_local_admin_token

    if not settings.auth_required:
        return None
    return ensure_local_admin_token(control_plane.tokens, Path(settings.data_dir))


def auth_lines(settings: Any, admin_token: str | None) -> list[str]:
    """What the banner says about authentication (docs/security.md); the new admin token, once."""
    from scalar.runtime.auth import token_file

    if not settings.auth_required:
        return ["Auth        OFF (--no-auth): anyone who can reach this loopback address acts as admin"]
    path = token_file(Path(settings.data_dir)).resolve()
    lines = [f"Auth        API tokens required; the admin token is in {path} (the CLI reads it)"]
    if admin_token is not None:
        lines += [
            "Admin token (shown this once; create more with `scalar token create`):",
            f"  {admin_token}",
        ]
    return lines


def register(app: typer.Typer) -> None:
    @app.command("up")
    @user_errors
    def up(
        host: str | None = typer.Option(None, "--host", help="Address to serve on (default 127.0.0.1)."),
        port: int | None = typer.Option(None, "--port", help="Port to serve on (default 8000; 0: any free)."),
        data_dir: Path | None = typer.Option(
            None, "--data-dir", help="Where the SQLite database lives (default ./.scalar)."
        ),
        config: Path | None = typer.Option(
            None, "--config", help="Settings file (default ./scalar.toml if present, else defaults)."
        ),
        demo: bool = typer.Option(False, "--demo", help="Also submit a seeded demo workload."),
        time_scale: float | None = typer.Option(
            None,
            "--time-scale",
            help="Run the built-in market N times faster: boot delays and contract lengths divided by N.",
        ),
        seed: int | None = typer.Option(None, "--seed", help="Seed of the built-in market and the demo."),
        log_level: str = typer.Option("warning", "--log-level", help="debug, info, warning or error."),
        no_auth: bool = typer.Option(
            False, "--no-auth", help="Serve without API tokens (refused unless --host is loopback)."
        ),
        api_workers: int | None = typer.Option(
            None,
            "--api-workers",
            help="API processes beside the controller (default: the cores less one, 1 to 8); "
            "0 serves the API in the controller's process.",
        ),
    ) -> None:
        """Run Scalar: the API server, the control plane and the built-in market (the API in worker
        processes of its own unless --api-workers 0)."""

        level = getattr(logging, log_level.upper(), None)
        if not isinstance(level, int):
            fail(f"--log-level: unknown level {log_level!r}; use debug, info, warning or error")
        logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        if port is not None and not 0 <= port <= 65535:
            fail(f"--port: must be from 0 to 65535, got {port}")
        if time_scale is not None and not time_scale > 0:
            fail(f"--time-scale: must be a number > 0, got {time_scale:g}")
        if config is not None and not config.is_file():
            fail(f"--config: {config}: file not found; check the path, or leave --config out for defaults")
        overrides: dict[str, Any] = {
            "host": host,
            "port": port,
            "data_dir": data_dir,
            "time_scale": time_scale,
            "market_seed": seed,
            "demo": demo or None,
            "auth_required": False if no_auth else None,
        }
        from scalar.cli.api import default_api_workers, server_settings

        settings = server_settings(config, overrides)
        if settings.demo:
            local_agent_gpus(os.environ)  # a bad $SCALAR_FAKE_GPUS is refused before anything starts
        from scalar.cli.api import worker_args as api_worker_args

        workers = default_api_workers() if api_workers is None else api_workers
        if not 0 <= workers <= 64:
            fail(f"--api-workers: must be from 0 to 64, got {workers}")
        args = api_worker_args(config, data_dir, overrides)
        if workers == 0:
            raise typer.Exit(run_up(settings, 0, args))
        from scalar.runtime.step_metrics import multiprocess_metrics

        # the controller here and the API workers share /metrics: a fresh directory per start, removed at exit
        with multiprocess_metrics():
            code = run_up(settings, workers, args)
        raise typer.Exit(code)
