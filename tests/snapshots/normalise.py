"""What varies between two runs of the same scenario, replaced by fixed text before comparing.

The scenario (``scenario.py``) runs on a fixed clock with a fixed lease holder, so almost everything is
deterministic already (job ids are seeded: ``scenario.SeededUuid``). What is not:

- the temporary directory the database lives in (``database`` in health answers);
- the test server's port (``http://127.0.0.1:PORT``);
- measured durations: ``step_latency``'s ``mean_s`` and ``max_s`` (how long the leader's steps took), in
  JSON and as ``scalar status`` prints them (``14.3 ms mean, 286.7 ms max``).

Each rule is a regular expression over the text (JSON or terminal output), so one normaliser serves the
API, the CLI and the dashboard.
"""

from __future__ import annotations

import json
import re
from typing import Any

PORT = re.compile(r"\bhttp://127\.0\.0\.1:\d+")
LATENCY_JSON = re.compile(r'"(mean_s|max_s)": [0-9.e-]+')
LATENCY_TEXT = re.compile(r"\b[0-9.]+ ms (mean|max)\b")


def normalise_text(text: str, *, tmp_dir: str | None = None) -> str:
    """``text`` with every varying part replaced (see the module docstring)."""
    if tmp_dir:
        text = text.replace(tmp_dir.rstrip("/"), "<tmp>")
    text = PORT.sub("http://127.0.0.1:PORT", text)
    text = LATENCY_JSON.sub(r'"\1": "<seconds>"', text)
    return LATENCY_TEXT.sub(r"<ms> ms \1", text)


def normalise_json(value: Any, *, tmp_dir: str | None = None) -> str:
    """A JSON value as stable text (sorted keys, two-space indent), normalised."""
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return normalise_text(text, tmp_dir=tmp_dir) + "\n"
