"""A fake Slack Web API on 127.0.0.1 for real ``slack_sdk`` clients: records every request, answers like Slack.

Answers ``chat.postMessage`` (a new ``ts`` each time, channel ``C0PERF``), ``conversations.list``,
``files.getUploadURLExternal`` (an upload URL pointing back here), the upload itself (``/upload/F..``,
whose raw body is kept, never form-decoded) and ``files.completeUploadExternal`` (files with
permalinks). ``script`` queues answers for the next matching requests: ``fail(path, status, ...)``
answers e.g. 500 or 429 with Retry-After once (or N times).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

CHANNEL_ID = "C0PERF"
TOKEN = "xoxb-test-0123456789-secret"


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def method(self) -> str:
        return self.path.rsplit("/", 1)[-1] if self.path.startswith("/api/") else "upload"

    @property
    def args(self) -> dict[str, Any]:
        """The call's arguments, from a JSON or a form-encoded body."""
        if self.headers.get("Content-Type", "").startswith("application/json"):
            return json.loads(self.body or b"{}")
        return {k: v[0] for k, v in parse_qs(self.body.decode("utf-8", "replace")).items()}


@dataclass
class FakeSlack:
    url: str = ""
    base: str = ""
    seen: list[Request] = field(default_factory=list)
    script: list[tuple[str, int, dict[str, str], Any]] = field(default_factory=list)
    channels: list[dict[str, str]] = field(default_factory=lambda: [{"id": "C0OTHER", "name": "general"},
                                                                     {"id": CHANNEL_ID, "name": "perf-nightly"}])
    _n: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, path: str, status: int, *, times: int = 1, headers: dict[str, str] | None = None,
             body: Any = None) -> None:
        """Answer the next ``times`` requests whose path ends with ``path`` with ``status``."""
        answer = body if body is not None else (b"<html>internal error</html>" if status >= 500
                                                else {"ok": False, "error": "ratelimited"})
        self.script += [(path, status, headers or {}, answer)] * times

    def calls(self, method: str | None = None) -> list[Request]:
        return [r for r in self.seen if method is None or r.method == method]

    def methods(self) -> list[str]:
        return [r.method for r in self.seen]

    def posts(self) -> list[dict[str, Any]]:
        return [r.args for r in self.calls("chat.postMessage")]

    def next_id(self) -> int:
        with self._lock:
            self._n += 1
            return self._n

    def answer(self, req: Request) -> tuple[int, dict[str, str], Any]:
        for i, (path, status, headers, body) in enumerate(self.script):
            if req.path.endswith(path):
                del self.script[i]
                return status, headers, body
        n = self.next_id()
        if req.method == "chat.postMessage":
            return 200, {}, {"ok": True, "channel": CHANNEL_ID, "ts": f"1700000000.{n:06d}"}
        if req.method == "conversations.list":
            return 200, {}, {"ok": True, "channels": self.channels, "response_metadata": {"next_cursor": ""}}
        if req.method == "files.getUploadURLExternal":
            return 200, {}, {"ok": True, "file_id": f"F{n:04d}", "upload_url": f"{self.base}/upload/F{n:04d}"}
        if req.method == "upload":
            return 200, {}, b"OK - uploaded"
        if req.method == "files.completeUploadExternal":
            files = json.loads(req.args.get("files", "[]"))
            return 200, {}, {"ok": True, "files": [
                {"id": f["id"], "title": f.get("title"), "permalink": f"https://slack.example/files/{f['id']}"}
                for f in files]}
        return 200, {}, {"ok": True}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        fake: FakeSlack = self.server.fake  # type: ignore[attr-defined]
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        req = Request(self.path, dict(self.headers), body, time.monotonic())
        fake.seen.append(req)
        status, headers, answer = fake.answer(req)
        data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html" if isinstance(answer, bytes) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def fake_slack_server() -> Iterator[FakeSlack]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    fake = FakeSlack()
    fake.base = f"http://127.0.0.1:{server.server_address[1]}"
    fake.url = fake.base + "/api/"
    server.fake = fake  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
