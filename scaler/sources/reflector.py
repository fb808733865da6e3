"""The list/watch reflector: one resource of the API server kept in a local cache, as client-go's is.

A ``Reflector`` runs one background thread that lists its resource (paged), then watches
from the list's ``resourceVersion`` and applies every event to its ``Store``:

* a watch that ends cleanly (the server's ``timeoutSeconds``) resumes from the last
  version seen, without a list;
* ``410 Gone``/``Expired`` (the version was compacted away) re-lists at once;
* any other failure (HTTP errors, dropped connections, bad data) re-lists after an
  exponential backoff with jitter (``backoff_initial_seconds`` doubling up to
  ``backoff_max_seconds``, times 0.8-1.2), reset once events flow again.

``problem()`` says why the cache cannot be trusted now: not listed yet, or the watch failing
for longer than ``failure_grace_seconds`` (a stale cache is served until then). An *optional*
resource (DRA's ``resource.k8s.io``, Kueue's ``kueue.x-k8s.io``: APIs a cluster may not serve)
answering 404 is not a failure: its cache is empty and synced, ``absent`` says why, it is logged
once (``kubernetes_resource_not_served``) and asked again every ``backoff_max_seconds``, quietly,
so installing it later is picked up without a restart. A ``Store``
holds projected values by (namespace, name); one object its projection refuses is logged
and skipped, never stopping the watch. What reads through the caches is
``scaler.sources.kubernetes``.

All I/O goes through the official client's list call, asking for raw JSON
(``_preload_content=False``) so objects stay plain typed data.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from kubernetes.client.exceptions import ApiException

from scaler.kubejson import as_mapping
from scaler.sources.unreached import why_unreached

MAX_ERROR_CHARS = 300  # a logged or reported error is cut to this many characters

Key = tuple[str, str]
T = TypeVar("T")


class Logger(Protocol):
    """What this module needs of a logger: structlog's bound loggers fit."""

    def warning(self, event: str, /, **kw: Any) -> Any:
        """Log a warning event with its fields."""
        ...

    def info(self, event: str, /, **kw: Any) -> Any:
        """Log an info event with its fields."""
        ...


@dataclass(frozen=True, slots=True)
class WatchOptions:
    """The timings a reflector runs by. The defaults suit a production cluster; tests shorten them
    (``scaler.sources.kubernetes.InventoryOptions`` adds the inventory's own settings)."""

    page_size: int = 500
    watch_timeout_seconds: int = 300  # server-side; each watch asks for 1x to 2x this (jitter)
    request_timeout_seconds: float = 30.0  # connect and list timeout; watches read for their timeout + this
    backoff_initial_seconds: float = (
        0.8  # the first wait before a re-list after a failure, doubled per failure
    )
    backoff_max_seconds: float = 30.0  # the longest wait
    failure_grace_seconds: float = 60.0  # serve a stale cache this long after a watch breaks


def _key(obj: Mapping[str, Any]) -> Key:
    meta = as_mapping(obj.get("metadata"))
    namespace, name = meta.get("namespace"), meta.get("name")
    return (namespace if isinstance(namespace, str) else "", name if isinstance(name, str) else "")


class Store(Generic[T]):
    """One resource's cache: projected values by (namespace, name). Writers hold ``lock``."""

    def __init__(
        self,
        resource: str,
        lock: threading.Lock,
        project: Callable[[Mapping[str, Any]], T],
        log: Logger | None,
    ) -> None:
        self.resource = resource
        self.items: dict[Key, T] = {}
        self.version = 0  # bumped on every change: what caches built from the items compare
        self._lock = lock
        self._project = project
        self._log = log

    def _value(self, obj: Mapping[str, Any]) -> T | None:
        try:
            return self._project(obj)
        except Exception as exc:  # noqa: BLE001 - one malformed object must not stop the watch
            if self._log is not None:
                self._log.warning(
                    "kubernetes_object_skipped",
                    resource=self.resource,
                    object="/".join(p for p in _key(obj) if p),
                    error=describe(exc),
                )
            return None

    def replace(self, objects: list[Mapping[str, Any]]) -> None:
        """Replace the cache with a list's objects."""
        fresh = {}
        for obj in objects:
            value = self._value(obj)
            if value is not None:
                fresh[_key(obj)] = value
        with self._lock:
            self.items = fresh
            self.version += 1
            self._reindex()

    def upsert(self, obj: Mapping[str, Any]) -> None:
        """Add or update one object (ADDED, MODIFIED)."""
        key, value = _key(obj), self._value(obj)
        with self._lock:
            old = self.items.pop(key, None)
            if old is not None:
                self._unindex(key, old)
            if value is not None:
                self.items[key] = value
                self._index(key, value)
            self.version += 1

    def delete(self, obj: Mapping[str, Any]) -> None:
        """Remove one object (DELETED)."""
        key = _key(obj)
        with self._lock:
            old = self.items.pop(key, None)
            if old is not None:
                self._unindex(key, old)
            self.version += 1

    def _reindex(self) -> None:
        for key, value in self.items.items():
            self._index(key, value)

    def _index(self, key: Key, value: T) -> None:
        return None

    def _unindex(self, key: Key, value: T) -> None:
        return None


