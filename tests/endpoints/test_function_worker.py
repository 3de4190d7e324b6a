"""Scalar's executor for tetra-rp / runpod-flash ``FunctionRequest``s (``scalar.agent.function_worker``),
called as the RunPod handler it is, with requests built by tetra-rp's own stub; and the ``/graphql``
mapping of RunPod's ``EndpointInput`` onto endpoint specs."""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tetra_rp.core.resources import LiveServerless
from tetra_rp.protos.remote_execution import FunctionResponse
from tetra_rp.stubs.live_serverless import LiveServerlessStub

from scalar.agent import function_worker
from scalar.domain.gpus import CudaVersion
from scalar.runtime.endpoints.service import parse_spec
from scalar.wire.endpoints_api import EndpointOut
from scalar.wire.runpod_graphql import (
    FUNCTION_WORKER_COMMAND,
    endpoint_body,
    endpoint_out,
    is_live_image,
)


def cube(x: int, *, offset: int = 0) -> int:
    print("cubing", x)
    return x**3 + offset


def fails(x: int) -> int:
    print("about to fail")
    raise ValueError(f"no good: {x}")


def tetra_request(func: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The FunctionRequest tetra-rp's stub sends for ``func(*args, **kwargs)`` (as the /run input)."""
    stub = LiveServerlessStub(LiveServerless(name="unit"))
    request = stub.prepare_request(func, None, None, True, *args, **kwargs)
    return request.model_dump(exclude_none=True)


def answer(request: dict[str, Any]) -> Any:
    """What tetra-rp's stub makes of the handler's answer: the value, or its exception."""
    out = function_worker.handler({"id": "r1", "input": request})
    return LiveServerlessStub(LiveServerless(name="unit")).handle_response(FunctionResponse(**out))


@given(st.integers(-1000, 1000), st.integers(-5, 5))
def test_a_function_returns_its_value_as_tetra_decodes_it(x: int, offset: int) -> None:
    assert answer(tetra_request(cube, x, offset=offset)) == x**3 + offset


def test_a_raised_exception_comes_back_as_the_functions_error_with_its_stdout() -> None:
    out = function_worker.handler({"id": "r1", "input": tetra_request(fails, 4)})
    assert out["success"] is False and "ValueError: no good: 4" in out["error"]
    assert out["stdout"] == "about to fail\n"
    with pytest.raises(Exception, match="no good: 4"):
        answer(tetra_request(fails, 4))


def test_system_dependencies_are_refused_and_installed_dependencies_need_no_network() -> None:
    refused = function_worker.execute({**tetra_request(cube, 2), "system_dependencies": ["ffmpeg"]})
    assert refused["success"] is False and refused["error"].startswith("system_dependencies:")
    # httpx is installed here: nothing to install, so no index is asked
    assert answer({**tetra_request(cube, 2), "dependencies": ["httpx>=0.20"]}) == 8
    bad = function_worker.execute({**tetra_request(cube, 2), "dependencies": ["not a requirement!"]})
    assert bad["success"] is False and "is not a pip requirement" in bad["error"]


def test_a_class_keeps_its_instance_between_calls_and_json_arguments_need_no_pickle() -> None:
    code = "class Counter:\n    def __init__(self, start):\n        self.n = start\n    def add(self, k):\n        self.n += k\n        return self.n\n"
    enc = base64.b64encode(cloudpickle.dumps(10)).decode()
    request = {
        "execution_type": "class",
        "class_name": "Counter",
        "class_code": code,
        "constructor_args": [enc],
        "method_name": "add",
        "args": [base64.b64encode(cloudpickle.dumps(5)).decode()],
        "instance_id": "counter-1",
    }
    first = function_worker.execute(request)
    second = function_worker.execute({**request, "create_new_instance": False})
    values = [cloudpickle.loads(base64.b64decode(r["result"])) for r in (first, second)]
    assert values == [15, 20] and second["instance_info"]["method_calls"] == 2
    json_call = function_worker.execute(
        {
            "function_name": "f",
            "function_code": "async def f(a, b):\n    return {'sum': a + b}\n",
            "args": [2, 3],
            "serialization_format": "json",
        }
    )
    assert json_call == {"success": True, "stdout": "", "json_result": {"sum": 5}}


def test_modules_stay_inside_the_private_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(sys, "path", list(sys.path))  # the executor puts the modules' directory on it
    request = {
        "function_name": "f",
        "function_code": "def f():\n    import helper_mod\n    return helper_mod.VALUE\n",
        "modules": {"helper_mod.py": "VALUE = 41 + 1\n"},
        "serialization_format": "json",
    }
    assert function_worker.execute(request)["json_result"] == 42
    for bad in ("../escape.py", "/etc/x.py", "notpython.txt"):
        out = function_worker.execute({**request, "modules": {bad: "X = 1\n"}})
        assert out["success"] is False and out["error"].startswith("modules:"), bad
    assert not (tmp_path.parent / "escape.py").exists()


def test_input_that_is_not_a_function_request_is_an_error_not_a_crash() -> None:
    for bad in (
        None,
        [],
        "x",
        {"function_name": "g", "function_code": "def f(): pass\n"},
        {"execution_type": "x"},
    ):
        out = function_worker.handler({"id": "r", "input": bad})
        assert out["success"] is False and out["error"], bad


@given(st.sampled_from(list(CudaVersion)))
def test_min_cuda_version_round_trips_through_the_spec(floor: CudaVersion) -> None:
    body = endpoint_body(
        {
            "name": "cuda",
            "gpuIds": "AMPERE_48",
            "minCudaVersion": floor.value,
            "template": {"imageName": "x/y:1"},
        }
    )
    spec, _handler = parse_spec(body)
    out = endpoint_out(EndpointOut.model_construct(id="ep-1", name="cuda", tenant="t", spec=spec))
    assert out["allowedCudaVersions"] == ""
    assert out["minCudaVersion"] == (None if floor is CudaVersion.V11_8 else floor.value)


@given(
    st.lists(
        st.sampled_from(["ADA_24", "AMPERE_80", "BLACKWELL_96", "BLACKWELL_180"]), min_size=1, unique=True
    )
)
def test_gpu_pools_scalar_lacks_are_left_out_unless_none_is_known(pools: list[str]) -> None:
    body = endpoint_body({"name": "g", "gpuIds": ",".join(pools), "template": {"imageName": "x/y:1"}})
    known = [p for p in pools if not p.startswith("BLACKWELL")]
    assert body["gpuIds"] == (",".join(known) if known else ",".join(pools))


def test_only_the_live_queue_images_get_the_executor() -> None:
    for image in (
        "runpod/tetra-rp:latest",
        "runpod/flash:py3.12-latest",
        "runpod/tetra-rp",
        "runpod/tetra-rp@sha256:ab",
    ):
        assert is_live_image(image), image
        body = endpoint_body({"name": "live", "template": {"imageName": image}})
        assert body["command"] == list(FUNCTION_WORKER_COMMAND)
    for image in ("runpod/tetra-rp-lb:latest", "me/runpod/tetra-rp:1", "example/infer:1", None, ""):
        assert not is_live_image(image), image
    assert "command" not in endpoint_body({"name": "img", "template": {"imageName": "example/infer:1"}})
