"""Buying SFCompute capacity through the **nodes API** (``POST /v1/nodes``) so the nodes boot Scalar's agent.

Opt-in (``[providers.sfcompute] buy_via = "nodes"``; docs/providers.md). The v0 orders API has no field for a
startup hook; the nodes API's ``node-api_CreateNodesRequest`` has ``cloud_init_user_data`` (base64). Each
node of a block is created by its own request (``desired_count: 1``, ``names: [node id]``) because the user
data is one value per request while every node needs its own single-use join token, bound to that node id
(``scalar.providers.bootstrap``). Request fields, from SFCompute's published OpenAPI schema:
``desired_count, zone, any_zone, max_price_per_node_hour`` (integer **cents per node-hour**), ``start_at``,
``end_at`` (Unix seconds, ``end_at`` on the hour), ``node_type`` (``autoreserved|reserved``), ``names``,
``cloud_init_user_data``, ``image_id``, ``forward_443``.

The samples hold no response of ``POST /v1/nodes``: this reader expects the shape Scalar's tests fake,
designed from the request: ``{object: "list", data: [{object: "node", id, name, status, ...}]}``, and only
needs a node named as asked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import ROUND_CEILING, Decimal

from scalar.providers.base import ProviderError
from scalar.providers.bootstrap import AgentBootstrap, render_startup_script, user_data_b64
from scalar.providers.payload import Fields
from scalar.providers.sfcompute.pricing import GPUS_PER_NODE, iso_z

NODES_PATH = "/v1/nodes"
NODE_TYPES = ("autoreserved", "reserved")

#: ``join_token(node_id) -> token``: a fresh single-use join token bound to that node (made by the runtime,
#: which owns the agent tables; providers do not import the runtime).
JoinTokenFactory = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class NodesMode:
    """How to buy through the nodes API. ``agent`` is the bootstrap script's template (controller URL, Python,
    pip spec); its ``join_token`` is replaced per node by ``join_token(node_id)``."""

    join_token: JoinTokenFactory
    agent: AgentBootstrap
    image_id: str | None = None
    zone: str | None = None
    node_type: str = "autoreserved"

    def __post_init__(self) -> None:
        if self.node_type not in NODE_TYPES:
            raise ValueError(f"node_type must be one of {', '.join(NODE_TYPES)}, got {self.node_type!r}")
        if not self.agent.controller_url.startswith(("http://", "https://")):
            raise ValueError(f"the agents' controller URL must be http(s), got {self.agent.controller_url!r}")


def block_id_for(idempotency_key: str) -> str:
    """The block id of a nodes-API purchase, the same for the same key (a retried buy names the same nodes)."""
    return "sfn-" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:12]


def cents_per_node_hour(price_per_gpu_hour: Decimal) -> int:
    """$/GPU-hour as the nodes API's cap: integer cents per node-hour, rounded up ($2.00 -> 1600)."""
    cents = price_per_gpu_hour * 100 * GPUS_PER_NODE
    return int(cents.to_integral_value(rounding=ROUND_CEILING))


def create_body(
    mode: NodesMode, node_id: str, cap_cents: int, start: datetime, end: datetime, token: str
) -> dict[str, object]:
    """The ``POST /v1/nodes`` body of one node, its user data starting an agent with ``token``."""
    agent = replace(mode.agent, join_token=token, instance_id=node_id, contract_expires_at=iso_z(end))
    body: dict[str, object] = {
        "desired_count": 1,
        "any_zone": mode.zone is None,
        "max_price_per_node_hour": cap_cents,
        "start_at": int(start.timestamp()),
        "end_at": int(end.timestamp()),
        "node_type": mode.node_type,
        "names": [node_id],
        "cloud_init_user_data": user_data_b64(render_startup_script(agent)),
        "forward_443": False,
    }
    if mode.zone is not None:
        body["zone"] = mode.zone
    if mode.image_id is not None:
        body["image_id"] = mode.image_id
    return body


def created_node_id(provider: str, payload: object, name: str) -> str:
    """SFCompute's id of the node named ``name`` in a ``POST /v1/nodes`` answer."""
    answer = Fields.root(provider, f"POST {NODES_PATH}", payload)
    for node in answer.objects("data"):
        if node.text("name") == name:
            return node.text("id")
    raise ProviderError(provider, f"POST {NODES_PATH} answered no node named {name!r}", retryable=True)
