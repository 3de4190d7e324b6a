"""The built-in market: an embedded seller for every provider Scalar knows (see ``scalar.providers.sim``)."""

from scalar.providers.builtin.config import BOOK_SHAPES, MarketConfig, MarketConfigError
from scalar.providers.builtin.market import BuiltinMarket, MarketProvider

__all__ = ["BOOK_SHAPES", "BuiltinMarket", "MarketConfig", "MarketConfigError", "MarketProvider"]
