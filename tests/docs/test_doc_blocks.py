"""The shell examples of README.md and docs/*.md run as written, so the docs cannot drift from the product.

A fenced ``sh`` block right after the line ``<!-- doc-test -->`` (or ``<!-- doc-test expect: "TEXT" -->``:
its output must also contain TEXT) is run, in document order, against one real ``scalar up --demo
--time-scale 60`` (what ``make run`` starts: tokens required, SQLite, the built-in market, the demo
workload and a local agent with fake GPUs; ``examples/`` on its Python path) started in a temporary
directory laid out like a checkout: ``.scalar/admin.token`` is the server's token, ``.venv/bin/scalar``
is the CLI, ``examples/`` is the repository's. Each block runs under ``bash -e -o pipefail`` with ``y``
answers on stdin (a reader confirms ``scalar submit``'s purchase preview); every
``curl`` in it also fails on an HTTP error (``--fail-with-body``), so a missing ``Authorization`` header
or a wrong field fails the test. ``127.0.0.1:8000`` and ``localhost:8000`` become the server's port, and
the placeholders a reader replaces by hand are filled from earlier blocks' output: ``JOB`` (and the
example id ``job-20250701T120000-6c886e``) with the last job id printed, ``<id>`` with the last
endpoint id. Blocks that start servers (``make run``, ``scalar up``) or use SSH are never marked.

Besides: every ``curl`` to the server anywhere in the docs sends the token (the API refuses it otherwise).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

MARKER = re.compile(r'<!-- doc-test(?: expect: "(?P<expect>[^"]+)")? -->')
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FORBIDDEN = re.compile(r"\bmake run\b|\bscalar up\b|\bssh\b|\bnode add\b|\bscalar agent\b")
SERVER = re.compile(r"(?:http://)?(?:127\.0\.0\.1|localhost):8000")
JOB_ID = re.compile(r"\bjob-\d{8}T\d{6}-[0-9a-f]{6,}\b")
ENDPOINT_ID = re.compile(r"\bep-[0-9A-Za-z]+(?:-[0-9a-f]+)?\b")
URL = re.compile(r"API\s+(http://127\.0\.0\.1:\d+)")
PUBLIC = re.compile(r":8000/(?:healthz|openapi\.json|docs)\b")  # served without a token
BLOCK_TIMEOUT_S = 120


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    text: str
    expect: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def marked_blocks(path: Path) -> list[Block]:
    """The fenced shell blocks right after a ``<!-- doc-test -->`` line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    for i, line in enumerate(lines):
        marker = MARKER.fullmatch(line.strip())
        if marker is None:
            continue
        fence = lines[i + 1].strip() if i + 1 < len(lines) else ""
        assert fence in {"```sh", "```bash"}, (
            f"{path.name}:{i + 1}: a doc-test marker must precede a ```sh block"
        )
        end = next(j for j in range(i + 2, len(lines)) if lines[j].strip() == "```")
        blocks.append(Block(path, i + 3, "\n".join(lines[i + 2 : end]), marker.group("expect")))
    return blocks


def all_blocks() -> list[Block]:
    return [block for path in DOCS for block in marked_blocks(path)]


