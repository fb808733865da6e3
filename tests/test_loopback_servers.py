"""The loopback HTTP servers of the tests and the demo: a client that leaves early is no error.

A real server (Prometheus, the API server, vLLM's) drops a connection whose client has gone;
the stand-ins do the same, so a client that times out or closes mid-answer prints no traceback
(``socketserver`` prints one for every exception a handler raises).
"""

from __future__ import annotations

import socket
import struct
import threading
from http.server import ThreadingHTTPServer

import pytest

from scaler.sim.exposition import QuietHandler
from tests.fake_prometheus import FakePrometheus

pytestmark = pytest.mark.e2e


class _Joined(ThreadingHTTPServer):
    """A server whose close waits for its handlers, so what they print is printed by then."""

    daemon_threads = False


def _reset(sock: socket.socket) -> None:
    """Close ``sock`` with a TCP reset (SO_LINGER 0), as a client that gives up does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _connect(server: ThreadingHTTPServer) -> socket.socket:
    """A client connection to ``server``."""
    return socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=5)


def test_a_client_reset_while_its_answer_is_written_prints_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A client that resets its connection before its answer is written leaves stderr empty."""
    asked, answer = threading.Event(), threading.Event()

    class Slow(QuietHandler):
        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            asked.set()
            answer.wait(5)
            self.send_body(200, b"x" * 1_000_000, "text/plain")

    server = _Joined(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    client = _connect(server)
    client.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
    assert asked.wait(5)
    _reset(client)
    answer.set()
    server.shutdown()
    server.server_close()  # joins the handler
    assert capsys.readouterr().err == ""


def test_a_keep_alive_client_reset_between_requests_prints_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A keep-alive client (HTTP/1.1) that resets its connection between requests leaves stderr empty."""

    class KeepAlive(QuietHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            self.send_body(200, b"{}", "application/json")

    server = _Joined(("127.0.0.1", 0), KeepAlive)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    client = _connect(server)
    client.sendall(b"GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\n\r\n")
    assert client.recv(4096).startswith(b"HTTP/1.1 200")
    _reset(client)  # the handler is reading the next request line
    server.shutdown()
    server.server_close()
    assert capsys.readouterr().err == ""


def test_the_fake_prometheus_closes_with_its_answers_in_flight_done(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """FakePrometheus.close waits for an answer still being written to a client that left, quietly."""
    asked, answer = threading.Event(), threading.Event()

    def respond(path: str) -> tuple[int, bytes]:
        asked.set()
        answer.wait(5)
        return 200, b"x" * 1_000_000

    fake = FakePrometheus(respond)
    client = _connect(fake.server)
    client.sendall(b"GET /api/v1/query HTTP/1.0\r\n\r\n")
    assert asked.wait(5)
    _reset(client)
    answer.set()
    fake.close()
    assert capsys.readouterr().err == ""
