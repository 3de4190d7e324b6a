"""The process a local worker runs: ``python -m scalar.runtime.endpoints.handler_process module:function``.

It imports the handler once (the worker's cold start), then serves one request per line on stdin: the line
is RunPod's job JSON (``{"id": ..., "input": ...}``), the answer one JSON line on stdout,
``{"output": <the handler's return value>}`` or ``{"error": "<exception type>: <message>"}``. A handler may
be a plain function of the job dict (as RunPod's ``handler(job)``). Its own prints go to stderr, so they
cannot corrupt the answer stream.
"""

from __future__ import annotations

import importlib
import json
import sys
import traceback
from collections.abc import Callable
from typing import Any


def load_handler(spec: str) -> Callable[[dict[str, Any]], Any]:
    module_name, _, function_name = spec.partition(":")
    module = importlib.import_module(module_name)
    handler = getattr(module, function_name)
    if not callable(handler):
        raise TypeError(f"{spec} is not callable")
    return handler  # type: ignore[no-any-return]


def serve(spec: str) -> int:
    answers = sys.stdout
    sys.stdout = sys.stderr  # the handler's prints must not reach the answer stream
    try:
        handler = load_handler(spec)
    except Exception as exc:
        answers.write(json.dumps({"ready": False, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
        answers.flush()
        return 1
    answers.write(json.dumps({"ready": True}) + "\n")
    answers.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            answer: dict[str, Any] = {"output": handler(job)}
            text = json.dumps(answer)
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            text = json.dumps({"error": f"{type(exc).__name__}: {exc}"})
        answers.write(text + "\n")
        answers.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(serve(sys.argv[1]))