class ExpiredError(Exception):
    """410: the resource version is gone; list again."""


class _WatchError(Exception):
    """An ERROR event other than 410 inside a watch stream."""


def describe(exc: BaseException) -> str:
    """A short, secret-free description: status and the API's message, never headers."""
    if isinstance(exc, ApiException):
        text = f"HTTP {exc.status} {exc.reason or ''}".rstrip()
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            message = json.loads(exc.body or "").get("message")
            if isinstance(message, str) and message:
                text = f"{text}: {message}"
    elif isinstance(exc, ExpiredError | _WatchError):
        text = str(exc)
    else:  # a connection that failed: the OS's reason, not urllib3's text around it
        text = why_unreached(exc) or f"{type(exc).__name__}: {exc}"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def _hint(resource: str, exc: BaseException, missing: str) -> str:
    status = exc.status if isinstance(exc, ApiException) else None
    if status == 403:
        return f" (RBAC: the scaler needs get, list and watch on {resource} cluster-wide)"
    if status == 404 and missing:
        return f" ({missing})"
    return ""


def _lines(response: Any) -> Iterator[bytes]:
    """Newline-delimited JSON from a chunked stream; events may span or share chunks."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=True):
        lines = (buffer + (chunk if isinstance(chunk, bytes) else str(chunk).encode())).split(b"\n")
        buffer = lines.pop()  # the unfinished tail
        yield from (line for line in lines if line.strip())
    if buffer.strip():
        yield buffer


def _release(response: Any) -> None:
    """Return a fully read response's connection to the pool."""
    with contextlib.suppress(Exception):
        response.release_conn()


def _close(response: Any) -> None:
    """Close a stream's connection (it may be mid-response), then free its pool slot."""
    with contextlib.suppress(Exception):
        response.close()
    _release(response)


