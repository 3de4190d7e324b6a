"""The built-in market, Scalar's embedded default seller (implementation in ``scalar.providers.builtin``).

```python
from scalar.providers.sim import BuiltinMarket, MarketConfig

market = BuiltinMarket("sqlite:///.scalar/market.db", MarketConfig(seed=7, time_scale=60))
providers = market.providers()          # {"sfcompute": Provider, "prime": Provider, ...}
offers = [o for p in providers.values() for o in p.list_offers(now)]
order = providers[offer.provider].buy(request, idempotency_key, now)
events, cursor = providers["sfcompute"].events_since(cursor, now)
```

See ``docs/decisions/builtin-market.md``.
"""

from scalar.providers.builtin import (
    BOOK_SHAPES,
    BuiltinMarket,
    MarketConfig,
    MarketConfigError,
    MarketProvider,
)

__all__ = ["BOOK_SHAPES", "BuiltinMarket", "MarketConfig", "MarketConfigError", "MarketProvider"]
