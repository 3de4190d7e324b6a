"""Scalar's executor for tetra-rp / runpod-flash ``@remote`` functions: a RunPod worker run on a node agent.

``python -u -m scalar.agent.function_worker``

tetra-rp's and runpod-flash's ``@remote`` send each call to the endpoint's ``/run`` as a
``FunctionRequest`` (``tetra_rp.protos.remote_execution``; runpod-flash's has the same fields and a few
more) and read the job's output as a ``FunctionResponse``. RunPod runs them in its own worker image; on
Scalar's fleet, where a node runs processes rather than images, an endpoint created through ``/graphql``
with such an image runs this module instead (docs/endpoints.md, "Coming from RunPod"). It is an ordinary
RunPod worker (``runpod.serverless.start``), started by the launcher of every RunPod worker
(``scalar.agent.endpoint_worker --exec``), isolated like any job.

A request: ``function_name`` and ``function_code`` (the function's source; executed in a fresh namespace),
or ``execution_type: "class"`` with ``class_name``, ``class_code``, the constructor's arguments and
``method_name`` (instances kept by ``instance_id`` while the worker lives); ``args``/``kwargs`` as
base64-encoded cloudpickle (or plain JSON values when runpod-flash's ``serialization_format`` is
``"json"``); ``modules`` (runpod-flash: local module sources, written under the job's private directory);
``dependencies`` (pip requirements: those not already installed are installed with pip into the job's
private directory, which must reach a package index); ``system_dependencies`` are refused (Scalar installs
no system packages into a node). The answer: ``{success, result (base64 cloudpickle) or json_result,
stdout, error, instance_id, instance_info}``; a failure has ``success: false`` and ``error``, which RunPod's
SDK turns into a FAILED request that still carries the output.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import importlib
import importlib.metadata
import io
import os
import pickle
import subprocess
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

MAX_DEPENDENCIES = 100
MAX_STDOUT_CHARS = 100_000
PIP_TIMEOUT_S = 900.0

_instances: dict[str, dict[str, Any]] = {}  # class instances by instance_id, while this worker lives


class RequestError(Exception):
    """A request this executor cannot run: the message says what was wrong and what to do."""


def _pickler() -> Any:
    try:
        import cloudpickle
    except ImportError:  # plain values unpickle with pickle; functions and classes by value need cloudpickle
        return pickle
    return cloudpickle


def _decode(value: Any, json_format: bool, where: str) -> Any:
    if json_format:
        return value
    if not isinstance(value, str):
        raise RequestError(
            f"{where}: must be a base64-encoded cloudpickle string, not {type(value).__name__}"
        )
    try:
        return _pickler().loads(base64.b64decode(value))
    except Exception as exc:
        raise RequestError(f"{where}: cannot be decoded ({type(exc).__name__}: {exc})") from None


def _encode(value: Any) -> str:
    return base64.b64encode(_pickler().dumps(value)).decode("ascii")


def _private_dir() -> Path:
    """The job's private directory (its HOME on an agent)."""
    return Path(os.environ.get("HOME") or os.getcwd())


def _missing(requirements: Sequence[str]) -> list[str]:
    """The requirements not satisfied by what this interpreter has installed."""
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:  # without packaging, pip decides
        return list(requirements)
    missing = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            raise RequestError(f"dependencies: {text!r} is not a pip requirement ({exc})") from None
        try:
            have = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(text)
            continue
        if req.specifier and not req.specifier.contains(have, prereleases=True):
            missing.append(text)
    return missing


def install_dependencies(requirements: Any) -> None:
    """Install with pip, into the job's private directory, the requirements not already installed."""
    if requirements is None:
        return
    if not isinstance(requirements, list) or not all(isinstance(r, str) for r in requirements):
        raise RequestError("dependencies: must be a list of pip requirement strings")
    if len(requirements) > MAX_DEPENDENCIES:
        raise RequestError(f"dependencies: at most {MAX_DEPENDENCIES} requirements")
    missing = _missing(requirements)
    if not missing:
        return
    digest = hashlib.sha256("\n".join(sorted(missing)).encode()).hexdigest()[:16]
    target = _private_dir() / ".scalar-packages" / digest
    if not target.exists():
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(target), "--", *missing],
            capture_output=True,
            text=True,
            timeout=PIP_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip()[-2000:]
            raise RequestError(f"dependencies: pip could not install {', '.join(missing)}: {tail}")
    if str(target) not in sys.path:
        sys.path.insert(0, str(target))
    importlib.invalidate_caches()


def write_modules(modules: Any) -> None:
    """runpod-flash's ``modules``: local module sources, written under the private directory, importable."""
    if not modules:
        return
    if not isinstance(modules, Mapping):
        raise RequestError("modules: must be an object of relative path -> source")
    root = _private_dir() / ".scalar-modules"
    for name, source in modules.items():
        path = PurePosixPath(str(name))
        if path.is_absolute() or ".." in path.parts or path.suffix != ".py" or not isinstance(source, str):
            raise RequestError(f"modules: {name!r} must be a relative .py path (no '..') with its source")
        out = root.joinpath(*path.parts)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(source)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    importlib.invalidate_caches()


