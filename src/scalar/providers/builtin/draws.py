"""Seeded randomness that does not depend on call order or on which process asks.

Every draw is made from a fresh ``random.Random`` seeded with a hash of the market's seed and the names
of what is drawn for (``("boot", node_id)``, ``("book", "8xH100", hour)``). The same question always
gets the same answer, whoever asks it and whenever.
"""

from __future__ import annotations

import hashlib
import random


def _digest(seed: int, parts: tuple[object, ...]) -> bytes:
    text = "\x1f".join([str(seed), *(str(part) for part in parts)])
    return hashlib.sha256(text.encode("utf-8")).digest()


def rng_for(seed: int, *parts: object) -> random.Random:
    """A ``random.Random`` seeded by ``(seed, *parts)``."""
    return random.Random(int.from_bytes(_digest(seed, parts)[:16], "big"))


def uniform_for(seed: int, *parts: object) -> float:
    """One uniform draw in [0, 1) for ``(seed, *parts)`` (cheaper than building a generator)."""
    return int.from_bytes(_digest(seed, parts)[:8], "big") / 2.0**64


def short_id(*parts: object, length: int = 16) -> str:
    """A stable hexadecimal id made from ``parts``."""
    text = "\x1f".join(str(part) for part in parts)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]
