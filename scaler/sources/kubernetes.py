"""Kubernetes inventory: informer-style caches of nodes, pods, Deployments and ScaledObjects.

One background thread per resource lists it (paged), then watches from the list's
``resourceVersion`` and applies every event to a local cache, the way client-go's
reflector does:

* a watch that ends cleanly (the server's ``timeoutSeconds``) resumes from the last
  version seen, without a list;
* ``410 Gone``/``Expired`` (the version was compacted away) re-lists at once;
* any other failure (HTTP errors, dropped connections, bad data) re-lists after an
  exponential backoff with jitter, reset once events flow again.

Reads never touch the API: ``workload()`` answers from the caches in microseconds, or
``Unknown(reason)`` while a cache has not synced yet or a resource has been failing for
longer than ``failure_grace_seconds``, so callers fail open. RBAC: get, list and watch on
nodes, pods, deployments.apps and scaledobjects.keda.sh, cluster-wide.

All I/O goes through the official client, asking for raw JSON (``_preload_content=False``)
so objects stay plain typed data; ``scaler.inventory`` turns them into values and does
the arithmetic.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from kubernetes import client
from kubernetes import config as _config
from kubernetes.client.exceptions import ApiException

from scaler.coldstart import WINDOW as COLD_START_WINDOW
from scaler.coldstart import PodTimes
from scaler.hpa import hpa_from_json
from scaler.inventory import (
    DEFAULT_GPU_RESOURCE,
    GPU_RESOURCE_PATTERNS,
    Deployment,
    Node,
    Pod,
    ScaledObject,
    Unknown,
    WorkloadState,
    deployment_from_json,
    node_from_json,
    pod_from_json,
    scaledobject_from_json,
    workload_state,
)
from scaler.model import HpaStatus

__all__ = [
    "InventoryOptions",
    "KubernetesConfigError",
    "KubernetesInventory",
    "Unknown",
    "WorkloadState",
]

# The config loaders carry no annotations in some client versions; call them as Any.
kube_config: Any = _config

KEDA_GROUP, KEDA_VERSION, KEDA_PLURAL = "keda.sh", "v1alpha1", "scaledobjects"
MAX_ERROR_CHARS = 300

Key = tuple[str, str]
T = TypeVar("T")


class Logger(Protocol):
    """What this module needs of a logger: structlog's bound loggers fit."""

    def warning(self, event: str, /, **kw: Any) -> Any: ...

    def info(self, event: str, /, **kw: Any) -> Any: ...


class KubernetesConfigError(RuntimeError):
    """No usable Kubernetes client configuration (in-cluster or kubeconfig)."""


@dataclass(frozen=True, slots=True)
class InventoryOptions:
    """Tuning for the watches. The defaults suit a production cluster; tests shorten the times."""

    page_size: int = 500
    watch_timeout_seconds: int = 300  # server-side; each watch asks for 1x to 2x this (jitter)
    request_timeout_seconds: float = 30.0  # connect and list timeout; watches read for their timeout + this
    backoff_initial_seconds: float = 0.8
    backoff_max_seconds: float = 30.0
    failure_grace_seconds: float = 60.0  # serve a stale cache this long after a watch breaks
    gpu_resource_patterns: tuple[str, ...] = GPU_RESOURCE_PATTERNS
    default_gpu_resource: str = DEFAULT_GPU_RESOURCE  # for gpusPerReplica when the template has no GPU


# ---- caches ------------------------------------------------------------------------------


def _obj(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _key(obj: Mapping[str, Any]) -> Key:
    meta = _obj(obj.get("metadata"))
    namespace, name = meta.get("namespace"), meta.get("name")
    return (namespace if isinstance(namespace, str) else "", name if isinstance(name, str) else "")


class _Store(Generic[T]):
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
                    error=_describe(exc),
                )
            return None

    def replace(self, objects: list[Mapping[str, Any]]) -> None:
        fresh = {}
        for obj in objects:
            value = self._value(obj)
            if value is not None:
                fresh[_key(obj)] = value
        with self._lock:
            self.items = fresh
            self._reindex()

    def upsert(self, obj: Mapping[str, Any]) -> None:
        key, value = _key(obj), self._value(obj)
        with self._lock:
            old = self.items.pop(key, None)
            if old is not None:
                self._unindex(key, old)
            if value is not None:
                self.items[key] = value
                self._index(key, value)

    def delete(self, obj: Mapping[str, Any]) -> None:
        key = _key(obj)
        with self._lock:
            old = self.items.pop(key, None)
            if old is not None:
                self._unindex(key, old)

    def _reindex(self) -> None:
        for key, value in self.items.items():
            self._index(key, value)

    def _index(self, key: Key, value: T) -> None:
        return None

    def _unindex(self, key: Key, value: T) -> None:
        return None


