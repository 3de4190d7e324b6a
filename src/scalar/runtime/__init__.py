"""Drives the engine in real time: loops, the leader lease, the action executor.

``ControlPlane(settings).start()`` runs one control-plane process; see docs/decisions/runtime.md. The
facade (``service.py``) delegates each concern to its module in ``runtime/plane/`` (docs/architecture.md).
"""

from scalar.runtime.service import ControlPlane, JobRejectedError
from scalar.runtime.settings import Settings, SettingsError, load_settings

__all__ = ["ControlPlane", "JobRejectedError", "Settings", "SettingsError", "load_settings"]
