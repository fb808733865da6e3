"""A fake Prometheus query API on a loopback port that answers whatever the test scripts."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Generic, TypeVar
from urllib.parse import parse_qs, urlparse

from scaler.sim.exposition import QuietHandler

Answer = tuple[int, bytes]
"""An HTTP status and the JSON body sent with it."""

R = TypeVar("R", bound=Callable[[str], Answer])


class FakePrometheus(Generic[R]):
    """An HTTP server on 127.0.0.1 that answers every GET with ``respond(path)``.

    ``respond`` is kept as an attribute, so a test that scripts its answers with a stateful
    object (a fault mode, a queue depth) changes them through ``fake.respond`` while it runs.
    """

    def __init__(self, respond: R) -> None:
        self.respond = respond
        fake = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
                status, body = fake.respond(self.path)
                self.send_body(status, body, "application/json")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # close() waits for the answers in flight (a scripted slow one included), so none is
        # written after the test that scripted it has ended.
        self.server.daemon_threads = False
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        """Stop serving, wait for the answers in flight and release the port."""
        self.server.shutdown()
        self.server.server_close()


def query_of(path: str) -> str:
    """The PromQL ``query`` parameter of a request path, or "" when it has none."""
    return parse_qs(urlparse(path).query).get("query", [""])[0]


def vector(*values: str, labels: dict[str, str] | None = None) -> bytes:
    """A successful instant-query answer: one series per value, on pods p0, p1, ..."""
    result: list[dict[str, object]] = [
        {"metric": {**(labels or {}), "pod": f"p{i}"}, "value": [time.time(), v]}  # noqa: TID251 - a live answer carries the time it was given
        for i, v in enumerate(values)
    ]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
