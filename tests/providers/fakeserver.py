"""A real HTTP server on loopback for faking provider APIs in their real wire formats.

    with FakeServer() as server:
        server.route("GET", "/v0/orders", lambda req: Reply.json({"object": "list", "data": []}))
        client = SomeClient(base_url=server.url)

Handlers get a ``Request`` (method, path, query, headers, body) and return a ``Reply``. Every request is
recorded in ``server.requests``. A route may hold a list of replies, served in turn (the last one repeats),
to script 429-then-200 sequences.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")

    def param(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0

    @classmethod
    def json(
        cls,
        payload: Any,
        status: int = 200,
        *,
        delay_s: float = 0.0,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        body = json.dumps(payload).encode()
        return cls(status, body, {"Content-Type": "application/json", **(headers or {})}, delay_s)

    @classmethod
    def text(
        cls,
        text: str,
        status: int = 200,
        *,
        content_type: str = "text/plain",
        delay_s: float = 0.0,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        return cls(status, text.encode(), {"Content-Type": content_type, **(headers or {})}, delay_s)


Handler = Callable[[Request], Reply]


class FakeServer:
    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._routes: dict[tuple[str, str], Handler | list[Reply]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start the server first"
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)
        return f"http://{host}:{port}"

    def route(self, method: str, path: str, handler: Handler | Reply | Sequence[Reply]) -> None:
        """Serve ``path`` (exact, without query) for ``method``; a prefix route ends with ``*``."""
        if isinstance(handler, Reply):
            stored: Handler | list[Reply] = [handler]
        elif callable(handler):
            stored = handler
        else:
            stored = list(handler)
        self._routes[(method.upper(), path)] = stored

    def _find(self, method: str, path: str) -> Handler | list[Reply] | None:
        if (method, path) in self._routes:
            return self._routes[(method, path)]
        for (m, p), handler in self._routes.items():
            if m == method and p.endswith("*") and path.startswith(p[:-1]):
                return handler
        return None

    def _dispatch(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            handler = self._find(request.method, request.path)
            if isinstance(handler, list):
                reply = handler.pop(0) if len(handler) > 1 else handler[0]
                return reply
        if handler is None:
            return Reply.json({"error": {"type": "not_found", "message": f"no route {request.path}"}}, 404)
        return handler(request)

    def __enter__(self) -> FakeServer:
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                split = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = Request(
                    method=self.command,
                    path=split.path,
                    query=parse_qs(split.query, keep_blank_values=True),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
                reply = outer._dispatch(request)
                if reply.delay_s:
                    threading.Event().wait(reply.delay_s)
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
