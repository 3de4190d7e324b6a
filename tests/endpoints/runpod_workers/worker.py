"""An ordinary RunPod serverless worker, as it would run on RunPod: it only calls
``runpod.serverless.start``. ``WORKER_KIND`` (from the endpoint spec's env) picks its handler."""

import asyncio
import os

import runpod


def handler(job):
    inp = job["input"]
    mode = inp.get("mode")
    if mode == "error":
        return {"error": f"bad input {inp.get('x')}"}
    if mode == "raise":
        raise ValueError("boom")
    if mode == "die":
        os._exit(9)
    if mode == "refresh":  # RunPod's refresh_worker: this worker's process is replaced after the job
        return {"refresh_worker": True, "pid": os.getpid()}
    return {
        "pid": os.getpid(),
        "square": inp["x"] ** 2,
        "skip_checks": os.environ.get("RUNPOD_SKIP_AUTO_SYSTEM_CHECKS"),
        "pod": os.environ.get("RUNPOD_POD_ID"),
        "endpoint": os.environ.get("RUNPOD_ENDPOINT_ID"),
        "cwd": os.getcwd(),
    }


def count(job):
    for i in range(job["input"]["n"]):
        yield {"i": i}


async def async_handler(job):
    if job["input"].get("mode") == "die":
        os._exit(9)
    await asyncio.sleep(0.01)
    return {"async": job["input"]}


HANDLERS = {"sync": handler, "gen": count, "async": async_handler}

runpod.serverless.start(
    {"handler": HANDLERS[os.environ.get("WORKER_KIND", "sync")], "return_aggregate_stream": True}
)
