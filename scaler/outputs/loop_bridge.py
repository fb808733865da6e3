"""The bridge from gRPC's RPC threads to the runtime's asyncio event loop, and the slots.

RPCs run on gRPC's thread pool; the refresh loop and everything that changes the
registry run on the runtime's event loop, which RPC threads only read from and hand the
rest to. ``LoopBridge`` holds what the two sides share: the loop (set when the server
starts), the ``closing`` event that ends open streams, ``workers`` unary slots (a thread
holds one while it runs Python and gives it back while it waits, so at most ``workers``
threads contend for the interpreter lock however many RPCs arrive together) and
``max_streams`` stream slots. ``_on_loop`` runs a call on the loop and waits for its
result; ``_wait_on_loop`` waits a bounded time for a coroutine there (a new target's
first decision). A loop that does not answer is ``UNAVAILABLE``, never a thread held
forever.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import grpc

T = TypeVar("T")


class RpcError(Exception):
    """An RPC failure to answer with: the gRPC status code and its details."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class LoopBridge:
    """The loop, the closing event and the slots an RPC thread uses to reach the loop."""

    def __init__(self, workers: int, max_streams: int) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.closing = threading.Event()
        self._slots = threading.BoundedSemaphore(workers)
        self._streams = threading.BoundedSemaphore(max_streams)

    @contextlib.contextmanager
    def _waiting(self) -> Iterator[None]:
        """Give the slot back while this thread waits on something else."""
        self._slots.release()
        try:
            yield
        finally:
            self._slots.acquire()

    def _on_loop(self, call: Callable[[], T], timeout_s: float) -> T:
        """Run ``call`` on the runtime's event loop and wait for its result."""
        if self.loop is None:
            raise RpcError(grpc.StatusCode.UNAVAILABLE, "server is starting")
        result: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                result.set_result(call())
            except BaseException as exc:  # noqa: BLE001 - handed back to the RPC thread
                result.set_exception(exc)

        self.loop.call_soon_threadsafe(run)
        with self._waiting():
            try:
                return result.result(timeout_s)
            except concurrent.futures.TimeoutError:
                raise RpcError(
                    grpc.StatusCode.UNAVAILABLE,
                    f"the scaler's event loop did not answer within {timeout_s:g} s",
                ) from None

    def _wait_on_loop(self, start: Callable[[], Coroutine[Any, Any, object]], timeout_s: float) -> None:
        """Run the coroutine ``start`` makes on the loop and wait up to ``timeout_s`` for it.

        No loop yet, or no answer in time, just returns: the caller reads what it waited for.
        """
        if self.loop is not None:
            waiting = asyncio.run_coroutine_threadsafe(start(), self.loop)
            with self._waiting(), contextlib.suppress(concurrent.futures.TimeoutError):
                waiting.result(timeout_s)
