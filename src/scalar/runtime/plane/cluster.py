"""``ClusterService``: the cluster as any process reads it from the store (and from the leader's memory
when this process leads): a job's explanation, nodes, blocks (contracts), the autoscaler's status, costs,
the metrics snapshot and the one-call status. Typed answers (their models in ``wire/views.py``): the
explanation, the status, the costs, the nodes, the blocks and the autoscaler's status.
The views themselves are built in ``runtime/views.py`` and
``runtime/views_market.py``; this module only hands them the store, the leader and the clock.
"""

from __future__ import annotations

from scalar.runtime import views_market
from scalar.runtime.plane.core import PlaneCore
from scalar.runtime.views import ClusterViews
from scalar.wire.views import AutoscalerOut, BlocksOut, CostsOut, ExplanationOut, NodesOut, StatusOut


class ClusterService:
    """The cluster views of one control-plane process, over its ``PlaneCore``."""

    def __init__(self, core: PlaneCore) -> None:
        self._core = core

    def views(self) -> ClusterViews:
        store, leader = self._core.opened()
        return ClusterViews(store, leader, self._core.settings, self._core.clock)

    def explain(self, job_id: str) -> ExplanationOut | None:
        """Why the job is where it is, as ``GET /jobs/{id}/explain`` sends it; ``None`` for an unknown job."""
        answer = self.views().explain(job_id)
        return None if answer is None else ExplanationOut.model_validate(answer)

    def nodes(
        self,
        include_gone: bool = False,
        limit: int | None = None,
        after: str | None = None,
        descending: bool = False,
    ) -> NodesOut:
        """A page of the slot map with the fleet's totals, as ``GET /nodes`` sends it."""
        return NodesOut.model_validate(self.views().nodes(include_gone, limit, after, descending))

    def blocks(
        self,
        status: str | None = None,
        limit: int | None = None,
        after: str | None = None,
        descending: bool = False,
    ) -> BlocksOut:
        """A page of contracts with the totals of every block in ``status``, as ``GET /blocks`` sends it."""
        return BlocksOut.model_validate(self.views().blocks(status, limit, after, descending))

    def autoscaler_status(self, all_groups: bool = False) -> AutoscalerOut:
        """Routing, unmet demand, slices per group, purchases and actions, as ``GET /autoscaler/status``
        sends it."""
        return AutoscalerOut.model_validate(views_market.autoscaler_status(self.views(), all_groups))

    def costs(self, points: int = 24) -> CostsOut:
        """Spend by provider, block and tenant and over time, as ``GET /costs`` sends it."""
        return CostsOut.model_validate(views_market.costs(self.views(), points))

    def metrics_snapshot(self) -> views_market.MetricsSnapshot:
        return views_market.metrics_snapshot(self.views())

    def status(self) -> StatusOut:
        """``scalar status``'s one answer as its model (``wire/views.py``), the one ``GET /status`` sends."""
        return StatusOut.model_validate(views_market.status_summary(self.views(), self._core.health()))