def _interrupt(response: Any) -> None:
    """Unblock a thread reading ``response`` (from another thread)."""
    shutdown = getattr(response, "shutdown", None)  # urllib3 >= 2.3
    if callable(shutdown):
        with contextlib.suppress(Exception):
            shutdown()
            return
    sock = getattr(getattr(response, "connection", None), "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class Reflector:
    """Keeps one ``Store`` in step with the API server: list, then watch, and recover."""

    def __init__(
        self,
        resource: str,
        call: Callable[..., Any],
        store: Store[Any],
        options: WatchOptions,
        clock: Callable[[], float],
        log: Logger | None,
        stopping: threading.Event,
        missing_hint: str = "",
        optional: bool = False,
    ) -> None:
        """``missing_hint`` says what a 404 on the list means (a CRD not installed); ``optional``: a 404
        means the cluster does not serve the resource (module docstring), not a failure."""
        self.resource = resource
        self._missing_hint = missing_hint
        self._optional = optional
        self._absent: str | None = None
        self.synced = threading.Event()
        self._call = call
        self._store = store
        self._options = options
        self._clock = clock
        self._log = log
        self._stopping = stopping
        self._state = threading.Lock()
        self._failing_since: float | None = None
        self._error = ""
        self._response: Any = None
        self._delay = options.backoff_initial_seconds
        self._expired_in_a_row = 0
        self._thread = threading.Thread(target=self._run, name=f"k8s-watch-{resource}", daemon=True)

    # -- called from other threads --

    def start(self) -> None:
        """Start the list-and-watch thread."""
        self._thread.start()

    def interrupt(self) -> None:
        """Unblock the thread's watch, if one is open (on stop)."""
        with self._state:
            response = self._response
        if response is not None:
            _interrupt(response)

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the thread to end."""
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def absent(self) -> str | None:
        """Why an optional resource is not there (its API answered 404), or None."""
        with self._state:
            return self._absent

    def problem(self, now: float) -> str | None:
        """Why the cache cannot be trusted at ``now``: not listed yet, or failing past the grace."""
        with self._state:
            if not self.synced.is_set():
                return f"{self.resource} not listed yet" + (f" ({self._error})" if self._error else "")
            if self._failing_since is not None:
                failing = now - self._failing_since
                if failing > self._options.failure_grace_seconds:
                    return f"{self.resource} watch failing for {failing:.0f}s ({self._error})"
        return None

    # -- the watch thread --

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                version = self._list()
                while not self._stopping.is_set():
                    version = self._watch(version)
            except ApiException as exc:
                if self._stopping.is_set():
                    return
                if self._optional and exc.status == 404:
                    self._not_served(exc)
                    self._stopping.wait(self._options.backoff_max_seconds)
                    continue
                delay = self._next_delay()
                self._failed(exc, delay)
                self._stopping.wait(delay)
            except ExpiredError:
                if self._stopping.is_set():
                    return
                self._expired_in_a_row += 1
                if self._expired_in_a_row > 1:  # expired again before any event: do not spin
                    self._stopping.wait(self._next_delay())
            except Exception as exc:  # noqa: BLE001 - every failure re-lists; which one is recorded and logged
                if self._stopping.is_set():
                    return
                delay = self._next_delay()
                self._failed(exc, delay)
                self._stopping.wait(delay)

    def _next_delay(self) -> float:
        delay = self._delay
        self._delay = min(self._delay * 2, self._options.backoff_max_seconds)
        return delay * random.uniform(0.8, 1.2)  # noqa: S311 - jitter, not cryptography

    def _progress(self) -> None:
        self._delay = self._options.backoff_initial_seconds
        self._expired_in_a_row = 0

    def _failed(self, exc: BaseException, delay: float) -> None:
        """Record a failure; log when a failure episode starts or its error changes, not every retry."""
        error = describe(exc) + _hint(self.resource, exc, self._missing_hint)
        with self._state:
            news = self._failing_since is None or error != self._error
            if self._failing_since is None:
                self._failing_since = self._clock()
            self._error = error
        if news and self._log is not None:
            self._log.warning(
                "kubernetes_watch_failed",
                resource=self.resource,
                error=error,
                retry_in_seconds=round(delay, 2),
            )

    def _not_served(self, exc: BaseException) -> None:
        """An optional resource the API does not serve: an empty, synced cache; said once."""
        reason = (
            f"not served by this cluster ({describe(exc)}{_hint(self.resource, exc, self._missing_hint)})"
        )
        self._store.replace([])
        with self._state:
            news = self._absent is None
            self._absent, self._failing_since, self._error = reason, None, ""
        self.synced.set()
        if news and self._log is not None:
            self._log.info("kubernetes_resource_not_served", resource=self.resource, reason=reason)

    def _healthy(self) -> None:
        with self._state:
            since, self._failing_since, self._error = self._failing_since, None, ""
            was_absent, self._absent = self._absent, None
        if was_absent is not None and self._log is not None:
            self._log.info("kubernetes_resource_served", resource=self.resource)
        if since is not None and self._log is not None:
            self._log.info(
                "kubernetes_watch_recovered",
                resource=self.resource,
                failed_for_seconds=round(self._clock() - since, 1),
            )

    def _list(self) -> str:
        objects: list[Mapping[str, Any]] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {
                "limit": self._options.page_size,
                "_preload_content": False,
                "_request_timeout": self._options.request_timeout_seconds,
            }
            if token:
                kwargs["_continue"] = token
            try:
                response = self._call(**kwargs)
            except ApiException as exc:
                if exc.status == 410:  # the continue token expired: start the list over
                    raise ExpiredError(f"list of {self.resource} expired while paging") from exc
                raise
            try:
                body = as_mapping(json.loads(response.data))
            finally:
                _release(response)
            items = body.get("items")
            if isinstance(items, list):
                objects.extend(i for i in items if isinstance(i, Mapping))
            meta = as_mapping(body.get("metadata"))
            token = meta.get("continue") or None
            if not token:
                version = meta.get("resourceVersion")
                break
        self._store.replace(objects)
        self.synced.set()
        self._healthy()
        return version if isinstance(version, str) else ""

    def _watch(self, version: str) -> str:
        timeout = int(self._options.watch_timeout_seconds * (1 + random.random()))  # noqa: S311 - jitter
        connect = self._options.request_timeout_seconds
        response = self._call(
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
            _preload_content=False,
            _request_timeout=(connect, timeout + connect),
        )
        with self._state:
            self._response = response
        try:
            if self._stopping.is_set():
                return version
            self._healthy()
            for line in _lines(response):
                event = as_mapping(json.loads(line))
                kind, obj = event.get("type"), as_mapping(event.get("object"))
                if kind == "ERROR":
                    code, message = obj.get("code"), obj.get("message", "")
                    if code == 410:
                        raise ExpiredError(f"watch of {self.resource} expired: {message}")
                    raise _WatchError(f"watch ERROR {code} {obj.get('reason', '')}: {message}")
                if kind in ("ADDED", "MODIFIED"):
                    self._store.upsert(obj)
                elif kind == "DELETED":
                    self._store.delete(obj)
                elif kind != "BOOKMARK":
                    continue
                seen = as_mapping(obj.get("metadata")).get("resourceVersion")
                if isinstance(seen, str) and seen:
                    version = seen
                self._progress()
            self._progress()  # a clean end: the server's timeout
            return version
        finally:
            with self._state:
                self._response = None
            _close(response)
