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
import asyncio
import importlib
import inspect
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

WAIT_S = 5.0
RETRY_S = 0.5
EXIT_REFUSED = 1
EXIT_BAD_ARGUMENTS = 2
TRACEBACK_CHARS = 4000  # the tail of a traceback kept in a request's error
MAX_ERROR_CHARS = 10_000  # the controller's bound on a result's error


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


@dataclass
class HandlerResult:
    """What one request's handler call came to, as RunPod's worker reports it: the output, or the error
    (a JSON string of type, message and traceback for an exception; the handler's own ``error`` value for a
    ``{"error": ...}`` return), and ``stop_pod`` (``refresh_worker``: restart the worker after the job)."""

    output: Any = None
    error: str | None = None
    stop_pod: bool = False


@dataclass
class HandlerConfig:
    """RunPod's ``serverless.start`` options a Scalar endpoint spec sets (``handlerConfig``)."""

    return_aggregate_stream: bool = False
    refresh_worker: bool = False


def is_streaming(handler: Callable[..., Any]) -> bool:
    return inspect.isgeneratorfunction(handler) or inspect.isasyncgenfunction(handler)


def _exception_error(exc: BaseException) -> str:
    traceback.print_exc(file=sys.stderr)
    return json.dumps(
        {
            "error_type": str(type(exc)),
            "error_message": str(exc),
            "error_traceback": traceback.format_exc()[-TRACEBACK_CHARS:],
            "worker_id": os.environ.get("RUNPOD_POD_ID", "unknown"),
        }
    )


def _error_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _not_json(what: str, value: Any) -> str | None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return json.dumps(
            {
                "error_type": "<class 'TypeError'>",
                "error_message": f"the handler's {what} is not JSON: {exc} ({type(value).__name__})",
                "error_traceback": "",
            }
        )
    return None


_LOOP: asyncio.AbstractEventLoop | None = None


def _await(awaitable: Any) -> Any:
    """Run ``awaitable`` on this process's one event loop (kept between requests, as the SDK's worker does)."""
    global _LOOP
    if _LOOP is None or _LOOP.is_closed():
        _LOOP = asyncio.new_event_loop()
    return _LOOP.run_until_complete(awaitable)


def _partials(handler: Callable[..., Any], job: dict[str, Any]) -> Iterator[Any]:
    produced = handler(job)
    if inspect.isasyncgen(produced):
        while True:
            try:
                yield _await(produced.__anext__())
            except StopAsyncIteration:
                return
    else:
        yield from produced


def run_handler(
    handler: Callable[[dict[str, Any]], Any],
    job: dict[str, Any],
    on_chunk: Callable[[Any], None] | None = None,
    config: HandlerConfig | None = None,
) -> HandlerResult:
    """Run one request with RunPod's handler semantics (the SDK's ``rp_job``): a plain or ``async``
    handler's return is the output, and a dict return's ``error`` marks the request FAILED and its
    ``refresh_worker`` restarts the worker; a generator or async generator streams each value it yields
    (``on_chunk``), a yielded ``{"error": ...}`` ends it FAILED, and the output is the list of chunks with
    ``return_aggregate_stream`` (else ``[]``). An exception is the error, never a crash of the worker."""
    config = config or HandlerConfig()
    result = HandlerResult()
    if is_streaming(handler):
        chunks: list[Any] = []
        try:
            for partial in _partials(handler, job):
                if isinstance(partial, dict) and partial.get("error"):
                    result.error = _error_text(partial["error"])
                    break
                bad = _not_json("streamed value", partial)
                if bad is not None:
                    result.error = bad
                    break
                if on_chunk is not None:
                    on_chunk(partial)
                if config.return_aggregate_stream:
                    chunks.append(partial)
        except Exception as exc:
            trace = traceback.format_exc()[-TRACEBACK_CHARS:]
            result.error = f"handler: {exc} \ntraceback: {trace}"
            traceback.print_exc(file=sys.stderr)
        if result.error is None:
            result.output = chunks
    else:
        try:
            value = handler(job)
            if inspect.isawaitable(value):
                value = _await(value)
        except Exception as exc:
            result.error = _exception_error(exc)
            value = None
        if result.error is None:
            if isinstance(value, dict):
                value = dict(value)
                error = value.pop("error", None)
                if value.pop("refresh_worker", None):
                    result.stop_pod = True
                if error:
                    result.error = _error_text(error)
            bad = _not_json("output", value)
            if bad is not None:
                result.error, value = bad, None
            result.output = None if value == {} else value
    if config.refresh_worker:
        result.stop_pod = True
    return result


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


