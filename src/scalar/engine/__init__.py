"""The controller: in-memory cluster state and ``step(now, events) -> actions``. Imports domain only.

Deterministic: the same config and the same ``(now, events)`` sequence give the same actions and state.
"""

from scalar.engine.actions import (
    Action,
    BuyCapacity,
    ReleaseBlock,
    ReleaseNodes,
    SellCapacity,
    StartWork,
    StopWork,
    WorkPlacement,
)
from scalar.engine.codec import action_from_dict, action_to_dict, event_from_dict, event_to_dict
from scalar.engine.config import ConfigError, ControllerConfig, ScaleGroupConfig, TierConfig
from scalar.engine.controller import Controller
from scalar.engine.events import (
    Event,
    JobCancelRequested,
    JobSpec,
    JobStarted,
    JobSubmitted,
    MarketBook,
    MarketObserved,
    NodeReported,
    OrderUpdated,
    SaleUpdated,
    Tick,
)
from scalar.engine.lifecycle import IllegalTransitionError, JobState, OrderStatus, SliceState
from scalar.engine.validation import validate_job_spec

__all__ = [
    "Action",
    "BuyCapacity",
    "ConfigError",
    "Controller",
    "ControllerConfig",
    "Event",
    "IllegalTransitionError",
    "JobCancelRequested",
    "JobSpec",
    "JobStarted",
    "JobState",
    "JobSubmitted",
    "MarketBook",
    "MarketObserved",
    "NodeReported",
    "OrderStatus",
    "OrderUpdated",
    "ReleaseBlock",
    "ReleaseNodes",
    "SaleUpdated",
    "ScaleGroupConfig",
    "SellCapacity",
    "SliceState",
    "StartWork",
    "StopWork",
    "Tick",
    "TierConfig",
    "WorkPlacement",
    "action_from_dict",
    "action_to_dict",
    "event_from_dict",
    "event_to_dict",
    "validate_job_spec",
]
