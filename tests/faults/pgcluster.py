"""A private PostgreSQL cluster for tests that stop and restart the server (never the shared one).

``initdb`` into a temporary directory owned by the ``postgres`` user (the server refuses to run as root),
on a spare loopback port, trust authentication. ``restart()`` is a fast shutdown and start: every open
connection is cut, as when a database server is restarted under a running controller.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise RuntimeError(f"{name} not found under /usr/lib/postgresql/*/bin; install the PostgreSQL server")
    return found[-1]


def _spare_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateCluster:
    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.data = root / "data"
        self.port = port
        self.user = "postgres"

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        command = [*args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", self.user, "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def init(self) -> None:
        self._run(_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            _bin("pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "start"
        )

    def stop(self, mode: str = "fast") -> None:
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self) -> None:
        self.stop("fast")
        self.start()


@contextmanager
def private_cluster() -> Iterator[PrivateCluster]:
    root = Path(tempfile.mkdtemp(prefix="scalar-pg-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
    cluster = PrivateCluster(root, _spare_port())
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        with suppress(subprocess.CalledProcessError):
            cluster.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