class _PodStore(_Store[Pod]):
    """Pods, indexed by namespace (workload counts) and by GPU use (node inventory)."""

    def __init__(self, lock: threading.Lock, log: Logger | None) -> None:
        super().__init__("pods", lock, pod_from_json, log)
        self.by_namespace: dict[str, dict[str, Pod]] = {}
        self.holding: dict[Key, Pod] = {}  # bound, not terminal, requesting extended resources

    def _reindex(self) -> None:
        self.by_namespace, self.holding = {}, {}
        super()._reindex()

    def _index(self, key: Key, value: Pod) -> None:
        self.by_namespace.setdefault(key[0], {})[key[1]] = value
        if value.bound and value.requests and not value.terminal:
            self.holding[key] = value

    def _unindex(self, key: Key, value: Pod) -> None:
        pods = self.by_namespace.get(key[0], {})
        pods.pop(key[1], None)
        if not pods:
            self.by_namespace.pop(key[0], None)
        self.holding.pop(key, None)


# ---- list and watch ----------------------------------------------------------------------


class _ExpiredError(Exception):
    """410: the resource version is gone; list again."""


class _WatchError(Exception):
    """An ERROR event other than 410 inside a watch stream."""


def _describe(exc: BaseException) -> str:
    """A short, secret-free description: status and the API's message, never headers."""
    if isinstance(exc, ApiException):
        text = f"HTTP {exc.status} {exc.reason or ''}".rstrip()
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            message = json.loads(exc.body or "").get("message")
            if isinstance(message, str) and message:
                text = f"{text}: {message}"
    elif isinstance(exc, _ExpiredError | _WatchError):
        text = str(exc)
    else:
        text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def _hint(resource: str, exc: BaseException) -> str:
    status = exc.status if isinstance(exc, ApiException) else None
    if status == 403:
        return f" (RBAC: the scaler needs get, list and watch on {resource} cluster-wide)"
    if status == 404 and resource == KEDA_PLURAL:
        return " (is KEDA installed? the ScaledObject CRD keda.sh/v1alpha1 was not found)"
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