def curl_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Each ``curl`` command to the server (continuation lines joined), with its line number."""
    lines = path.read_text(encoding="utf-8").splitlines()
    fenced = False
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith("```"):
            fenced = not fenced
        if not fenced:
            i += 1
            continue
        start, command = i, lines[i]
        while command.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command.rstrip()[:-1] + " " + lines[i]
        if re.search(r"\bcurl\b", command) and SERVER.search(command):
            yield start + 1, command
        i += 1


def test_marked_blocks_exist_and_never_start_servers() -> None:
    blocks = all_blocks()
    files = {b.path.name for b in blocks}
    assert {"README.md", "api.md", "endpoints.md"} <= files, files
    for block in blocks:
        assert not FORBIDDEN.search(block.text), f"{block.where}: a doc-test block must not start servers"


def test_every_curl_to_the_server_sends_the_token() -> None:
    missing = [
        f"{path.relative_to(REPO)}:{line}: {command.strip()}"
        for path in DOCS
        for line, command in curl_lines(path)
        if "Authorization" not in command and not PUBLIC.search(command)
    ]
    assert not missing, "curl without 'Authorization: Bearer ...' (the API answers 401):\n" + "\n".join(
        missing
    )


class Server:
    """``scalar up`` in ``home``, as a reader runs it from a checkout."""

    def __init__(self, home: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCALAR_")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "examples"), env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "scalar",
                "up",
                "--port",
                "0",
                "--demo",
                "--time-scale",
                "60",
                "--seed",
                "7",
            ],
            cwd=home,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()  # it prints every move: keep reading
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and self.proc.poll() is None:
            found = URL.search("".join(self.lines))
            if found:
                self.url = found.group(1)
                return
            time.sleep(0.05)
        self.stop()
        raise AssertionError("scalar up printed no URL:\n" + "".join(self.lines))

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    home = tmp_path_factory.mktemp("reader")
    (home / ".venv").mkdir()
    (home / ".venv" / "bin").symlink_to(Path(sys.executable).parent)
    (home / "examples").symlink_to(REPO / "examples")
    server = Server(home)
    try:
        assert (home / ".scalar" / "admin.token").is_file(), "scalar up saves its admin token"
        yield home, server.url
    finally:
        server.stop()


def _prepare(text: str, url: str, seen: dict[str, str]) -> str:
    port = url.rsplit(":", 1)[1]
    text = SERVER.sub(lambda m: m.group(0).replace("8000", port), text)
    text = re.sub(r"\bcurl\b", "curl --fail-with-body --show-error", text)
    if "job" in seen:
        text = re.sub(r"\bJOB\b", seen["job"], text)
        text = text.replace("job-20250701T120000-6c886e", seen["job"])
    if "endpoint" in seen:
        text = text.replace("<id>", seen["endpoint"])
    return text


def commands(text: str) -> list[str]:
    """The block's commands: one per line, unless a backslash or an open quote continues it."""
    found: list[str] = []
    current = ""
    for line in text.splitlines():
        current += line + "\n"
        if line.rstrip().endswith("\\"):
            continue
        try:
            words = shlex.split(current, comments=True)
        except ValueError:  # an open quote: the command goes on
            continue
        if words:
            found.append(current)
        current = ""
    assert not current.strip(), f"an unfinished command: {current}"
    return found


def run(
    command: str, block: Block, cwd: Path, env: dict[str, str], seen: dict[str, str], took: list[str]
) -> str:
    """Run one command of ``block`` (placeholders filled from what ran before); its output."""
    script = _prepare(command, env["SCALAR_SERVER"], seen)
    for placeholder in ("JOB", "<id>"):
        assert not re.search(rf"(?<![\w-]){re.escape(placeholder)}(?![\w-])", script), (
            f"{block.where}: {placeholder} is used before any command printed one"
        )
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        input="y\n" * 20,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
    )
    output = done.stdout + done.stderr
    took.append(f"{block.where}: {time.monotonic() - started:.1f} s  {command.strip()[:70]}")
    assert done.returncode == 0, f"{block.where} failed ({done.returncode}):\n{script}\n---\n{output}"
    jobs = JOB_ID.findall(output)
    if jobs:
        seen["job"] = jobs[-1]
    endpoints = ENDPOINT_ID.findall(output)
    if endpoints:
        seen["endpoint"] = endpoints[-1]
    return output


@pytest.mark.slow  # a dozen CLI processes: ~2 s of CPU each
def test_the_marked_blocks_run_against_scalar_up(home: tuple[Path, str]) -> None:
    cwd, url = home
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALAR_")}
    env["PATH"] = f"{cwd / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["SCALAR_SERVER"] = url
    env["COLUMNS"] = "200"
    seen: dict[str, str] = {}
    took: list[str] = []
    blocks = all_blocks()
    assert len(blocks) >= 5
    for block in blocks:
        output = ""
        for command in commands(block.text):
            output += run(command, block, cwd, env, seen, took)
        if block.expect is not None:
            assert block.expect in output, f"{block.where}: no {block.expect!r} in:\n{output}"
    print("\n".join(took))
