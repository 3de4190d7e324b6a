"""The concerns ``scalar.runtime.ControlPlane`` is made of, one module each (the facade: ``runtime/service.py``).

- ``core``: ``PlaneCore``, the shared state (store, market, leader, providers, live prices) and the
  process's life (open, start, stop, the leader and executor loops, health);
- ``jobs``: ``JobService``, submit, cancel, read, list, preview, explain, story;
- ``cluster``: ``ClusterService``, the store-backed views (nodes, blocks, costs, autoscaler, status);
- ``market``: ``MarketService``, orderbook, prices, provider states, quote, market view;
- ``access``: ``AccessService``, tokens, audit log, secret box, budgets.

Node agents (``runtime/agents.py``) and serverless endpoints (``runtime/endpoints/``) already had their own
services; the facade hands them out as they are.
"""
