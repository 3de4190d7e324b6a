"""Local workers: each runs the endpoint's Python handler (``module:function``) in its own subprocess.

``LocalWorkers.start(worker_id, handler, request_id, job)`` sends one request to the worker's process
(starting the process on first use) from a background thread; ``finished()`` hands back the answers that
arrived. ``stop(worker_id)`` kills the process (scale-down, a lost worker, a timed-out request).
These are the workers not on an agent node; a worker whose job runs on a node agent is the agent's
assignment and calls the controller itself (``agent_workers.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Finished:
    request_id: str
    worker_id: str
    output: Any = None
    error: str | None = None


class _Process:
    def __init__(self, handler: str, cwd: Path | None) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "scalar.runtime.endpoints.handler_process", handler],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=None if cwd is None else str(cwd),
        )
        self.lock = threading.Lock()
        self.ready: bool | None = None
        self.error: str | None = None

    def _read(self) -> dict[str, Any]:
        assert self.popen.stdout is not None
        line = self.popen.stdout.readline()
        if not line:
            raise RuntimeError(f"the handler process exited (code {self.popen.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def call(self, job: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if self.ready is None:
                hello = self._read()
                self.ready = bool(hello.get("ready"))
                self.error = hello.get("error")
            if not self.ready:
                return {"error": f"the handler could not be loaded: {self.error}"}
            assert self.popen.stdin is not None
            self.popen.stdin.write(json.dumps(job) + "\n")
            self.popen.stdin.flush()
            return self._read()

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(timeout=10)
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                stream.close()


class LocalWorkers:
    """The handler processes of this control plane's local workers, by worker id."""

    def __init__(self, cwd: Path | None = None) -> None:
        self._cwd = cwd
        self._processes: dict[str, _Process] = {}
        self._done: list[Finished] = []
        self._lock = threading.Lock()

    def start(self, worker_id: str, handler: str, request_id: str, job: dict[str, Any]) -> None:
        with self._lock:
            process = self._processes.get(worker_id)
            if process is None:
                process = _Process(handler, self._cwd)
                self._processes[worker_id] = process
        thread = threading.Thread(
            target=self._run,
            args=(process, worker_id, request_id, job),
            name=f"handler-{worker_id}",
            daemon=True,
        )
        thread.start()

    def _run(self, process: _Process, worker_id: str, request_id: str, job: dict[str, Any]) -> None:
        try:
            answer = process.call(job)
            done = Finished(request_id, worker_id, answer.get("output"), answer.get("error"))
        except Exception as exc:  # the process died under the request: the worker is lost
            done = Finished(request_id, worker_id, None, f"worker lost: {exc}")
        with self._lock:
            self._done.append(done)

    def finished(self) -> list[Finished]:
        with self._lock:
            done, self._done = self._done, []
        return done

    def stop(self, worker_id: str) -> None:
        with self._lock:
            process = self._processes.pop(worker_id, None)
        if process is not None:
            process.kill()

    def close(self) -> None:
        for worker_id in list(self._processes):
            self.stop(worker_id)
