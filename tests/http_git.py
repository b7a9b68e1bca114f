"""A real git upstream over HTTP that wants a password: git's "dumb" HTTP protocol (static files of a
bare repository after ``git update-server-info``) served on 127.0.0.1 behind Basic auth.

Used by tests/faults/test_secrets.py to check that the credentials of ``https://user:TOKEN@host/r.git``
reach git (the fetch works) and never reach a file, a log or a message of zlops.
"""

from __future__ import annotations

import base64
import functools
import http.server
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar


class _AuthHandler(http.server.SimpleHTTPRequestHandler):
    expected = ""
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        got = self.headers.get("Authorization", "")
        self.seen.append(got)
        if got != self.expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="zlops-test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.path = self.path.split("?", 1)[0]  # info/refs?service=...: the static file (dumb protocol)
        super().do_GET()

    def log_message(self, *args: object) -> None:
        return None


@contextmanager
def serve_bare(upstream: Path, root: Path, *, user: str, password: str) -> Iterator[tuple[str, list[str]]]:
    """A bare clone of ``upstream`` under ``root`` served over HTTP; yields (URL without credentials,
    the Authorization headers the server saw)."""
    bare = root / "up.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(upstream), str(bare)], check=True)
    subprocess.run(["git", "-C", str(bare), "update-server-info"], check=True)
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    handler = type("Handler", (_AuthHandler,), {"expected": f"Basic {token}", "seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    # shutdown() waits for serve_forever's next poll: 0.05 s, not the default 0.5 s
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/up.git", handler.seen
    finally:
        server.shutdown()
        server.server_close()