def serve(client: WorkerClient, handler: Callable[[dict[str, Any]], Any], config: HandlerConfig) -> int:
    while True:
        reply = client.call("next", {"wait_s": WAIT_S})
        if reply.get("stop"):
            log(f"stopping: {reply.get('reason')}")
            return 0
        request = reply.get("request")
        if not request:
            continue
        ids = {"request_id": request["id"], "delivery": request["delivery"]}

        def send_chunk(output: Any, ids: dict[str, Any] = ids) -> None:
            client.call("result", {**ids, "final": False, "stream": [output]})

        done = run_handler(handler, {"id": request["id"], "input": request.get("input")}, send_chunk, config)
        error = None if done.error is None else done.error[:MAX_ERROR_CHARS]
        answer = client.call(
            "result", {**ids, "output": done.output, "error": error, "stop_pod": done.stop_pod}
        )
        if not answer.get("accepted"):
            log(f"result of {request['id']} not taken: {answer.get('reason')}")
        if done.stop_pod:
            log(f"refresh_worker after {request['id']}: this worker stops and a fresh one starts")
            return 0


RUNPOD_PREFIX = "/agent/v1/runpod"
"""Where the RunPod worker protocol is served (``scalar.api.routes_runpod_worker``)."""


def runpod_env(controller: str, endpoint_id: str, worker_id: str, token: str, attempt: int) -> dict[str, str]:
    """The variables an unmodified RunPod worker (``runpod.serverless.start``) reads, pointed at the
    controller. The URLs already hold a query (the SDK appends ``&...``); ``$ID`` and ``$RUNPOD_POD_ID``
    are the SDK's own placeholders."""
    base = f"{controller.rstrip('/')}{RUNPOD_PREFIX}/{endpoint_id}"
    query = f"?attempt={attempt}"
    return {
        "RUNPOD_WEBHOOK_GET_JOB": f"{base}/job-take/$ID{query}",
        "RUNPOD_WEBHOOK_POST_OUTPUT": f"{base}/job-done/$RUNPOD_POD_ID/$ID{query}",
        "RUNPOD_WEBHOOK_POST_STREAM": f"{base}/job-stream/$RUNPOD_POD_ID/$ID{query}",
        "RUNPOD_WEBHOOK_PING": f"{base}/ping/$RUNPOD_POD_ID{query}",
        "RUNPOD_AI_API_KEY": token,
        "RUNPOD_POD_ID": worker_id,
        "RUNPOD_ENDPOINT_ID": endpoint_id,
    }


def exec_runpod_worker(
    command: list[str], controller: str, endpoint_id: str, worker_id: str, token: str, attempt: int
) -> int:
    """Replace this process with the RunPod worker ``command``, its environment completed with
    :func:`runpod_env` (the process group, GPUs and everything else the agent set stay)."""
    if not command:
        log("error: --exec needs the worker's command after --")
        return EXIT_BAD_ARGUMENTS
    env = {**os.environ, **runpod_env(controller, endpoint_id, worker_id, token, attempt)}
    log(f"RunPod worker {worker_id} of endpoint {endpoint_id}: {' '.join(command)}")
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        log(f"error: cannot run {command[0]!r}: {exc}")
        return 127
    return 0  # not reached


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scalar-endpoint-worker", description=__doc__.splitlines()[0])
    p.add_argument("--endpoint", required=True)
    p.add_argument("--worker", required=True)
    p.add_argument("--handler", help="module:function")
    p.add_argument("--exec", dest="exec_command", action="store_true", help="run a RunPod worker: -- argv")
    p.add_argument("command", nargs=argparse.REMAINDER, help="with --exec: -- the worker's argv")
    p.add_argument("--controller", default=os.environ.get("SCALAR_CONTROLLER_URL"))
    p.add_argument("--return-aggregate-stream", action="store_true")
    p.add_argument("--refresh-worker", action="store_true")
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
    if args.exec_command:
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        return exec_runpod_worker(command, args.controller, args.endpoint, args.worker, token, attempt)
    if not args.handler:
        log("error: give --handler module:function (or --exec -- argv)")
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
        config = HandlerConfig(args.return_aggregate_stream, args.refresh_worker)
        return serve(client, handler, config)
    except Refused as err:
        log(f"refused by the controller: {err}")
        return EXIT_REFUSED
    finally:
        client.close()


if __name__ == "__main__":
    raise SystemExit(main())
