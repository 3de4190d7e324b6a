"""A tetra-rp application as its users write it: a ``@remote`` function on a ``LiveServerless`` endpoint.
Run with the ``RUNPOD_*`` URLs pointed at Scalar; ``python tetra_app.py X`` deploys, calls ``square(X)``,
prints the answer and the endpoint's id as JSON, then undeploys (``undeploy`` skips the call)."""

import asyncio
import json
import sys

from tetra_rp import GpuGroup, LiveServerless, remote
from tetra_rp.core.resources import ResourceManager

config = LiveServerless(
    name="tetra-square",
    gpus=[GpuGroup.ADA_80_PRO],
    workersMax=1,
    env={"RUNPOD_SKIP_AUTO_SYSTEM_CHECKS": "true", "GREETING": "hello from the spec"},
)


@remote(resource_config=config, dependencies=["httpx"])
def square(x):
    import os

    print("computing", x)
    return {"square": x * x, "greeting": os.environ.get("GREETING"), "pod": os.environ.get("RUNPOD_POD_ID")}


@remote(resource_config=config, system_dependencies=["ffmpeg"])
def needs_ffmpeg():
    return "never runs"


async def main() -> None:
    manager = ResourceManager()
    out: dict = {}
    if sys.argv[1] != "undeploy":
        out["result"] = await square(int(sys.argv[1]))
        try:
            await needs_ffmpeg()
        except Exception as exc:
            out["system_dependencies_error"] = str(exc)
    found = manager.find_resources_by_name(config.name)
    out["endpoint_ids"] = [resource.id for _uid, resource in found]
    out["undeployed"] = [(await manager.undeploy_resource(uid))["success"] for uid, _r in found]
    print("RESULT " + json.dumps(out))


asyncio.run(main())
