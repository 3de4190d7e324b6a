"""``scalar endpoint``: check, deploy, list, read, delete and follow serverless endpoints (seed 004).
The server's answers are read as their models (``wire/endpoints_api.py``).

``validate`` works offline; ``deploy``, ``list``, ``get``, ``delete`` and ``logs`` talk to a running Scalar
server (``--server``), except ``deploy --target runpod``, which sends RunPod's ``saveEndpoint`` directly
(``SCALAR_RUNPOD_API_KEY``). Specs are JSON or YAML (docs/endpoints.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import typer
import yaml

from scalar.cli.errors import user_errors
from scalar.cli.inputs import InputError, parse_data, read_json
from scalar.cli.jobs import call_server, server_option
from scalar.cli.output import Col, cell, console, make_table, print_json, say, when, wide_option
from scalar.domain.endpoints import ServerlessEndpoint
from scalar.domain.errors import InvalidSpecError
from scalar.domain.money import usd_text
from scalar.providers.base import ProviderError
from scalar.wire.endpoints import EndpointSpecFile, endpoint_to_json
from scalar.wire.endpoints_api import EndpointListOut, EndpointLogsOut, EndpointOut, LatencyOut

endpoint_app = typer.Typer(
    name="endpoint",
    help="Serverless GPU endpoints: validate, deploy, list, get, delete and follow them.",
    no_args_is_help=True,
)


def _read_spec_data(path: Path) -> Any:
    if path.suffix.lower() not in (".yaml", ".yml"):
        return read_json(path)
    if not path.is_file():
        raise InputError(str(path), None, "file not found; check the path")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(str(path), None, f"is not valid YAML ({exc})") from None


def load_spec_file(path: Path) -> EndpointSpecFile:
    return parse_data(str(path), _read_spec_data(path), EndpointSpecFile)


def load_endpoint(path: Path) -> ServerlessEndpoint:
    """Read SPEC.json (or .yaml) into a normalized spec; every problem is an ``InputError`` naming file and
    field."""
    spec_file = load_spec_file(path)
    try:
        return spec_file.to_domain()
    except InvalidSpecError as exc:
        problem = exc.problem if exc.hint is None else f"{exc.problem}. To fix: {exc.hint}"
        raise InputError(str(path), exc.field, problem) from None


def _print_summary(spec: ServerlessEndpoint) -> None:
    out = console()
    data = endpoint_to_json(spec)
    rows = [[key, data[key]] for key in data if key not in {"gpus", "cudaVersions"}]
    out.print(
        make_table(
            [Col("field", "key"), Col("value", "text")], rows, f"ENDPOINT {spec.name} ({spec.kind.value})"
        )
    )
    group_rows = [
        [
            rank,
            group.value,
            group.memory_gb,
            " ".join(a.value for a in group.architectures),
            f"{group.min_cuda}+ (rec. {group.recommended_cuda})",
            " ".join(v.value for v in spec.cuda_versions_for(group)) if spec.cuda_versions else "any",
            " ".join(group.model_names),
        ]
        for rank, group in enumerate(spec.gpus, start=1)
    ]
    out.print(
        make_table(
            ["order", "group", "memory_gb", "arch", "cuda", "usable_cuda", "models"],
            group_rows,
            "GPU GROUPS (preference order)",
        )
    )


def validate(
    spec_path: Path = typer.Argument(..., metavar="SPEC.json", help="The endpoint spec to check."),
    as_json: bool = typer.Option(False, "--json", help="Print the normalized spec as JSON."),
) -> None:
    """Check SPEC.json and print the normalized spec, or exit 2 naming the invalid field."""
    spec = load_endpoint(spec_path)
    for note in spec.notes:
        sys.stderr.write(f"note: {spec_path}: {note.message}\n")
    if as_json:
        print_json(endpoint_to_json(spec))
    else:
        _print_summary(spec)


def _spec_body(path: Path) -> tuple[dict[str, Any], ServerlessEndpoint]:
    spec_file = load_spec_file(path)
    try:
        spec = spec_file.to_domain()
        handler = spec_file.handler_ref()
        worker = spec_file.worker_fields()  # handlerConfig, or a RunPod worker's command, workdir, env
    except InvalidSpecError as exc:
        problem = exc.problem if exc.hint is None else f"{exc.problem}. To fix: {exc.hint}"
        raise InputError(str(path), exc.field, problem) from None
    body = endpoint_to_json(spec)
    if handler is not None:
        body["handler"] = handler
    body.update({key: value for key, value in worker.items() if value is not None})
    return body, spec


def _latency(latency: LatencyOut) -> str:
    """``p50=120 p99=480 (35 requests)``, or why there is none yet."""
    if latency.p50 is None and latency.p99 is None:
        return "none yet: no request has completed (send one to its /run route)"
    return f"p50={cell(latency.p50)} p99={cell(latency.p99)} ({latency.samples} requests)"


def _show(endpoint: EndpointOut) -> None:
    out = console()
    health = endpoint.health
    rows = [
        ["id", endpoint.id],
        ["name", endpoint.name],
        ["tenant", endpoint.tenant],
        ["state", endpoint.state],
        ["target", endpoint.target],
        ["workers", " ".join(f"{k}={v}" for k, v in health.workers.model_dump().items())],
        ["requests", " ".join(f"{k}={v}" for k, v in health.jobs.model_dump().items())],
        ["latency_ms", _latency(endpoint.latency_ms)],
        ["cost", f"{usd_text(endpoint.cost.cost_usd)} over {endpoint.cost.worker_hours} worker-h"],
    ]
    if endpoint.no_workers_reason:
        rows.append(["no workers", endpoint.no_workers_reason])
    out.print(make_table([Col("field", "key"), Col("value", "text")], rows, f"ENDPOINT {endpoint.name}"))
    if endpoint.scaling:
        out.print(
            make_table(
                [Col("at", "time"), Col("action", "key"), Col("workers", "key"), Col("why", "text", ratio=2)],
                [
                    [when(d.at), d.action, f"{d.workers_before}->{d.workers_target}", d.message]
                    for d in endpoint.scaling[:10]
                ],
                "SCALING DECISIONS (newest first)",
            )
        )


def deploy(
    spec_path: Path = typer.Argument(..., metavar="SPEC.yaml|json", help="The endpoint spec."),
    target: str = typer.Option(
        None, "--target", help="builtin (modeled GPUs), local (run the spec's Python handler) or runpod."
    ),
    server: str = server_option(),
    as_json: bool = typer.Option(False, "--json", help="Print the endpoint as JSON."),
) -> None:
    """Create the endpoint on the Scalar server (or on RunPod with --target runpod)."""
    body, spec = _spec_body(spec_path)
    for note in spec.notes:
        sys.stderr.write(f"note: {spec_path}: {note.message}\n")
    if target == "runpod":
        from scalar.runtime.endpoints.runpod_deploy import deploy_to_runpod  # the runtime loads slowly

        try:
            remote_id = deploy_to_runpod(body, os.environ)
        except ProviderError as exc:
            sys.stderr.write(f"error: {exc}\n")
            raise typer.Exit(1) from None
        if as_json:
            print_json({"target": "runpod", "id": remote_id, "spec": body})
        else:
            console().print(f"deployed {spec.name} to RunPod as endpoint {remote_id}")
        return
    params = {"target": target} if target else {}
    created = call_server(server, lambda c: c._call("POST", "/endpoints", json=body, params=params))
    if as_json:
        print_json(created)
    else:
        endpoint = EndpointOut.model_validate(created)
        _show(endpoint)
        say(f'call it: POST {server.rstrip("/")}/v2/{endpoint.id}/run {{"input": {{...}}}}')


def list_endpoints(
    server: str = server_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    wide: bool = wide_option(),
) -> None:
    """Every endpoint on the server (all the pages) with its workers and requests."""
    found = call_server(server, lambda c: c.every_page("/endpoints", "endpoints", limit=1000))
    if as_json:
        print_json(found)
        return
    rows = [
        [
            e.id,
            e.name,
            e.tenant,
            e.target,
            e.health.workers.ready,
            e.health.workers.initializing + e.health.workers.throttled,
            e.health.jobs.inQueue,
            e.latency_ms.p50,
            e.cost.cost_usd,
        ]
        for e in EndpointListOut.model_validate(found).endpoints
    ]
    if not rows:
        say("no endpoints yet: deploy one with `scalar endpoint deploy SPEC.yaml` (docs/endpoints.md)")
        return
    columns = [
        Col("id", "id"),
        Col("name", "text"),
        Col("tenant", "key"),
        Col("target", "key", wide=True),
        Col("ready", "num"),
        Col("starting", "num"),
        Col("queued", "num"),
        Col("p50_ms", "num"),
        Col("cost_usd", "num", wide=True),
    ]
    console().print(make_table(columns, rows, "ENDPOINTS", wide=wide))


def get_endpoint(
    endpoint_id: str = typer.Argument(..., help="The endpoint id."),
    server: str = server_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """One endpoint: workers, health, latency, cost and its latest scaling decisions."""
    found = call_server(server, lambda c: c.get(f"/endpoints/{endpoint_id}"))
    if as_json:
        print_json(found)
    else:
        _show(EndpointOut.model_validate(found))


def delete_endpoint(
    endpoint_id: str = typer.Argument(..., help="The endpoint id."),
    server: str = server_option(),
) -> None:
    """Delete an endpoint: its workers stop and its queued requests are cancelled."""
    call_server(server, lambda c: c._call("DELETE", f"/endpoints/{endpoint_id}"))
    console().print(f"deleted {endpoint_id}")


def endpoint_logs(
    endpoint_id: str = typer.Argument(..., help="The endpoint id."),
    limit: int = typer.Option(50, "--limit", min=1, max=1000, help="At most this many lines."),
    server: str = server_option(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Scaling decisions and worker moves, newest first."""
    found = call_server(server, lambda c: c.get(f"/endpoints/{endpoint_id}/logs", limit=limit))
    if as_json:
        print_json(found)
        return
    logs = EndpointLogsOut.model_validate(found)
    if not logs.lines:
        say(f"no scaling decisions or worker moves for {endpoint_id} yet")
    for line in logs.lines:
        say(f"{when(line.at)}  {line.kind:<8} {line.code:<16} {line.message}")


def register(app: typer.Typer) -> None:
    endpoint_app.command("validate")(user_errors(validate))
    endpoint_app.command("deploy")(user_errors(deploy))
    endpoint_app.command("list")(user_errors(list_endpoints))
    endpoint_app.command("get")(user_errors(get_endpoint))
    endpoint_app.command("delete")(user_errors(delete_endpoint))
    endpoint_app.command("logs")(user_errors(endpoint_logs))
    app.add_typer(endpoint_app, name="endpoint")
