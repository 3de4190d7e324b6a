"""SFCompute: the public orderbook, quotes and orders (see ``client`` for the endpoints covered).

```python
from scalar.providers.sfcompute import SFComputeProvider

sf = SFComputeProvider.from_env(os.environ)       # SCALAR_SFCOMPUTE_API_KEY / _BASE_URL
book = sf.orderbook("8xH100", now)                  # asks and bids in $/GPU-hour, GPUs
order = sf.buy(request, idempotency_key=action_id, now=now)
```
"""

from scalar.providers.sfcompute.client import DEFAULT_BASE_URL, SFComputeProvider
from scalar.providers.sfcompute.orders import node_ids, request_of, to_order
from scalar.providers.sfcompute.pricing import (
    GPUS_PER_NODE,
    SHAPES,
    TICKERS,
    Shape,
    ceil_to_hour,
    order_total_cents,
    order_window,
    price_per_gpu_hour_from_cents,
)
from scalar.providers.sfcompute.wire import SFComputeOrder, SFComputeQuote

__all__ = [
    "DEFAULT_BASE_URL",
    "GPUS_PER_NODE",
    "SHAPES",
    "TICKERS",
    "SFComputeOrder",
    "SFComputeProvider",
    "SFComputeQuote",
    "Shape",
    "ceil_to_hour",
    "node_ids",
    "order_total_cents",
    "order_window",
    "price_per_gpu_hour_from_cents",
    "request_of",
    "to_order",
]
