"""The one JSON encoding the store writes: canonical (sorted keys, compact), strict (no NaN, no Decimal).

Event and action payloads are opaque to the store, but a restart replays them through the controller, so the
live step and the replay must see the same values. ``canonical`` returns what a payload looks like after a
round trip through the database; callers step the controller with that, never with the original object.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def dumps(value: Any) -> str:
    """Serialize ``value`` canonically. Raises ``TypeError``/``ValueError`` for non-JSON values
    (``Decimal``, ``datetime``, NaN): convert money with ``scalar.domain.money.to_json_number`` or to a
    string first, and times to ISO strings or seconds."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def loads(text: str | bytes) -> Any:
    return json.loads(text)


def canonical(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The payload as it reads back from the database (tuples become lists, keys sorted, int keys become
    strings). Raises ``TypeError`` for a payload that is not a JSON object."""
    if not isinstance(payload, Mapping):
        raise TypeError(f"a payload must be a JSON object (a dict), got {type(payload).__name__}")
    # First pass: JSON-native values (int keys become strings); second: sorted keys at every level.
    plain = json.loads(json.dumps(dict(payload), allow_nan=False))
    result = loads(dumps(plain))
    assert isinstance(result, dict)
    return result
