"""A small Kubernetes API server on loopback for the Kubernetes backend's tests: namespaced pods, for real.

It speaks the API's wire format (``/api/v1/namespaces/{ns}/pods``): create, get, list (``labelSelector``),
watch (``?watch=true``: chunked JSON lines of ``{type, object}``, replayed from ``resourceVersion``), delete
and log, with bearer-token auth and the API's ``Status`` errors (``Unauthorized``, ``Forbidden``,
``NotFound``, ``AlreadyExists``, ``Invalid``, ``TooManyRequests``...). The official ``kubernetes`` client
talks to it unchanged.

Its "kubelet" runs each pod's container command as a local subprocess (the container's ``env`` over this
process's environment, which stands in for the image's; a fresh directory as the working directory, standing
in for the pod's emptyDir), reports Pending/Running/Succeeded/Failed with exit codes, restarts per
``restartPolicy`` (with ``restartCount``, ``lastState`` and ``CrashLoopBackOff``), captures the output as
the pod's log, and on delete stops every process the container started (found by a marker in their
environment, as a container's cgroup would hold them): SIGTERM, then SIGKILL after the grace period.
An image listed in ``unpullable`` never starts (``ErrImagePull``, then ``ImagePullBackOff``).

Not covered: scheduling on resources (every pod is scheduled at once), images, volumes beyond a working
directory, ``valueFrom`` env (refused as ``CreateContainerConfigError``), other resource kinds.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

MARKER = "FAKE_K8S_POD_UID"
NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods(?:/([^/]+))?(?:/(log))?/?$")


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_object(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class ApiStatus(Exception):
    def __init__(self, code: int, reason: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.body = status_object(code, reason, message, **details)
        self.code = code


def selector_matches(selector: str, labels: dict[str, str]) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def marked_pids(uid: str) -> list[int]:
    """Every process whose environment carries this pod's marker (the container's processes)."""
    needle = f"{MARKER}={uid}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            pids.append(int(entry.name))
    return pids


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@dataclass
class FakePod:
    obj: dict[str, Any]
    directory: Path
    proc: subprocess.Popen[bytes] | None = None
    runs: int = 0
    deleting: bool = False
    thread: threading.Thread | None = None
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def uid(self) -> str:
        return str(self.obj["metadata"]["uid"])

    @property
    def container(self) -> dict[str, Any]:
        return dict(self.obj["spec"]["containers"][0])

    def log_path(self, run: int | None = None) -> Path:
        return self.directory / f"run-{self.runs if run is None else run}.log"


class FakeKubernetes:
    """The API server and its kubelet. ``url`` once started; ``kubeconfig()`` for the client."""

    def __init__(
        self,
        workdir: Path,
        token: str = "k8s-test-token",
        namespaces: tuple[str, ...] = ("scalar",),
        unpullable: tuple[str, ...] = (),
        forbidden_namespaces: tuple[str, ...] = (),
        max_grace_s: float = 5.0,
    ) -> None:
        self.workdir = workdir
        self.token = token
        self.namespaces = set(namespaces)
        self.forbidden = set(forbidden_namespaces)
        self.unpullable = set(unpullable)
        self.max_grace_s = max_grace_s
        self.pods: dict[tuple[str, str], FakePod] = {}
        self.history: list[tuple[int, str, str, dict[str, Any]]] = []  # (rv, type, namespace, pod)
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status)
        self.fail_next: list[int] = []  # HTTP codes to answer the next requests with (429, 500...)
        self._version = 0
        self._changed = threading.Condition()
        self._closing = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self.url = ""

    # ---- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> FakeKubernetes:
        fake = self

        class Handler(_Handler):
            server_fake = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="fake-k8s", daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def close(self) -> None:
        self._closing.set()
        with self._changed:
            self._changed.notify_all()
        for pod in list(self.pods.values()):
            pod.stop.set()
            self._kill_container(pod, grace_s=0.5)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def kubeconfig(self, token: str | None = None, namespace: str = "scalar") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "scalar", "user": {"token": self.token if token is None else token}}],
            "contexts": [
                {"name": "fake", "context": {"cluster": "fake", "user": "scalar", "namespace": namespace}}
            ],
            "current-context": "fake",
        }

    # ---- state -----------------------------------------------------------------------------------------

    def _record(self, kind: str, namespace: str, pod: dict[str, Any]) -> None:
        """Bump the resource version, store the event for watchers (call with ``_changed`` held)."""
        self._version += 1
        pod["metadata"]["resourceVersion"] = str(self._version)
        self.history.append((self._version, kind, namespace, copy.deepcopy(pod)))
        self._changed.notify_all()

    def _update(self, pod: FakePod, status: dict[str, Any]) -> None:
        with self._changed:
            if (pod.obj["metadata"]["namespace"], pod.obj["metadata"]["name"]) not in self.pods:
                return
            pod.obj["status"] = status
            self._record("MODIFIED", pod.obj["metadata"]["namespace"], pod.obj)

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._changed:
            found = self.pods.get((namespace, name))
            return None if found is None else copy.deepcopy(found.obj)

    def processes(self, namespace: str, name: str) -> list[int]:
        found = self.pods.get((namespace, name))
        return [] if found is None else [p for p in marked_pids(found.uid) if alive(p)]

    # ---- the API ---------------------------------------------------------------------------------------

    def _namespace(self, namespace: str) -> None:
        if namespace in self.forbidden:
            raise ApiStatus(
                403,
                "Forbidden",
                f'pods is forbidden: User "scalar" cannot list resource "pods" in API group "" in the '
                f'namespace "{namespace}"',
                kind="pods",
            )
        if namespace not in self.namespaces:
            raise ApiStatus(
                404, "NotFound", f'namespaces "{namespace}" not found', name=namespace, kind="namespaces"
            )

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self._namespace(namespace)
        if body.get("kind", "Pod") != "Pod" or body.get("apiVersion", "v1") != "v1":
            raise ApiStatus(400, "BadRequest", f"the body is a {body.get('kind')}, not a v1 Pod")
        meta = body.get("metadata") or {}
        name = str(meta.get("name") or "")
        if meta.get("namespace") not in (None, namespace):
            raise ApiStatus(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request",
            )
        causes = []
        if not name or len(name) > 253 or not NAME.match(name):
            causes.append(
                (
                    "metadata.name",
                    f"Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'",
                )
            )
        containers = (body.get("spec") or {}).get("containers") or []
        if not containers:
            causes.append(("spec.containers", "Required value"))
        for i, c in enumerate(containers):
            for key in ("name", "image"):
                if not c.get(key):
                    causes.append((f"spec.containers[{i}].{key}", "Required value"))
        if causes:
            message = f'Pod "{name}" is invalid: ' + ", ".join(f"{f}: {m}" for f, m in causes)
            raise ApiStatus(
                422,
                "Invalid",
                message,
                name=name,
                kind="Pod",
                causes=[{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes],
            )
        with self._changed:
            if (namespace, name) in self.pods:
                raise ApiStatus(409, "AlreadyExists", f'pods "{name}" already exists', name=name, kind="pods")
            obj = copy.deepcopy(body)
            obj.update(apiVersion="v1", kind="Pod")
            obj["metadata"] = {
                **meta,
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now_iso(),
            }
            obj["spec"].setdefault("restartPolicy", "Always")
            obj["spec"]["nodeName"] = "fake-node"
            obj["status"] = {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "True"}],
                "qosClass": "Guaranteed",
            }
            directory = self.workdir / f"{namespace}-{name}-{obj['metadata']['uid'][:8]}"
            directory.mkdir(parents=True)
            pod = FakePod(obj, directory)
            self.pods[(namespace, name)] = pod
            self._record("ADDED", namespace, obj)
            pod.thread = threading.Thread(
                target=self._kubelet, args=(pod,), name=f"kubelet-{name}", daemon=True
            )
            pod.thread.start()
            return copy.deepcopy(obj)

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        self._namespace(namespace)
        found = self.pod(namespace, name)
        if found is None:
            raise ApiStatus(404, "NotFound", f'pods "{name}" not found', name=name, kind="pods")
        return found

    def list(self, namespace: str, selector: str) -> dict[str, Any]:
        self._namespace(namespace)
        with self._changed:
            items = [
                copy.deepcopy(p.obj)
                for (ns, _), p in sorted(self.pods.items())
                if ns == namespace and selector_matches(selector, p.obj["metadata"].get("labels") or {})
            ]
            version = str(self._version)
        return {
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": version},
            "items": items,
        }

    def delete(self, namespace: str, name: str, grace_s: float | None) -> dict[str, Any]:
        self._namespace(namespace)
        with self._changed:
            pod = self.pods.get((namespace, name))
            if pod is None:
                raise ApiStatus(404, "NotFound", f'pods "{name}" not found', name=name, kind="pods")
            if grace_s is None:
                grace_s = float(pod.obj["spec"].get("terminationGracePeriodSeconds", 30))
            if not pod.deleting:
                pod.deleting = True
                pod.obj["metadata"]["deletionTimestamp"] = now_iso()
                pod.obj["metadata"]["deletionGracePeriodSeconds"] = int(grace_s)
                self._record("MODIFIED", namespace, pod.obj)
                threading.Thread(
                    target=self._terminate, args=(pod, min(grace_s, self.max_grace_s)), daemon=True
                ).start()
            return copy.deepcopy(pod.obj)

    def log(self, namespace: str, name: str, tail: int | None, previous: bool) -> str:
        self._namespace(namespace)
        pod = self.pods.get((namespace, name))
        if pod is None:
            raise ApiStatus(404, "NotFound", f'pods "{name}" not found', name=name, kind="pods")
        run = pod.runs - 1 if previous else pod.runs
        path = pod.log_path(run)
        if run < 1 or not path.exists():
            container = pod.container["name"]
            if previous:
                raise ApiStatus(
                    400,
                    "BadRequest",
                    f'previous terminated container "{container}" in pod "{name}" not found',
                )
            raise ApiStatus(
                400,
                "BadRequest",
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating',
            )
        text = path.read_text(errors="replace")
        if tail is not None:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-tail:]) if tail > 0 else ""
        return text

    def events_after(
        self, namespace: str, selector: str, version: int
    ) -> builtins.list[tuple[int, str, dict[str, Any]]]:  # (list: this class's method of that name)
        return [
            (rv, kind, obj)
            for rv, kind, ns, obj in self.history
            if rv > version
            and ns == namespace
            and selector_matches(selector, obj["metadata"].get("labels") or {})
        ]

    # ---- the kubelet -----------------------------------------------------------------------------------

    def _container_status(
        self, pod: FakePod, state: dict[str, Any], last: dict[str, Any] | None, ready: bool
    ) -> dict[str, Any]:
        status: dict[str, Any] = {
            "name": pod.container["name"],
            "image": pod.container["image"],
            "imageID": "",
            "ready": ready,
            "restartCount": max(0, pod.runs - (0 if "waiting" in state and last else 1)),
            "state": state,
            "lastState": {"terminated": last} if last else {},
        }
        return status

    def _status(self, pod: FakePod, phase: str, cs: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {
            "phase": phase,
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "hostIP": "127.0.0.1",
            "podIP": "127.0.0.1",
            "startTime": pod.obj["metadata"]["creationTimestamp"],
            "containerStatuses": [cs],
            **extra,
        }

    def _kubelet(self, pod: FakePod) -> None:
        container = pod.container
        if container["image"] in self.unpullable:
            for reason in ("ErrImagePull", "ImagePullBackOff"):
                message = (
                    f'Back-off pulling image "{container["image"]}"'
                    if reason != "ErrImagePull"
                    else (
                        f'rpc error: code = NotFound desc = failed to pull and unpack image "{container["image"]}": not found'
                    )
                )
                cs = self._container_status(
                    pod, {"waiting": {"reason": reason, "message": message}}, None, False
                )
                self._update(pod, self._status(pod, "Pending", cs))
                if pod.stop.wait(0.3):
                    return
            return
        env: dict[str, str] = dict(os.environ)
        for item in container.get("env") or []:
            if "value" not in item:
                message = f"env {item.get('name')}: only plain values are supported by the fake kubelet"
                cs = self._container_status(
                    pod,
                    {"waiting": {"reason": "CreateContainerConfigError", "message": message}},
                    None,
                    False,
                )
                self._update(pod, self._status(pod, "Pending", cs))
                return
            env[str(item["name"])] = str(item["value"])
        env[MARKER] = pod.uid
        argv = [*(container.get("command") or []), *(container.get("args") or [])]
        policy = pod.obj["spec"].get("restartPolicy", "Always")
        last: dict[str, Any] | None = None
        backoff = 0.2
        while not pod.stop.is_set():
            pod.runs += 1
            started = now_iso()
            try:
                with open(pod.log_path(), "wb") as out:
                    pod.proc = subprocess.Popen(
                        argv,
                        cwd=pod.directory,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
            except OSError as err:
                cs = self._container_status(
                    pod, {"waiting": {"reason": "RunContainerError", "message": str(err)}}, last, False
                )
                self._update(pod, self._status(pod, "Pending" if pod.runs == 1 else "Running", cs))
                return
            cs = self._container_status(pod, {"running": {"startedAt": started}}, last, True)
            self._update(pod, self._status(pod, "Running", cs))
            code = pod.proc.wait()
            exit_code = code if code >= 0 else 128 - code
            last = {
                "exitCode": exit_code,
                "reason": "Completed" if exit_code == 0 else "Error",
                "startedAt": started,
                "finishedAt": now_iso(),
                "containerID": f"fake://{pod.uid}/{pod.runs}",
            }
            if code < 0:
                last["signal"] = -code
            if pod.stop.is_set():
                return
            restart = policy == "Always" or (policy == "OnFailure" and exit_code != 0)
            if not restart:
                phase = "Succeeded" if exit_code == 0 else "Failed"
                cs = self._container_status(pod, {"terminated": last}, None, False)
                self._update(pod, self._status(pod, phase, cs))
                return
            message = f"back-off {backoff:g}s restarting failed container={container['name']} pod={pod.obj['metadata']['name']}"
            cs = self._container_status(
                pod, {"waiting": {"reason": "CrashLoopBackOff", "message": message}}, last, False
            )
            self._update(pod, self._status(pod, "Running", cs))
            if pod.stop.wait(backoff):
                return
            backoff = min(backoff * 2, 2.0)

    def _kill_container(self, pod: FakePod, grace_s: float) -> None:
        """SIGTERM every process of the container, SIGKILL what is left after ``grace_s``."""
        for pid in marked_pids(pod.uid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(alive(p) for p in marked_pids(pod.uid)):
            time.sleep(0.05)
        for pid in marked_pids(pod.uid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if pod.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                pod.proc.wait(5)

    def _terminate(self, pod: FakePod, grace_s: float) -> None:
        pod.stop.set()
        self._kill_container(pod, grace_s)
        if pod.thread is not None:
            pod.thread.join(5)
        with self._changed:
            key = (pod.obj["metadata"]["namespace"], pod.obj["metadata"]["name"])
            if self.pods.get(key) is pod:
                del self.pods[key]
                self._record("DELETED", key[0], pod.obj)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_fake: FakeKubernetes

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, code: int, body: Any, content_type: str = "application/json") -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.server_fake.requests.append((self.command, self.path, code))

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return {}
        try:
            data = json.loads(raw)
        except ValueError as err:
            raise ApiStatus(400, "BadRequest", f"the body is not JSON: {err}") from None
        if not isinstance(data, dict):
            raise ApiStatus(400, "BadRequest", "the body is not a JSON object")
        return data

    def _handle(self) -> None:
        fake = self.server_fake
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        try:
            body = self._body() if self.command in ("POST", "DELETE") else {}
            if fake.fail_next:
                code = fake.fail_next.pop(0)
                reason = {429: "TooManyRequests", 500: "InternalError"}.get(code, "InternalError")
                raise ApiStatus(code, reason, f"injected {code}")
            if self.headers.get("Authorization") != f"Bearer {fake.token}":
                raise ApiStatus(401, "Unauthorized", "Unauthorized")
            match = PODS.match(split.path)
            if match is None:
                raise ApiStatus(
                    404, "NotFound", f"the server could not find the requested resource ({split.path})"
                )
            namespace, name, sub = match.groups()
            if self.command == "POST" and name is None:
                return self._send(201, fake.create(namespace, body))
            if self.command == "GET" and name is None:
                if query.get("watch", "").lower() in ("true", "1"):
                    return self._watch(namespace, query)
                return self._send(200, fake.list(namespace, query.get("labelSelector", "")))
            if self.command == "GET" and sub == "log":
                tail = int(query["tailLines"]) if "tailLines" in query else None
                text = fake.log(
                    namespace, str(name), tail, query.get("previous", "").lower() in ("true", "1")
                )
                return self._send(200, text, "text/plain")
            if self.command == "GET" and name is not None:
                return self._send(200, fake.get(namespace, name))
            if self.command == "DELETE" and name is not None:
                grace = query.get("gracePeriodSeconds", body.get("gracePeriodSeconds"))
                return self._send(200, fake.delete(namespace, name, None if grace is None else float(grace)))
            raise ApiStatus(405, "MethodNotAllowed", f"{self.command} is not supported on {split.path}")
        except ApiStatus as err:
            self._send(err.code, err.body)

    def _watch(self, namespace: str, query: dict[str, str]) -> None:
        fake = self.server_fake
        fake._namespace(namespace)
        selector = query.get("labelSelector", "")
        timeout_s = float(query.get("timeoutSeconds") or 60)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")  # the stream ends with the connection
        self.end_headers()
        fake.requests.append((self.command, self.path, 200))

        def chunk(data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        deadline = time.monotonic() + timeout_s
        try:
            with fake._changed:
                if query.get("resourceVersion"):
                    version = int(query["resourceVersion"])
                    pending = fake.events_after(namespace, selector, version)
                else:  # no version: the current pods as ADDED, then what changes
                    version = fake._version
                    pending = [
                        (version, "ADDED", copy.deepcopy(p.obj))
                        for (ns, _), p in sorted(fake.pods.items())
                        if ns == namespace
                        and selector_matches(selector, p.obj["metadata"].get("labels") or {})
                    ]
            while True:
                for rv, kind, obj in pending:
                    chunk(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
                    version = max(version, rv)
                left = deadline - time.monotonic()
                if left <= 0 or fake._closing.is_set():
                    break
                with fake._changed:
                    pending = fake.events_after(namespace, selector, version)
                    if not pending:
                        fake._changed.wait(min(left, 0.5))
                        pending = fake.events_after(namespace, selector, version)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    do_GET = do_POST = do_DELETE = _handle


@contextmanager
def fake_kubernetes(workdir: Path, **kwargs: Any) -> Iterator[FakeKubernetes]:
    fake = FakeKubernetes(workdir, **kwargs).start()
    try:
        yield fake
    finally:
        fake.close()
