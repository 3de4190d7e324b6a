"""``NodeAgent``: register (or resume), then heartbeat, run what the controller wants, ship logs.

State directory layout::

    identity.json      node id, node token, controller URL, last heartbeat sequence number
    journal.json       the assignments started here (scalar.agent.runner)
    assignments/<id>/  spec.json, shim.pid, child.pid, output.log, exit.json
    jobs/<id>/         the job's private directory (its HOME and TMPDIR), owned by the job's uid

Every file is 0600 and every directory 0700 (``jobs/`` 0711 when jobs run under their own uid without a
sandbox, so each reaches its own directory without listing the others'). How jobs run (their uid, the
sandbox, their environment): ``scalar.agent.isolation``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalar import __version__
from scalar.agent import facts as facts_mod
from scalar.agent import isolation as iso_mod
from scalar.agent.capped_log import DEFAULT_LOG_MAX_BYTES
from scalar.agent.controller_client import ControllerClient, ControllerRefused, ControllerUnreachable
from scalar.agent.runner import Runner
from scalar.agent.shim import private_dir, write_json
from scalar.wire.agent import PROTOCOL

log = logging.getLogger(__name__)

LOG_CHUNK_BYTES = 256 * 1024
_EXPECTED = re.compile(r"expected_offset (\d+)")
TERMINAL = ("exited", "failed_to_start")
REMOVED_STATUS = 410  # the controller removed this node (`scalar node remove`): stop everything and exit
STOP_WAIT_S = 30.0  # on removal, how long to wait for the assignments to stop (their grace is 10 s)


class AgentRefused(Exception):
    """The controller refused this agent for good (bad join token, incompatible version): exit."""


@dataclass
class AgentOptions:
    controller: str
    state_dir: Path
    join_token: str | None = None
    fake_gpus: str | None = None
    hostname: str | None = None
    instance_id: str | None = None
    contract_expires_at: str | None = None
    heartbeat_s: float | None = None  # default: what the controller says
    version: str = __version__
    protocol: int = PROTOCOL
    # how jobs run (docs/security.md, "Jobs on a node"); resolved by ``isolation.resolve`` at start
    job_user: str | None = None  # None: per-tenant
    sandbox: str = "auto"
    uid_range: tuple[int, int] = iso_mod.DEFAULT_UID_RANGE
    hide: tuple[str, ...] = ()  # more paths jobs may not see (the controller's data directory)
    pass_env: tuple[str, ...] = ()  # names of the agent's variables passed to jobs
    log_max_bytes_per_attempt: int | None = DEFAULT_LOG_MAX_BYTES
    isolation: iso_mod.Isolation | None = None  # set by ``run_agent`` (default: same-user, no sandbox)


class NodeAgent:
    def __init__(self, options: AgentOptions) -> None:
        self.options = options
        self.state_dir = options.state_dir
        private_dir(self.state_dir)
        self.client = ControllerClient(options.controller)
        # Every assignment learns how to call back (an endpoint worker dials the controller) and which Python
        # runs scalar here (scalar.agent.endpoint_worker is started with it).
        self.runner = Runner(
            self.state_dir,
            base_env={
                **os.environ,
                "SCALAR_CONTROLLER_URL": options.controller,
                "SCALAR_PYTHON": sys.executable,
            },
            isolation=options.isolation,
            log_max_bytes=options.log_max_bytes_per_attempt,
        )
        self.node_id: str | None = None
        self.node_token: str | None = None
        self.seq = 0
        self.heartbeat_s = options.heartbeat_s or 2.0
        self.drain = False
        self.stopping = threading.Event()
        self._load_identity()

    # ---- identity --------------------------------------------------------------------------------------

    @property
    def identity_path(self) -> Path:
        return self.state_dir / "identity.json"

    def _load_identity(self) -> None:
        if self.identity_path.is_file():
            data = json.loads(self.identity_path.read_text())
            self.node_id = data.get("node_id")
            self.node_token = data.get("node_token")
            self.seq = int(data.get("seq") or 0)

    def _save_identity(self) -> None:
        write_json(
            self.identity_path,
            {
                "node_id": self.node_id,
                "node_token": self.node_token,
                "controller": self.options.controller,
                "seq": self.seq,
            },
        )

    def register(self) -> str:
        """Register with the join token, or, with an identity on disk, resume as that node."""
        o = self.options
        facts = facts_mod.gather(
            self.state_dir,
            o.fake_gpus,
            hostname=o.hostname,
            instance_id=o.instance_id,
            contract_expires_at=o.contract_expires_at,
        )
        self.runner.gpu_models = {str(g["uuid"]): str(g["model"]) for g in facts["gpus"] if g.get("model")}
        body: dict[str, Any] = {"version": o.version, "protocol": o.protocol, "facts": facts}
        if self.node_id and self.node_token:
            body.update(node_id=self.node_id, node_token=self.node_token)
        elif o.join_token:
            body["join_token"] = o.join_token
        else:
            raise AgentRefused(
                f"no join token and no identity in {self.state_dir}: pass --join-token (create one with "
                "`scalar join-token`)"
            )
        try:
            reply = self.client.register(body)
        except ControllerRefused as err:
            raise AgentRefused(f"the controller refused this agent: {err.detail}") from None
        self.node_id = str(reply["node_id"])
        self.node_token = str(reply["node_token"])
        if o.heartbeat_s is None:
            self.heartbeat_s = float(reply.get("heartbeat_s") or self.heartbeat_s)
        self._save_identity()
        log.info("registered as node %s", self.node_id)
        return self.node_id

    # ---- the loop ------------------------------------------------------------------------------------

    def run(self) -> None:
        """Until ``stop()``: register (retrying while the controller is unreachable), then heartbeat."""
        while not self.stopping.is_set():
            try:
                self.register()
                break
            except ControllerUnreachable as err:
                log.warning("controller unreachable (%s); retrying", err)
                self.stopping.wait(min(self.heartbeat_s, 2.0))
        while not self.stopping.is_set():
            try:
                self.beat()
            except ControllerUnreachable as err:
                log.warning("heartbeat failed (%s); retrying", err)
            except ControllerRefused as err:
                if err.status == 401:
                    raise AgentRefused(f"the controller no longer knows this node: {err.detail}") from None
                if err.status == REMOVED_STATUS:
                    self.retire(err.detail)
                    return
                log.warning("heartbeat refused: %s", err.detail)
            self.stopping.wait(self.heartbeat_s)

    def stop(self) -> None:
        self.stopping.set()

    def retire(self, why: str) -> None:
        """The node was removed: stop what still runs here (SIGTERM, SIGKILL after its grace period), ship
        the last of its output, and return (the agent exits 0)."""
        log.warning("this node was removed: %s; stopping its assignments and exiting", why)
        live = [e for e in self.runner.entries.values() if self.runner.report(e)["state"] not in TERMINAL]
        for entry in live:
            self.runner.stop(entry.assignment_id)
        deadline = time.monotonic() + STOP_WAIT_S
        while time.monotonic() < deadline and any(
            self.runner.report(e)["state"] not in TERMINAL for e in live
        ):
            self.runner.reap()
            time.sleep(0.1)
        self.runner.reap()
        try:
            self.ship_logs()
        except (ControllerUnreachable, ControllerRefused) as err:
            log.warning("could not ship the last output: %s", err)
        self.runner.save()
        log.info("node %s removed; agent stopped", self.node_id)

    def beat(self) -> dict[str, Any]:
        """One heartbeat: report, apply the desired state, ship logs, forget what the controller has."""
        assert self.node_id is not None and self.node_token is not None
        self.runner.reap()
        reports = self.runner.reports()
        self.seq += 1
        reply = self.client.heartbeat(
            {"node_id": self.node_id, "node_token": self.node_token, "seq": self.seq, "assignments": reports}
        )
        self._save_identity()
        self.drain = bool(reply.get("drain"))
        self.heartbeat_s = self.options.heartbeat_s or float(reply.get("heartbeat_s") or self.heartbeat_s)
        for assignment_id in reply.get("cancel") or []:
            self.runner.stop(str(assignment_id))
        if not self.drain:
            desired = list(reply.get("assignments") or [])
            # a GPU is free only once what ran on it has exited: an assignment the controller no longer
            # wants (cancelled, or a stale attempt after this node rejoined) may take its grace period to stop
            held = self.runner.gpus_held(keep={str(a["assignment_id"]) for a in desired})
            for assignment in desired:
                if self.runner.has(str(assignment["assignment_id"])):
                    continue
                busy = held & set(assignment.get("gpu_uuids") or [])
                if busy:
                    log.info(
                        "%s waits: GPUs %s are held by an assignment being stopped",
                        assignment["assignment_id"],
                        ",".join(sorted(busy)),
                    )
                    continue  # the controller sends it again with the next heartbeat
                log.info("starting %s", assignment["assignment_id"])
                self.runner.start(assignment)
        self.ship_logs()
        finished = {r["assignment_id"]: r for r in reports if r["state"] in TERMINAL}
        for aid, report in finished.items():
            entry = self.runner.entries.get(aid)
            if entry is not None and entry.shipped >= int(report.get("log_bytes") or 0):
                entry.acked = True  # the controller has its outcome and all of its output
                self.runner.remove_home(entry)
        self.runner.save()
        return reply

    def ship_logs(self) -> None:
        assert self.node_id is not None and self.node_token is not None
        for entry in list(self.runner.entries.values()):
            if entry.acked:
                continue
            if self.runner.log_bytes(entry) <= entry.shipped:
                continue
            while True:
                data = self.runner.read_log(entry, entry.shipped, LOG_CHUNK_BYTES)
                if not data:
                    break
                try:
                    entry.shipped = self.client.ship_log(
                        self.node_id, self.node_token, entry.assignment_id, entry.shipped, data
                    )
                except ControllerRefused as err:
                    match = _EXPECTED.search(err.detail)
                    if err.status == 409 and match:
                        entry.shipped = int(match.group(1))
                        continue
                    log.warning("log of %s refused: %s", entry.assignment_id, err.detail)
                    entry.acked = entry.acked or err.status == 404
                    break
            self.runner.save()


REFUSED = 3
BAD_ARGUMENTS = 2


def run_agent(options: AgentOptions) -> int:
    """Run until SIGTERM/SIGINT (0); 2 for a bad argument, 3 when the controller refuses this agent."""
    import os
    import shutil
    import signal
    import sys

    if options.join_token is None:
        options.join_token = os.environ.get("SCALAR_JOIN_TOKEN") or None
    wanted = options.fake_gpus or os.environ.get(facts_mod.FAKE_GPUS_ENV)
    if wanted:
        try:
            facts_mod.parse_fake_gpus(wanted)
        except facts_mod.FactsError as err:
            sys.stderr.write(f"error: --fake-gpus: {err}\n")
            return BAD_ARGUMENTS
    logging.basicConfig(level=logging.INFO, format="%(asctime)s agent %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    os.umask(0o077)  # every file the agent and its shims write is private (0600, directories 0700)
    try:
        isolation, notes = iso_mod.resolve(
            options.job_user,
            options.sandbox,
            options.uid_range,
            euid=os.geteuid(),
            bwrap=shutil.which("bwrap"),
            hidden=options.hide,
            pass_env=options.pass_env,
        )
    except iso_mod.IsolationError as err:
        sys.stderr.write(f"error: {err}\n")
        return BAD_ARGUMENTS
    options.isolation = isolation
    log.info("jobs run as: job_user = %s, sandbox = %s", isolation.job_user, isolation.sandbox)
    for note in notes:
        log.warning("%s", note)
    if isolation.per_tenant and isolation.refuse is None:
        import scalar

        probe = isolation.uid_range[0]  # any tenant uid: none owns these files
        for path in (os.path.realpath(sys.executable), os.path.dirname(os.path.realpath(scalar.__file__))):
            why = iso_mod.uid_cannot(path, probe, probe, os.R_OK | os.X_OK)
            if why is not None:
                log.warning("jobs that run SCALAR_PYTHON (endpoint workers) will fail: %s", why)
    node = NodeAgent(options)
    signal.signal(signal.SIGTERM, lambda *_: node.stop())
    signal.signal(signal.SIGINT, lambda *_: node.stop())
    try:
        node.run()
    except AgentRefused as err:
        sys.stderr.write(f"error: {err}\n")
        return REFUSED
    finally:
        node.client.close()
    return 0