def _call(fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    value = fn(*args, **kwargs)
    if asyncio.iscoroutine(value):
        value = asyncio.run(value)
    return value


def _defined(code: Any, name: str, what: str) -> Any:
    if not isinstance(code, str) or not code.strip():
        raise RequestError(
            f"{what}_code: is missing; Scalar runs the source @remote sends (pre-built Flash "
            "deployments are not served): call the function through @remote on a live endpoint"
        )
    namespace: dict[str, Any] = {"__name__": "__remote__"}
    exec(compile(code, f"<remote {what} {name}>", "exec"), namespace)
    if name not in namespace:
        raise RequestError(f"{what}_name: {name!r} is not defined by {what}_code")
    return namespace[name]


def execute(request: Mapping[str, Any]) -> dict[str, Any]:
    """Run one ``FunctionRequest``; the ``FunctionResponse`` as a dict (a failure: ``success`` false)."""
    out = io.StringIO()
    json_format = request.get("serialization_format") == "json"
    try:
        if not isinstance(request, Mapping):
            raise RequestError("input: must be a FunctionRequest object")
        system = request.get("system_dependencies")
        if system:
            raise RequestError(
                f"system_dependencies: {system!r} cannot be installed: Scalar's workers install no system "
                "packages; drop system_dependencies (use Python packages in dependencies), or run an image "
                "that has them on RunPod"
            )
        install_dependencies(request.get("dependencies"))
        write_modules(request.get("modules"))
        kind = request.get("execution_type", "function")
        args = [_decode(a, json_format, f"args[{i}]") for i, a in enumerate(request.get("args") or [])]
        kwargs = {k: _decode(v, json_format, f"kwargs.{k}") for k, v in (request.get("kwargs") or {}).items()}
        extra: dict[str, Any] = {}
        with contextlib.redirect_stdout(out):
            if kind == "function":
                name = request.get("function_name")
                if not isinstance(name, str) or not name:
                    raise RequestError('function_name: is required when execution_type is "function"')
                value = _call(_defined(request.get("function_code"), name, "function"), args, kwargs)
            elif kind == "class":
                value, extra = _run_method(request, args, kwargs, json_format)
            else:
                raise RequestError(f'execution_type: {kind!r} is not "function" or "class"')
        answer: dict[str, Any] = {"success": True, "stdout": out.getvalue()[-MAX_STDOUT_CHARS:], **extra}
        if json_format:
            answer["json_result"] = value
        else:
            answer["result"] = _encode(value)
        return answer
    except RequestError as exc:
        return {"success": False, "error": str(exc), "stdout": out.getvalue()[-MAX_STDOUT_CHARS:]}
    except Exception as exc:
        detail = "".join(traceback.format_exception(exc))[-4000:]
        return {
            "success": False,
            "error": f"{type(exc).__name__}: {exc}\n{detail}",
            "stdout": out.getvalue()[-MAX_STDOUT_CHARS:],
        }


def _run_method(
    request: Mapping[str, Any], args: list[Any], kwargs: dict[str, Any], json_format: bool
) -> tuple[Any, dict[str, Any]]:
    name = request.get("class_name")
    if not isinstance(name, str) or not name:
        raise RequestError('class_name: is required when execution_type is "class"')
    instance_id = request.get("instance_id") or f"{name}-{os.urandom(6).hex()}"
    entry = _instances.get(instance_id)
    if entry is None:
        cls = _defined(request.get("class_code"), name, "class")
        given = request.get("constructor_args") or []
        c_args = [_decode(a, json_format, f"constructor_args[{i}]") for i, a in enumerate(given)]
        c_kwargs = {
            k: _decode(v, json_format, f"constructor_kwargs.{k}")
            for k, v in (request.get("constructor_kwargs") or {}).items()
        }
        entry = {"instance": cls(*c_args, **c_kwargs), "created_at": time.time(), "calls": 0}
        _instances[instance_id] = entry
    method_name = request.get("method_name") or "__call__"
    method = getattr(entry["instance"], str(method_name), None)
    if method is None or not callable(method):
        raise RequestError(f"method_name: {name} has no method {method_name!r}")
    value = _call(method, args, kwargs)
    entry["calls"] += 1
    info = {"class_name": name, "created_at": entry["created_at"], "method_calls": entry["calls"]}
    return value, {"instance_id": instance_id, "instance_info": info}


def handler(job: dict[str, Any]) -> dict[str, Any]:
    """RunPod's handler: the job's ``input`` is the ``FunctionRequest``."""
    request = job.get("input")
    if not isinstance(request, Mapping):
        return {"success": False, "error": "input: must be a FunctionRequest object (as @remote sends)"}
    return execute(request)


def main() -> None:
    # the SDK's own checks report to RunPod and dial outside addresses: not for Scalar's fleet
    os.environ.setdefault("RUNPOD_SKIP_AUTO_SYSTEM_CHECKS", "true")
    try:
        import runpod
    except ImportError:
        sys.stderr.write(
            "error: the runpod package is not installed in this node's Python; install it "
            "(pip install 'scalar-compute[runpod]') to run tetra-rp / runpod-flash functions here\n"
        )
        raise SystemExit(1) from None
    runpod.serverless.start({"handler": handler})


if __name__ == "__main__":
    main()