class _Reflector:
    """Keeps one ``_Store`` in step with the API server: list, then watch, and recover."""

    def __init__(
        self,
        resource: str,
        call: Callable[..., Any],
        store: _Store[Any],
        options: InventoryOptions,
        clock: Callable[[], float],
        log: Logger | None,
        stopping: threading.Event,
    ) -> None:
        self.resource = resource
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
        self._thread.start()

    def interrupt(self) -> None:
        with self._state:
            response = self._response
        if response is not None:
            _interrupt(response)

    def join(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def problem(self, now: float) -> str | None:
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
            except _ExpiredError:
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
        error = _describe(exc) + _hint(self.resource, exc)
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

    def _healthy(self) -> None:
        with self._state:
            since, self._failing_since, self._error = self._failing_since, None, ""
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
                    raise _ExpiredError(f"list of {self.resource} expired while paging") from exc
                raise
            try:
                body = _obj(json.loads(response.data))
            finally:
                _release(response)
            items = body.get("items")
            if isinstance(items, list):
                objects.extend(i for i in items if isinstance(i, Mapping))
            meta = _obj(body.get("metadata"))
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
                event = _obj(json.loads(line))
                kind, obj = event.get("type"), _obj(event.get("object"))
                if kind == "ERROR":
                    code, message = obj.get("code"), obj.get("message", "")
                    if code == 410:
                        raise _ExpiredError(f"watch of {self.resource} expired: {message}")
                    raise _WatchError(f"watch ERROR {code} {obj.get('reason', '')}: {message}")
                if kind in ("ADDED", "MODIFIED"):
                    self._store.upsert(obj)
                elif kind == "DELETED":
                    self._store.delete(obj)
                elif kind != "BOOKMARK":
                    continue
                seen = _obj(obj.get("metadata")).get("resourceVersion")
                if isinstance(seen, str) and seen:
                    version = seen
                self._progress()
            self._progress()  # a clean end: the server's timeout
            return version
        finally:
            with self._state:
                self._response = None
            _close(response)


# ---- the inventory -----------------------------------------------------------------------


def _kubeconfig_exists(kubeconfig: str | None) -> None:
    """KubernetesConfigError naming the kubeconfig file(s) when none of them exists.

    ``kubeconfig`` when given; else ``$KUBECONFIG`` (one path, or several joined by ``:``), else
    ``~/.kube/config``. *Example*: ``--kubeconfig /missing`` -> ``the kubeconfig /missing does
    not exist``.
    """
    if kubeconfig is not None:
        named, paths = kubeconfig, [kubeconfig]
    elif os.environ.get("KUBECONFIG"):
        named = f"$KUBECONFIG ({os.environ['KUBECONFIG']})"
        paths = [p for p in os.environ["KUBECONFIG"].split(os.pathsep) if p]
    else:
        named, paths = "~/.kube/config (the default; give --kubeconfig)", ["~/.kube/config"]
    if not any(Path(p).expanduser().is_file() for p in paths):
        if len(paths) == 1 and Path(paths[0]).expanduser().is_dir():
            raise KubernetesConfigError(f"the kubeconfig {named} is a directory, not a file")
        raise KubernetesConfigError(f"the kubeconfig {named} does not exist")


def api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """The official client, configured in-cluster when ``kubeconfig`` is None inside a pod;
    otherwise from the kubeconfig file (None: ``$KUBECONFIG`` or ``~/.kube/config``)."""
    configuration = client.Configuration()
    in_cluster = kubeconfig is None and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    try:
        if in_cluster:
            kube_config.load_incluster_config(client_configuration=configuration)
        else:
            # $KUBECONFIG is read now: the client reads it once, when it is imported.
            path = kubeconfig or os.environ.get("KUBECONFIG") or None
            _kubeconfig_exists(kubeconfig)
            kube_config.load_kube_config(config_file=path, client_configuration=configuration)
    except (kube_config.ConfigException, OSError, ValueError, TypeError) as exc:
        where = "in-cluster service account" if in_cluster else f"kubeconfig {kubeconfig or '(default)'}"
        message = f"cannot configure the Kubernetes client from the {where}: {exc}"
        raise KubernetesConfigError(message) from exc
    return client.ApiClient(configuration)


class KubernetesInventory:
    """Cluster GPU inventory and workload state from watched caches. Thread-safe.

    ``start()`` launches the watches; ``workload()`` reads the caches. Pass an
    ``ApiClient`` (tests point one at a local double) or use ``from_config``.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        log: Logger | None = None,
        options: InventoryOptions | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._options = options or InventoryOptions()
        self._clock = clock
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._started = False
        # Cold-start samples of pods measured earlier, per Deployment, so that a scale-down
        # does not forget them (the most recent WINDOW pods; after a restart, the pods that
        # still exist: their timestamps are in the API).
        self._pod_times: dict[tuple[str, str], tuple[PodTimes, ...]] = {}
        patterns = self._options.gpu_resource_patterns
        self._nodes: _Store[Node] = _Store("nodes", self._lock, node_from_json, log)
        self._pods = _PodStore(self._lock, log)
        self._deployments: _Store[Deployment] = _Store(
            "deployments", self._lock, functools.partial(deployment_from_json, gpu_patterns=patterns), log
        )
        self._scaledobjects: _Store[ScaledObject] = _Store(
            KEDA_PLURAL, self._lock, scaledobject_from_json, log
        )
        # The HPAs KEDA creates: read by the landing monitor only, so their watch failing
        # (an older ClusterRole without them) leaves the rest of the inventory standing.
        self._hpas: _Store[HpaStatus] = _Store("horizontalpodautoscalers", self._lock, hpa_from_json, log)
        core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
        custom = client.CustomObjectsApi(api_client)
        autoscaling = client.AutoscalingV2Api(api_client)
        sources: list[tuple[str, Callable[..., Any], _Store[Any]]] = [
            ("nodes", core.list_node, self._nodes),
            ("pods", core.list_pod_for_all_namespaces, self._pods),
            ("deployments", apps.list_deployment_for_all_namespaces, self._deployments),
            (
                KEDA_PLURAL,
                functools.partial(custom.list_cluster_custom_object, KEDA_GROUP, KEDA_VERSION, KEDA_PLURAL),
                self._scaledobjects,
            ),
        ]
        self._reflectors = [
            _Reflector(name, call, store, self._options, clock, log, self._stopping)
            for name, call, store in sources
        ]
        self._hpa_reflector = _Reflector(
            "horizontalpodautoscalers",
            autoscaling.list_horizontal_pod_autoscaler_for_all_namespaces,
            self._hpas,
            self._options,
            clock,
            log,
            self._stopping,
        )

    @classmethod
    def from_config(
        cls,
        kubeconfig: str | None = None,
        *,
        log: Logger | None = None,
        options: InventoryOptions | None = None,
    ) -> KubernetesInventory:
        """In-cluster configuration when ``kubeconfig`` is None inside a pod; otherwise the
        kubeconfig file (None: ``$KUBECONFIG`` or ``~/.kube/config``)."""
        return cls(api_client(kubeconfig), log=log, options=options)

    # ---- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the list-and-watch threads; RuntimeError when called twice."""
        if self._started:
            raise RuntimeError("KubernetesInventory.start() was already called")
        self._started = True
        for reflector in self._all_reflectors:
            reflector.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the watches and wait (up to ``timeout`` seconds) for their threads."""
        self._stopping.set()
        for reflector in self._all_reflectors:
            reflector.interrupt()
        deadline = time.monotonic() + timeout
        for reflector in self._all_reflectors:
            reflector.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> KubernetesInventory:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def _all_reflectors(self) -> list[_Reflector]:
        return [*self._reflectors, self._hpa_reflector]

    @property
    def synced(self) -> bool:
        """Every resource has been listed at least once."""
        return all(r.synced.is_set() for r in self._reflectors)

    def wait_synced(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for nodes, pods, Deployments, ScaledObjects; True once all listed."""
        deadline = time.monotonic() + timeout
        for reflector in self._reflectors:
            if not reflector.synced.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True

    def problem(self) -> str | None:
        """Why the inventory cannot answer now (not synced, or failing past the grace period), or None."""
        now = self._clock()
        problems = [p for r in self._reflectors if (p := r.problem(now)) is not None]
        return "Kubernetes inventory unavailable: " + "; ".join(problems) if problems else None

    # ---- reads --------------------------------------------------------------------------

    def workload(
        self, namespace: str, scaledobject_name: str, gpus_per_replica_override: int | None = None
    ) -> WorkloadState | Unknown:
        """The state of the Deployment a ScaledObject scales, and the GPU room for more replicas."""
        problem = self.problem()
        if problem is not None:
            return Unknown(problem)
        where = f"{namespace}/{scaledobject_name}"
        with self._lock:
            scaledobject = self._scaledobjects.items.get((namespace, scaledobject_name))
            if scaledobject is None:
                return Unknown(f"ScaledObject {where} not found")
            unsupported = scaledobject.unsupported_target()
            if unsupported is not None:
                return Unknown(unsupported)
            deployment = self._deployments.items.get((namespace, scaledobject.target_name))
            if deployment is None:
                return Unknown(
                    f"Deployment {namespace}/{scaledobject.target_name}"
                    f" (scaleTargetRef of ScaledObject {where}) not found"
                )
            pods = list(self._pods.by_namespace.get(namespace, {}).values())
            nodes = list(self._nodes.items.values())
            holding = list(self._pods.holding.values())
            remembered = self._pod_times.get((namespace, deployment.name), ())
            hpa = self._hpas.items.get((namespace, scaledobject.hpa_name))
        state = workload_state(
            scaledobject,
            deployment,
            pods,
            nodes,
            holding,
            gpus_per_replica_override,
            self._options.default_gpu_resource,
            remembered,
            hpa,
            self._hpa_reflector.problem(self._clock()) is None,  # listed, and not failing past the grace
        )
        if isinstance(state, WorkloadState):
            recent = sorted(state.pod_times, key=lambda p: (p.created_at or 0.0, p.name))[-COLD_START_WINDOW:]
            with self._lock:
                self._pod_times[(namespace, deployment.name)] = tuple(recent)
        return state
