"""Local workers: each runs the endpoint's Python handler (``module:function``) in its own subprocess.

``LocalWorkers.start(worker_id, handler, request_id, job, flags)`` sends one request to the worker's
process (starting the process on first use) from a background thread; the chunks a streaming handler
yields go to ``on_chunk(request_id, outputs)`` as they come; ``finished()`` hands back the answers that
arrived (``lost`` when the process died under the request: the tick retries it, within
``max_request_retries``). ``stop(worker_id)`` kills the process (scale-down, a lost worker, a timed-out
request, ``refresh_worker``).
A handler process's environment is the endpoint spec's ``env`` over the few variables an interpreter needs
(``HANDLER_BASE_ENV``), never the control plane's own (its database URL, provider keys...); the spec cannot
set the loader's or the interpreter's variables here (``LD_*``, ``PYTHON*``...), as this process is not
sandboxed.
These are the workers not on an agent node; a worker whose job runs on a node agent is the agent's
assignment and calls the controller itself (``agent_workers.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ChunkSink = Callable[[str, list[Any]], None]

HANDLER_BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV")
"""What a handler process keeps of the control plane's environment: what the interpreter needs to run."""


HOST_CONTROLLED_PREFIXES = ("LD_", "DYLD_", "PYTHON", "GCONV_")
"""Variables that steer the loader or the interpreter: a handler process on the control plane's host (not
sandboxed, unlike a job on a node agent) does not take them, nor ``HANDLER_BASE_ENV``, from a spec."""


def handler_env(declared: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A handler process's environment: ``HANDLER_BASE_ENV`` of ``base`` (this process's), then the
    endpoint's declared ``env`` over it, except what steers the loader or the interpreter."""
    base = os.environ if base is None else base
    allowed = {
        k: v
        for k, v in declared.items()
        if k not in HANDLER_BASE_ENV and not k.startswith(HOST_CONTROLLED_PREFIXES)
    }
    return {**{k: base[k] for k in HANDLER_BASE_ENV if k in base}, **allowed}


@dataclass(frozen=True, slots=True)
class Finished:
    request_id: str
    worker_id: str
    output: Any = None
    error: str | None = None
    lost: bool = False  # the process died under the request (it crashed its worker)
    stop_pod: bool = False  # refresh_worker: the process was stopped after the request


@dataclass(frozen=True, slots=True)
class HandlerMessage:
    """One line the handler process writes (``handler_process.py``): its hello (``ready``, or the load
    ``error``), a ``chunk`` a streaming handler yielded, or a request's answer (``output``, ``error``,
    ``stop_pod``)."""

    ready: bool = False
    error: str | None = None
    is_chunk: bool = False
    chunk: Any = None
    output: Any = None
    stop_pod: bool = False

    @classmethod
    def parse(cls, line: str) -> HandlerMessage:
        data = json.loads(line)
        if not isinstance(data, dict):
            raise ValueError(f"the handler process wrote {type(data).__name__}, not an object")
        return cls(
            ready=bool(data.get("ready")),
            error=data.get("error"),
            is_chunk="chunk" in data,
            chunk=data.get("chunk"),
            output=data.get("output"),
            stop_pod=bool(data.get("stop_pod")),
        )


class _Process:
    def __init__(
        self, handler: str, cwd: Path | None, flags: Sequence[str] = (), env: Mapping[str, str] | None = None
    ) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "scalar.runtime.endpoints.handler_process", handler, *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=None if cwd is None else str(cwd),
            env=handler_env(env or {}),
        )
        self.lock = threading.Lock()
        self.ready: bool | None = None
        self.error: str | None = None

    def _read(self) -> HandlerMessage:
        assert self.popen.stdout is not None
        line = self.popen.stdout.readline()
        if not line:
            raise RuntimeError(f"the handler process exited (code {self.popen.poll()})")
        return HandlerMessage.parse(line)

    def call(self, job: dict[str, Any], on_chunk: Callable[[Any], None]) -> HandlerMessage:
        with self.lock:
            if self.ready is None:
                hello = self._read()
                self.ready = hello.ready
                self.error = hello.error
            if not self.ready:
                return HandlerMessage(error=f"the handler could not be loaded: {self.error}")
            assert self.popen.stdin is not None
            self.popen.stdin.write(json.dumps(job) + "\n")
            self.popen.stdin.flush()
            while True:
                answer = self._read()
                if not answer.is_chunk:
                    return answer
                on_chunk(answer.chunk)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(timeout=10)
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                stream.close()


class LocalWorkers:
    """The handler processes of this control plane's local workers, by worker id."""

    def __init__(self, cwd: Path | None = None, on_chunk: ChunkSink | None = None) -> None:
        self._cwd = cwd
        self.on_chunk = on_chunk
        self._processes: dict[str, _Process] = {}
        self._done: list[Finished] = []
        self._lock = threading.Lock()

    def start(
        self,
        worker_id: str,
        handler: str,
        request_id: str,
        job: dict[str, Any],
        flags: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        with self._lock:
            process = self._processes.get(worker_id)
            if process is None:
                process = _Process(handler, self._cwd, flags, env)
                self._processes[worker_id] = process
        thread = threading.Thread(
            target=self._run,
            args=(process, worker_id, request_id, job),
            name=f"handler-{worker_id}",
            daemon=True,
        )
        thread.start()

    def _run(self, process: _Process, worker_id: str, request_id: str, job: dict[str, Any]) -> None:
        def chunk(output: Any) -> None:
            if self.on_chunk is not None:
                self.on_chunk(request_id, [output])

        try:
            answer = process.call(job, chunk)
            done = Finished(request_id, worker_id, answer.output, answer.error, stop_pod=answer.stop_pod)
            if answer.stop_pod:
                self.stop(worker_id)
        except Exception as exc:  # the process died under the request: the worker is lost
            self.stop(worker_id)
            done = Finished(request_id, worker_id, None, f"worker lost: {exc}", lost=True)
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
