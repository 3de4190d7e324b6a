"""An ordinary RunPod client, unchanged: the endpoint id is its argument; the API key and the base URL
come from the environment (``RUNPOD_API_KEY``, ``RUNPOD_ENDPOINT_BASE_URL``). Prints the results as JSON."""

import json
import os
import sys

import runpod

runpod.api_key = os.environ["RUNPOD_API_KEY"]
endpoint = runpod.Endpoint(sys.argv[1])
result = endpoint.run_sync({"input": {"mode": "echo", "x": 5}}, timeout=120)
job = endpoint.run({"input": {"mode": "echo", "x": 6}})
print(json.dumps({"run_sync": result, "output": job.output(timeout=120), "status": job.status()}))
