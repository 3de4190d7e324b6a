"""An endpoint worker run by the node agent as an ordinary assignment (docs/endpoints.md, docs/agent.md).

``python -m scalar.agent.endpoint_worker --endpoint ID --worker WID --handler module:function``

The agent starts it like any job (its own process group, ``CUDA_VISIBLE_DEVICES`` = the GPUs the packer
chose). It imports the handler once (the worker's cold start), then dials the controller, never the other
way round: it long-polls ``/agent/v1/endpoints/{ID}/workers/{WID}/next`` for the request delivered to it,
runs the handler in this process and posts the output or the error to ``.../result``. A handler that cannot
be imported is reported to ``.../failed`` with the message (exit 1). It stops (exit 0) when the controller
says the worker or this attempt is no longer current.

Environment (set by the agent): ``SCALAR_CONTROLLER_URL`` (the agent's controller), ``SCALAR_WORKER_TOKEN``
(this worker's credential, a secret of its job), ``SCALAR_ATTEMPT`` (the job's attempt, for fencing).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import httpx

WAIT_S = 5.0
RETRY_S = 0.5
EXIT_REFUSED = 1
EXIT_BAD_ARGUMENTS = 2


class Refused(Exception):
    """The controller refused this worker for good (wrong token, unknown worker)."""


def load_handler(spec: str) -> Callable[[dict[str, Any]], Any]:
    module_name, _, function_name = spec.partition(":")
    if not module_name or not function_name:
        raise ValueError(f"handler {spec!r} is not module:function")
    handler = getattr(importlib.import_module(module_name), function_name)
    if not callable(handler):
        raise TypeError(f"{spec} is not callable")
    return handler  # type: ignore[no-any-return]


def run_handler(handler: Callable[[dict[str, Any]], Any], job: dict[str, Any]) -> tuple[Any, str | None]:
    """(output, None) or (None, "<exception type>: <message>"); the output must be JSON."""
    try:
        output = handler(job)
        json.dumps(output)
        return output, None
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        return None, f"{type(exc).__name__}: {exc}"


class WorkerClient:
    def __init__(self, controller: str, endpoint_id: str, worker_id: str, token: str, attempt: int) -> None:
        self._http = httpx.Client(base_url=controller.rstrip("/"), timeout=WAIT_S + 30)
        self._path = f"/agent/v1/endpoints/{endpoint_id}/workers/{worker_id}"
        self._auth = {"token": token, "attempt": attempt}

    def close(self) -> None:
        self._http.close()

    def call(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST until the controller answers (it may restart meanwhile); a 4xx refusal raises ``Refused``."""
        while True:
            try:
                response = self._http.post(f"{self._path}/{name}", json={**self._auth, **body})
            except httpx.HTTPError as err:
                log(f"controller unreachable ({err}); retrying")
                time.sleep(RETRY_S)
                continue
            if response.status_code >= 500:
                log(f"controller answered {response.status_code}; retrying")
                time.sleep(RETRY_S)
                continue
            data: dict[str, Any] = response.json()
            if response.status_code >= 400:
                raise Refused(str(data.get("detail") or response.text))
            return data


def log(message: str) -> None:
    sys.stderr.write(f"endpoint-worker: {message}\n")
    sys.stderr.flush()


def serve(client: WorkerClient, handler: Callable[[dict[str, Any]], Any]) -> int:
    while True:
        reply = client.call("next", {"wait_s": WAIT_S})
        if reply.get("stop"):
            log(f"stopping: {reply.get('reason')}")
            return 0
        request = reply.get("request")
        if not request:
            continue
        output, error = run_handler(handler, {"id": request["id"], "input": request.get("input")})
        answer = client.call(
            "result",
            {"request_id": request["id"], "delivery": request["delivery"], "output": output, "error": error},
        )
        if not answer.get("accepted"):
            log(f"result of {request['id']} not taken: {answer.get('reason')}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scalar-endpoint-worker", description=__doc__.splitlines()[0])
    p.add_argument("--endpoint", required=True)
    p.add_argument("--worker", required=True)
    p.add_argument("--handler", required=True, help="module:function")
    p.add_argument("--controller", default=os.environ.get("SCALAR_CONTROLLER_URL"))
    args = p.parse_args(argv)
    token = os.environ.get("SCALAR_WORKER_TOKEN", "")
    if not args.controller or not token:
        missing = "SCALAR_CONTROLLER_URL (or --controller)" if not args.controller else "SCALAR_WORKER_TOKEN"
        log(f"error: {missing} is not set; this process is started by the node agent as an assignment")
        return EXIT_BAD_ARGUMENTS
    try:
        attempt = int(os.environ.get("SCALAR_ATTEMPT") or 1)
    except ValueError:
        log("error: SCALAR_ATTEMPT is not a number")
        return EXIT_BAD_ARGUMENTS
    client = WorkerClient(args.controller, args.endpoint, args.worker, token, attempt)
    try:
        try:
            handler = load_handler(args.handler)
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            log(f"the handler {args.handler} could not be loaded: {message}")
            client.call("failed", {"error": message[:10_000]})
            return EXIT_REFUSED
        log(
            f"worker {args.worker} of endpoint {args.endpoint} ready: {args.handler}, "
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}"
        )
        return serve(client, handler)
    except Refused as err:
        log(f"refused by the controller: {err}")
        return EXIT_REFUSED
    finally:
        client.close()


if __name__ == "__main__":
    raise SystemExit(main())
