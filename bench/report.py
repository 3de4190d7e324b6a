"""What every benchmark writes the same way: the machine line, its own marked section of BENCHMARKS.md,
and its plots (matplotlib, headless, one size and resolution)."""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

DPI = 110  # every plot's resolution: a figure of W x H inches is a W*DPI x H*DPI pixel PNG


def machine(with_numpy: bool = False) -> str:
    """``CPU model, N cores, OS release, Python X.Y.Z`` (and numpy's version when the numbers depend on it)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    text = f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}"
    if with_numpy:
        import numpy

        text += f", numpy {numpy.__version__}"
    return text


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def replace_section(path: Path, block: str, start: str, end: str) -> None:
    """Put ``block`` (which starts with ``start`` and ends with ``end``) in place of the text between those
    markers in ``path``, or append it when they are absent; everything else is kept."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if start in text and end in text and text.index(start) < text.index(end):
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


@contextmanager
def figure(path: Path, size: tuple[float, float] = (8, 4.5)) -> Iterator[Any]:
    """The axes of a new ``size``-inch figure, saved to ``path`` as a PNG (``DPI``) when the block ends.

    matplotlib (the ``bench`` extra) is imported here, on the headless Agg backend, so a benchmark that
    draws nothing does not need it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size)
    try:
        yield ax
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)
