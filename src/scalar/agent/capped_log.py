"""An attempt's output as the agent ships it: at most ``cap`` bytes of ``output.log``, then, once the
attempt has ended, one line saying how much was dropped (``[agents] log_max_bytes_per_attempt``).

The file itself is the job's stdout and stderr as written; only what is shipped is capped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_LOG_MAX_BYTES = 64 * 1024 * 1024  # [agents] log_max_bytes_per_attempt


def truncation_note(cap: int, dropped: int) -> bytes:
    """The last line of a log cut at ``cap`` bytes."""
    return (
        f"\n[scalar: output truncated: this attempt's log stops at {cap} bytes "
        f"([agents] log_max_bytes_per_attempt); {dropped} more bytes were dropped]\n"
    ).encode()


@dataclass(frozen=True, slots=True)
class CappedLog:
    """``path`` shipped up to ``cap`` bytes (None: no cap); ``ended``: the attempt is over."""

    path: Path
    cap: int | None
    ended: bool

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def note(self) -> bytes:
        """The truncation note of an ended attempt whose output passed the cap (else empty)."""
        size = self.size()
        if self.cap is None or size <= self.cap or not self.ended:
            return b""
        return truncation_note(self.cap, size - self.cap)

    def length(self) -> int:
        """How many bytes there are to ship: at most the cap (while it runs), then the cap and the note."""
        size = self.size()
        if self.cap is None or size <= self.cap:
            return size
        return self.cap + len(self.note())

    def read(self, offset: int, limit: int) -> bytes:
        """What to ship from ``offset`` (at most ``limit`` bytes): the file up to the cap, then the note."""
        if offset >= self.length():
            return b""
        size = self.size()
        file_end = size if self.cap is None else min(size, self.cap)
        out = b""
        if offset < file_end:
            with open(self.path, "rb") as f:
                f.seek(offset)
                out = f.read(min(limit, file_end - offset))
        if len(out) < limit and offset + len(out) >= file_end:
            start = offset + len(out) - file_end
            out += self.note()[start : start + limit - len(out)]
        return out
