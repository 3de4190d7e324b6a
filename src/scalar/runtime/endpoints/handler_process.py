"""The process a local worker runs: ``python -m scalar.runtime.endpoints.handler_process module:function
[--return-aggregate-stream] [--refresh-worker]``.

It imports the handler once (the worker's cold start), then serves one request per line on stdin: the line
is RunPod's job JSON (``{"id": ..., "input": ...}``). Each value a generator handler yields is one line
``{"chunk": <value>}`` on stdout as it comes; the last line of a request is ``{"output": ..., "error": ...,
"stop_pod": ...}``. The handler's semantics are RunPod's, the very code the agent-run worker uses
(``scalar.agent.endpoint_worker.run_handler``): sync, ``async``, generator and async-generator handlers,
``{"error": ...}`` returns, ``refresh_worker``. Its own prints go to stderr, so they cannot corrupt the
answer stream.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from scalar.agent.endpoint_worker import HandlerConfig, load_handler, run_handler

AGGREGATE_FLAG = "--return-aggregate-stream"
REFRESH_FLAG = "--refresh-worker"


def _write(answers: TextIO, message: dict[str, Any]) -> None:
    answers.write(json.dumps(message) + "\n")
    answers.flush()


def serve(spec: str, flags: list[str] | None = None) -> int:
    flags = flags or []
    config = HandlerConfig(AGGREGATE_FLAG in flags, REFRESH_FLAG in flags)
    answers = sys.stdout
    sys.stdout = sys.stderr  # the handler's prints must not reach the answer stream
    try:
        handler = load_handler(spec)
    except Exception as exc:
        _write(answers, {"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        return 1
    _write(answers, {"ready": True})
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        done = run_handler(handler, job, lambda chunk: _write(answers, {"chunk": chunk}), config)
        _write(answers, {"output": done.output, "error": done.error, "stop_pod": done.stop_pod})
    return 0


if __name__ == "__main__":
    raise SystemExit(serve(sys.argv[1], sys.argv[2:]))
