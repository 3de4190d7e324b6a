"""Linux network namespaces for agent tests: each agent on its own "machine" with its own link.

``network(n)`` creates, in the root namespace, a bridge with the controller's address (``10.200.X.1/24``)
and ``n`` namespaces, each joined to the bridge by a veth pair (``10.200.X.(i+2)/24`` inside). The
controller listens on the bridge address only; an agent started with ``Host.agent(...)`` runs under
``ip netns exec`` and reaches the controller over its veth, and nothing else (not even the root namespace's
loopback). ``Host.cut()`` takes the host side of its veth down (the node drops off the network, its
processes keep running), ``Host.restore()`` brings it back.

Names carry this process's pid in hex (``scl<pid>g|n|h|p<counter>_<i>``, at most 15 characters, the limit
of a link name), so parallel xdist workers and concurrent pytest sessions never clash, and the leftovers of
a crashed run (pid no longer alive) are removed before a new network is made. The subnet's third octet is
chosen under a file lock among those no address or route of the machine uses. Teardown always stops the
agents started through the network, kills whatever still runs in its namespaces (all started by this test),
and removes the namespaces, veths and bridge, even when the test failed.

Needs root and iproute2 (``ip netns``); without them the test fails with the reason, it is not skipped.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.agent.harness import AgentProcess, Clock, Controller, controller, kill_tree_of
from tests.dbfixtures import pid_alive

PREFIX = "scl"
LOCK_PATH = Path("/tmp/scalar-netns.lock")
_NAME = re.compile(rf"^{PREFIX}([0-9a-f]+)[gnhp][0-9a-f]+(_[0-9a-f]+)?$")
_counter = itertools.count()
_ours: set[str] = set()  # names this process created and has not removed yet


def ip(*args: str, check: bool = True) -> str:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def require_netns() -> None:
    """Fail (not skip) with what is missing: these tests are part of CI, which runs them as root."""
    if shutil.which("ip") is None:
        pytest.fail("network namespace tests need iproute2 (`ip`): apt-get install iproute2")
    if os.geteuid() != 0:
        pytest.fail("network namespace tests need root (`ip netns add` and veth pairs); run pytest as root")
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.fail(f"`ip netns` does not work on this machine: {probe.stderr.strip()}")


def _leftover(name: str) -> bool:
    match = _NAME.match(name)
    if match is None or name in _ours:
        return False
    pid = int(match.group(1), 16)
    return pid == os.getpid() or not pid_alive(pid)  # same pid, not ours: a dead run's, pid reused


def remove_leftovers() -> None:
    """Remove namespaces and links of earlier runs that died without their teardown."""
    for line in ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        if _leftover(name):
            ip("netns", "del", name, check=False)
    for line in ip("-o", "link", "show", check=False).splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            name = parts[1].strip().split("@")[0]
            if _leftover(name):
                ip("link", "del", name, check=False)


def _free_octet(start: int) -> int:
    """A third octet X whose 10.200.X.0/24 no address or route of this machine touches."""
    used = ip("-4", "-o", "addr", "show", check=False) + ip(
        "-4", "route", "show", "table", "all", check=False
    )
    taken = {int(m) for m in re.findall(r"\b10\.200\.(\d+)\.", used)}
    for step in range(254):
        octet = (start + step) % 254 + 1
        if octet not in taken:
            return octet
    raise RuntimeError("no free 10.200.X.0/24 subnet left for a test network")


@dataclass
class NetnsAgent(AgentProcess):
    """A ``python -m scalar.agent`` process inside a network namespace."""

    netns: str = ""

    def start(self) -> NetnsAgent:
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, sys.executable, "-m", "scalar.agent", *self.args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "SCALAR_AGENT_NO_CGROUPS": "", **self.env},
        )
        log.close()
        return self


@dataclass
class Host:
    """One namespace ("machine"): its name, its address, and the host side of its link."""

    index: int
    netns: str
    host_veth: str
    address: str
    agents: list[NetnsAgent] = field(default_factory=list)

    def cut(self) -> None:
        ip("link", "set", self.host_veth, "down")

    def restore(self) -> None:
        ip("link", "set", self.host_veth, "up")

    def agent(self, url: str, token: str | None, state_dir: Path, fake_gpus: str, *extra: str) -> NetnsAgent:
        state_dir.mkdir(parents=True, exist_ok=True)
        args = ["--controller", url, "--state-dir", str(state_dir), "--fake-gpus", fake_gpus]
        args += ["--hostname", self.netns, *extra]
        if token is not None:
            args += ["--join-token", token]
        process = NetnsAgent(state_dir, args, state_dir.parent / f"{state_dir.name}.log", netns=self.netns)
        self.agents.append(process)
        return process

    def pids(self) -> list[int]:
        return [int(p) for p in ip("netns", "pids", self.netns, check=False).split() if p.isdigit()]


@dataclass
class Network:
    bridge: str
    address: str  # the controller's, on the bridge
    hosts: list[Host]


@contextmanager
def network(count: int) -> Iterator[Network]:
    """``count`` namespaces on one bridge; everything is removed on exit, whatever happened."""
    require_netns()
    tag = f"{PREFIX}{os.getpid():x}"
    n = next(_counter)
    assert count <= 250
    names_ns: list[str] = []
    names_link: list[str] = []
    hosts: list[Host] = []
    failed = False
    try:
        LOCK_PATH.touch(exist_ok=True)
        with open(LOCK_PATH) as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two runs must not pick the same subnet
            remove_leftovers()
            octet = _free_octet(os.getpid() + 17 * n)
            bridge = f"{tag}g{n:x}"
            _ours.add(bridge)
            names_link.append(bridge)
            ip("link", "add", bridge, "type", "bridge")
            ip("addr", "add", f"10.200.{octet}.1/24", "dev", bridge)
            ip("link", "set", bridge, "up")
        for i in range(count):
            ns, host_veth, peer = (f"{tag}{kind}{n:x}_{i:x}" for kind in "nhp")
            _ours.update((ns, host_veth, peer))
            names_ns.append(ns)
            ip("netns", "add", ns)
            names_link.append(host_veth)
            ip("link", "add", host_veth, "type", "veth", "peer", "name", peer)
            ip("link", "set", peer, "netns", ns)
            ip("link", "set", host_veth, "master", bridge)
            ip("link", "set", host_veth, "up")
            address = f"10.200.{octet}.{i + 2}"
            ip("-n", ns, "addr", "add", f"{address}/24", "dev", peer)
            ip("-n", ns, "link", "set", peer, "up")
            ip("-n", ns, "link", "set", "lo", "up")
            hosts.append(Host(i, ns, host_veth, address))
        yield Network(bridge, f"10.200.{octet}.1", hosts)
    except BaseException:
        failed = True
        raise
    finally:
        errors: list[str] = []
        for host in hosts:
            for process in host.agents:
                with contextlib.suppress(Exception):
                    process.stop()
                kill_tree_of(process.state_dir)
            for pid in host.pids():  # anything else still in the namespace was started by this test
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for link in reversed(names_link):  # host veths first (each takes its peer along), then the bridge
            try:
                ip("link", "del", link)
            except RuntimeError as err:
                if "Cannot find device" not in str(err):
                    errors.append(str(err))
            _ours.discard(link)
        for ns in names_ns:
            try:
                ip("netns", "del", ns)
            except RuntimeError as err:
                errors.append(str(err))
            _ours.discard(ns)
        _ours.difference_update(f"{tag}p{n:x}_{i:x}" for i in range(count))
        if errors:
            message = "test network teardown: " + "; ".join(errors)
            if not failed:  # do not hide the test's own failure behind this one
                raise RuntimeError(message)
            sys.stderr.write(message + "\n")


def controller_on(
    address: str, database_url: str, data_dir: Path, clock: Clock | None = None, **overrides: Any
) -> AbstractContextManager[Controller]:
    """``tests.agent.harness.controller``, served on ``address`` (the bridge) instead of loopback."""
    return controller(database_url, data_dir, clock, bind=address, **overrides)
