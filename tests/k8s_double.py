"""A local Kubernetes API server double, good enough for the real ``kubernetes`` client.

It serves, over HTTP/1.1 on a free loopback port, read-only list, get and watch for
Nodes (``/api/v1/nodes``), Pods (``/api/v1/pods``, ``/api/v1/namespaces/NS/pods``),
Deployments (``/apis/apps/v1/...``), KEDA ScaledObjects (``/apis/keda.sh/v1alpha1/...``)
HorizontalPodAutoscalers (``/apis/autoscaling/v2/...``), Ingresses
(``/apis/networking.k8s.io/v1/...``), Services (``/api/v1/namespaces/NS/services``),
PodDisruptionBudgets (``/apis/policy/v1/...``), DRA's ResourceSlices, DeviceClasses, ResourceClaims and
ResourceClaimTemplates (``/apis/resource.k8s.io/v1/...``) and Kueue's ClusterQueues and
LocalQueues (``/apis/kueue.x-k8s.io/v1beta1/...``), plus ``/version``, with the API server's
semantics where the scaler depends on them (``unserved`` API groups answer 404, as a cluster
without DRA or Kueue does):

* one cluster-wide ``resourceVersion`` counter; lists carry it in ``metadata``, every
  object carries its own; items in a list have no ``kind``/``apiVersion``, as on the wire;
* ``limit``/``continue`` paging served from a snapshot taken at the first page;
* ``?watch=true``: a chunked stream of ``{"type": ..., "object": ...}`` lines, held
  open; from a ``resourceVersion`` it first replays the changes after it (the watch
  cache), from none or ``"0"`` it starts with synthetic ADDED events; ``timeoutSeconds``
  ends it cleanly; a version older than the last compaction gets an ERROR event with
  a ``410 Expired`` Status, as the real server sends it;
* optional bearer-token authentication (401 Status without it).

Faults for tests: ``fail`` (HTTP errors such as 500 on matching requests),
``drop_watches`` (connections cut mid-stream), ``end_watches`` (clean end of stream),
``expire`` (compaction: open watches get 410 and old versions become unusable).
``requests`` records every request for assertions.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import itertools
import json
import queue
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from scaler.sim.exposition import QuietHandler

CREATED = "2026-12-01T08:00:00Z"
DRA = "/apis/resource.k8s.io/v1"
KUEUE = "/apis/kueue.x-k8s.io/v1beta1"


@dataclass(frozen=True)
class Resource:
    """One API resource the double serves: its URL plural, prefix, scope, kind and apiVersion."""

    name: str  # plural, as in the URL
    prefix: str  # /api/v1 or /apis/GROUP/VERSION
    namespaced: bool
    kind: str
    api_version: str


RESOURCES: dict[str, Resource] = {
    r.name: r
    for r in (
        Resource("nodes", "/api/v1", False, "Node", "v1"),
        Resource("pods", "/api/v1", True, "Pod", "v1"),
        Resource("services", "/api/v1", True, "Service", "v1"),
        Resource("deployments", "/apis/apps/v1", True, "Deployment", "apps/v1"),
        Resource("scaledobjects", "/apis/keda.sh/v1alpha1", True, "ScaledObject", "keda.sh/v1alpha1"),
        Resource(
            "horizontalpodautoscalers",
            "/apis/autoscaling/v2",
            True,
            "HorizontalPodAutoscaler",
            "autoscaling/v2",
        ),
        Resource("ingresses", "/apis/networking.k8s.io/v1", True, "Ingress", "networking.k8s.io/v1"),
        Resource("poddisruptionbudgets", "/apis/policy/v1", True, "PodDisruptionBudget", "policy/v1"),
        Resource("resourceslices", DRA, False, "ResourceSlice", "resource.k8s.io/v1"),
        Resource("deviceclasses", DRA, False, "DeviceClass", "resource.k8s.io/v1"),
        Resource("resourceclaims", DRA, True, "ResourceClaim", "resource.k8s.io/v1"),
        Resource("resourceclaimtemplates", DRA, True, "ResourceClaimTemplate", "resource.k8s.io/v1"),
        Resource("clusterqueues", KUEUE, False, "ClusterQueue", "kueue.x-k8s.io/v1beta1"),
        Resource("localqueues", KUEUE, True, "LocalQueue", "kueue.x-k8s.io/v1beta1"),
    )
}
BY_KIND = {r.kind: r for r in RESOURCES.values()}
# What the scaler's inventory watches (scaler doctor also lists ingresses, and the scaler's own
# Services and PodDisruptionBudgets).
WATCHED = tuple(name for name in RESOURCES if name not in ("ingresses", "services", "poddisruptionbudgets"))


@dataclass
class RequestRecord:
    """One request the double answered, as parsed from its URL, with the status sent."""

    method: str
    path: str
    resource: str | None
    namespace: str | None
    name: str | None
    query: dict[str, str]
    status: int = 0

    @property
    def watch(self) -> bool:
        """Whether the request asked for a watch (``?watch=true`` or ``1``)."""
        return self.query.get("watch") in ("true", "1")


@dataclass
class Fault:
    """An injected HTTP error for requests on one resource (or all), watches and/or lists."""

    code: int
    resource: str | None
    watch: bool | None  # None: lists and watches alike
    times: int | None  # None: until healed

    def matches(self, record: RequestRecord) -> bool:
        """Whether this fault applies to the request ``record``."""
        if self.resource is not None and record.resource != self.resource:
            return False
        return self.watch is None or self.watch == record.watch


@dataclass
class Subscription:
    """One open watch: its resource, namespace (None: all) and queue of events to send."""

    resource: str
    namespace: str | None
    events: queue.Queue[tuple[str, Any]] = field(default_factory=queue.Queue)


def status_object(code: int, reason: str, message: str) -> dict[str, Any]:
    """A Kubernetes ``Status`` failure body with the given code, reason and message."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    410: "Expired",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


class KubeDouble:
    """The API server double. Use as a context manager, or ``start()``/``stop()``."""

    def __init__(
        self,
        token: str | None = None,
        odd_chunks: bool = False,
        version: str = "1.35.0",
        unserved: Iterable[str] = (),
        kueue_versions: Iterable[str] = ("v1beta2", "v1beta1"),
    ) -> None:
        self.token = token
        # The versions Kueue's resources are served at (Kueue 0.15-0.19 serve both; a later one
        # only v1beta2): the same objects under each, as a CRD's conversion serves them.
        self.kueue_versions = frozenset(kueue_versions)
        # API prefixes (e.g. DRA, KUEUE) this cluster does not serve: every request under one is 404.
        self.unserved = frozenset(unserved)
        self.version = version  # what /version answers, as gitVersion v<version>
        # odd_chunks: split each watch event across two chunks and send a replayed backlog as
        # one chunk, as proxies and large objects do; clients must not assume one event per chunk.
        self.odd_chunks = odd_chunks
        self.lock = threading.Lock()
        self.rv = 100
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {r: {} for r in RESOURCES}
        self.history: list[tuple[int, str, str, dict[str, Any]]] = []  # (rv, resource, type, object)
        self.compacted = 0  # watches from a version below this get 410
        self.subscriptions: list[Subscription] = []
        self.snapshots: dict[str, tuple[int, list[dict[str, Any]]]] = {}
        self.snapshot_ids = itertools.count(1)
        self.faults: list[Fault] = []
        self.requests: list[RequestRecord] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()

    # ---- lifecycle -------------------------------------------------------------------

    def start(self) -> KubeDouble:
        """Serve on a free loopback port from a background thread; returns the double."""
        double = self

        class Handler(_Handler):
            server_double = double

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="kube-double", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """End open watches, shut the server down and join its thread."""
        self._closing.set()
        with self.lock:
            subs = list(self.subscriptions)
        for sub in subs:
            sub.events.put(("end", None))
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> KubeDouble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The double's base URL, ``http://127.0.0.1:PORT``."""
        assert self._server is not None, "start() the double first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # ---- objects ---------------------------------------------------------------------

    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def _publish(self, resource: str, kind: str, obj: dict[str, Any], rv: int, notify: bool) -> None:
        self.history.append((rv, resource, kind, copy.deepcopy(obj)))
        if not notify:
            return
        namespace = obj["metadata"].get("namespace")
        for sub in self.subscriptions:
            if sub.resource == resource and (sub.namespace is None or sub.namespace == namespace):
                sub.events.put(("event", {"type": kind, "object": copy.deepcopy(obj)}))

    def apply(self, obj: Mapping[str, Any], notify: bool = True) -> dict[str, Any]:
        """Create or replace an object (ADDED or MODIFIED); returns it as stored.

        ``notify=False`` records the change without sending it to open watches, as when a
        watch lags behind and the change is then compacted away (see ``expire``).
        """
        resource = BY_KIND[obj["kind"]].name
        stored = copy.deepcopy(dict(obj))
        meta = stored.setdefault("metadata", {})
        key = (meta.get("namespace", ""), meta["name"])
        with self.lock:
            old = self.objects[resource].get(key)
            rv = self._next_rv()
            meta["resourceVersion"] = str(rv)
            if old is not None:
                meta["uid"] = old["metadata"]["uid"]
                meta["creationTimestamp"] = old["metadata"]["creationTimestamp"]
                if stored.get("spec") != old.get("spec"):
                    meta["generation"] = old["metadata"].get("generation", 1) + 1
                else:
                    meta["generation"] = old["metadata"].get("generation", 1)
            else:
                meta.setdefault("uid", str(uuid.uuid4()))
                meta.setdefault("creationTimestamp", CREATED)
                meta.setdefault("generation", 1)
            self.objects[resource][key] = stored
            self._publish(resource, "MODIFIED" if old is not None else "ADDED", stored, rv, notify)
            return copy.deepcopy(stored)

    def modify(
        self,
        kind: str,
        namespace: str,
        name: str,
        change: Callable[[dict[str, Any]], None],
        notify: bool = True,
    ) -> dict[str, Any]:
        """Apply ``change`` to a copy of the stored object and store it (MODIFIED)."""
        current = self.get(kind, namespace, name)
        if current is None:
            raise KeyError(f"{kind} {namespace}/{name} does not exist")
        change(current)
        return self.apply(current, notify)

    def delete(self, kind: str, namespace: str, name: str, notify: bool = True) -> None:
        """Remove a stored object (DELETED), bumping the resourceVersion."""
        resource = BY_KIND[kind].name
        with self.lock:
            obj = self.objects[resource].pop((namespace, name))
            rv = self._next_rv()
            obj["metadata"]["resourceVersion"] = str(rv)
            self._publish(resource, "DELETED", obj, rv, notify)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A copy of the stored object, or None when there is none."""
        with self.lock:
            obj = self.objects[BY_KIND[kind].name].get((namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    # ---- faults ----------------------------------------------------------------------

    def fail(
        self,
        code: int = 500,
        resource: str | None = None,
        watch: bool | None = None,
        times: int | None = None,
    ) -> None:
        """Answer matching requests with an HTTP error and a Status body, ``times`` times or until healed."""
        with self.lock:
            self.faults.append(Fault(code, resource, watch, times))

    def heal(self) -> None:
        """Clear every injected fault."""
        with self.lock:
            self.faults.clear()

    def _signal_watches(self, signal: str, resource: str | None) -> int:
        with self.lock:
            subs = [s for s in self.subscriptions if resource is None or s.resource == resource]
        for sub in subs:
            sub.events.put((signal, None))
        return len(subs)

    def drop_watches(self, resource: str | None = None) -> int:
        """Cut open watch connections mid-stream (no terminating chunk); returns how many."""
        return self._signal_watches("drop", resource)

    def end_watches(self, resource: str | None = None) -> int:
        """End open watch streams cleanly, as ``timeoutSeconds`` does."""
        return self._signal_watches("end", resource)

    def expire(self, resource: str | None = None, tell_watches: bool = True) -> int:
        """Compact history: versions before now become unusable (a watch from one gets
        ERROR 410) and paging snapshots expire. With ``tell_watches``, open watches on
        ``resource`` (all when None) get the ERROR 410 event at once, as when the server
        drops a watch that fell too far behind."""
        with self.lock:
            self.compacted = self.rv + 1
            self.history.clear()
            self.snapshots.clear()
        return self._signal_watches("expire", resource) if tell_watches else 0

    def bookmark(self, resource: str | None = None) -> int:
        """Send a BOOKMARK event (the current resourceVersion, no object data) to open watches."""
        return self._signal_watches("bookmark", resource)

    def watchers(self, resource: str | None = None) -> int:
        """How many watches are open on ``resource`` (all resources when None)."""
        with self.lock:
            return sum(1 for s in self.subscriptions if resource is None or s.resource == resource)

    def wait_watchers(self, resource: str, count: int = 1, timeout: float = 5.0) -> bool:
        """Wait up to ``timeout`` for ``count`` open watches on ``resource``; whether they came."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.watchers(resource) >= count:
                return True
            time.sleep(0.01)
        return False

    def count(self, resource: str | None = None, watch: bool | None = None, status: int | None = None) -> int:
        """How many recorded requests match the resource, watch flag and status given."""
        with self.lock:
            return sum(
                1
                for r in self.requests
                if (resource is None or r.resource == resource)
                and (watch is None or r.watch == watch)
                and (status is None or r.status == status)
            )

    # ---- serving (called from handler threads) ---------------------------------------

    def _fault_for(self, record: RequestRecord) -> int | None:
        with self.lock:
            for fault in self.faults:
                if fault.matches(record):
                    if fault.times is not None:
                        fault.times -= 1
                        if fault.times <= 0:
                            self.faults.remove(fault)
                    return fault.code
        return None

    def _visible(self, resource: str, namespace: str | None) -> list[dict[str, Any]]:
        items = [
            obj for (ns, _), obj in self.objects[resource].items() if namespace is None or ns == namespace
        ]
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        return items

    def list_body(
        self, res: Resource, namespace: str | None, limit: int | None, token: str | None
    ) -> tuple[int, dict[str, Any]]:
        """The status and body of one list page, paged from a snapshot taken at the first page."""
        with self.lock:
            snapshot_id: str | None = None
            if token:
                try:
                    snapshot_id, offset = json.loads(base64.urlsafe_b64decode(token.encode()))
                    rv, items = self.snapshots[str(snapshot_id)]
                except (ValueError, KeyError, TypeError):
                    message = (
                        "The provided continue parameter is too old to display a consistent list result."
                    )
                    return 410, status_object(410, "Expired", message)
            else:
                rv, items, offset = self.rv, [copy.deepcopy(o) for o in self._visible(res.name, namespace)], 0
            end = len(items) if not limit else offset + limit
            metadata: dict[str, Any] = {"resourceVersion": str(rv)}
            if end < len(items):
                if snapshot_id is None:
                    snapshot_id = f"s{next(self.snapshot_ids)}"
                    self.snapshots[snapshot_id] = (rv, items)
                metadata["continue"] = base64.urlsafe_b64encode(
                    json.dumps([snapshot_id, end]).encode()
                ).decode()
                metadata["remainingItemCount"] = len(items) - end
        # Items in a list carry no kind/apiVersion on the wire; the list does.
        page = [
            {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")} for obj in items[offset:end]
        ]
        return 200, {
            "kind": f"{res.kind}List",
            "apiVersion": res.api_version,
            "metadata": metadata,
            "items": page,
        }

    def subscribe(
        self, res: Resource, namespace: str | None, since: str | None
    ) -> tuple[Subscription | None, list[dict[str, Any]]]:
        """Register a watch; returns it and the events to replay first (or an ERROR 410)."""
        with self.lock:
            if since in (None, "", "0"):
                backlog = [
                    {"type": "ADDED", "object": copy.deepcopy(o)} for o in self._visible(res.name, namespace)
                ]
            else:
                try:
                    version = int(since)
                except ValueError:
                    version = -1
                if version < self.compacted - 1 or version < 0:
                    message = f"too old resource version: {since} ({self.compacted})"
                    return None, [{"type": "ERROR", "object": status_object(410, "Expired", message)}]
                backlog = [
                    {"type": kind, "object": copy.deepcopy(obj)}
                    for rv, name, kind, obj in self.history
                    if rv > version
                    and name == res.name
                    and (namespace is None or obj["metadata"].get("namespace") == namespace)
                ]
            sub = Subscription(res.name, namespace)
            self.subscriptions.append(sub)
            return sub, backlog

    def unsubscribe(self, sub: Subscription) -> None:
        """Forget an open watch."""
        with self.lock:
            if sub in self.subscriptions:
                self.subscriptions.remove(sub)


class _Handler(QuietHandler):
    protocol_version = "HTTP/1.1"
    server_double: KubeDouble

    def setup(self) -> None:
        super().setup()
        # As Go's net/http does: headers and body go out in separate writes, and Nagle's
        # algorithm against the client's delayed ACK would add 40 ms to every keep-alive request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # ---- plumbing --------------------------------------------------------------------

    def _send_json(self, code: int, body: Mapping[str, Any]) -> None:
        self.send_body(code, json.dumps(body).encode(), "application/json")

    def _raw_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _chunk(self, payload: Mapping[str, Any]) -> None:
        data = json.dumps(payload).encode() + b"\n"
        if self.server_double.odd_chunks:
            self._raw_chunk(data[: len(data) // 2])
            self._raw_chunk(data[len(data) // 2 :])
        else:
            self._raw_chunk(data)

    def _route(self, path: str) -> tuple[Resource | None, str | None, str | None]:
        group = KUEUE.rsplit("/", 1)[0] + "/"
        if path.startswith(group):
            version, _, rest = path[len(group) :].partition("/")
            if version not in self.server_double.kueue_versions:
                return None, None, None
            path = f"{KUEUE}/{rest}"
        for res in RESOURCES.values():
            if not path.startswith(res.prefix + "/") or res.prefix in self.server_double.unserved:
                continue
            parts = path[len(res.prefix) + 1 :].strip("/").split("/")
            if res.namespaced and len(parts) >= 3 and parts[0] == "namespaces" and parts[2] == res.name:
                if len(parts) == 3:
                    return res, parts[1], None
                if len(parts) == 4:
                    return res, parts[1], parts[3]
            elif parts[0] == res.name:
                if len(parts) == 1:
                    return res, None, None
                if len(parts) == 2 and not res.namespaced:
                    return res, None, parts[1]
        return None, None, None

    # ---- requests --------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802, PLR0911 - http.server calls it; one early answer per outcome, as the API server does
        double = self.server_double
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        res, namespace, name = self._route(url.path)
        record = RequestRecord("GET", url.path, res.name if res else None, namespace, name, query)
        with double.lock:
            double.requests.append(record)

        def answer(code: int, body: Mapping[str, Any]) -> None:
            record.status = code
            self._send_json(code, body)

        if double.token is not None and self.headers.get("Authorization") != f"Bearer {double.token}":
            answer(401, status_object(401, "Unauthorized", "Unauthorized"))
            return
        if res is None and url.path.rstrip("/") == "/version":
            major, minor, *_ = double.version.split(".")
            answer(
                200,
                {
                    "major": major,
                    "minor": minor,
                    "gitVersion": f"v{double.version}",
                    "platform": "linux/amd64",
                },
            )
            return
        if res is None:
            answer(
                404,
                status_object(
                    404, "NotFound", f"the server could not find the requested resource ({url.path})"
                ),
            )
            return
        unsupported = sorted(set(query) & {"labelSelector", "fieldSelector"})
        if unsupported:
            answer(400, status_object(400, "BadRequest", f"the double does not implement {unsupported}"))
            return
        code = double._fault_for(record)
        if code is not None:
            answer(code, status_object(code, REASONS.get(code, "InternalError"), f"injected fault {code}"))
            return
        if name is not None:
            obj = double.get(res.kind, namespace or "", name)
            if obj is None:
                answer(404, status_object(404, "NotFound", f'{res.name} "{name}" not found'))
            else:
                answer(200, obj)
            return
        if record.watch:
            record.status = 200
            self._watch(res, namespace, query)
            return
        limit = int(query["limit"]) if query.get("limit", "").isdigit() else None
        answer(*double.list_body(res, namespace, limit, query.get("continue")))

    def _do_other(self) -> None:
        self._send_json(405, status_object(405, "MethodNotAllowed", "the double is read-only"))

    do_POST = do_PUT = do_PATCH = do_DELETE = _do_other  # noqa: N815 - the stdlib's handler names

    def _watch(self, res: Resource, namespace: str | None, query: Mapping[str, str]) -> None:
        double = self.server_double
        sub, backlog = double.subscribe(res, namespace, query.get("resourceVersion"))
        timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds", "").isdigit() else None
        deadline = time.monotonic() + timeout if timeout else None
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if double.odd_chunks and backlog:
                self._raw_chunk(b"".join(json.dumps(e).encode() + b"\n" for e in backlog))
            else:
                for event in backlog:
                    self._chunk(event)
            while sub is not None and not double._closing.is_set():
                wait = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
                if wait <= 0:
                    break
                try:
                    signal, payload = sub.events.get(timeout=wait)
                except queue.Empty:
                    if self._client_gone():
                        return
                    continue
                if signal == "drop":
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if not self._deliver(res, signal, payload):
                    break
            self.wfile.write(b"0\r\n\r\n")  # the terminating chunk: a clean end
        except OSError:
            self.close_connection = True
        finally:
            if sub is not None:
                double.unsubscribe(sub)

    def _client_gone(self) -> bool:
        """The client closed its end (a real server learns it on its next write)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _deliver(self, res: Resource, signal: str, payload: Any) -> bool:
        """Write what a signal asks for; False when the stream should end."""
        if signal == "event":
            self._chunk(payload)
            return True
        if signal == "bookmark":
            with self.server_double.lock:
                version = str(self.server_double.rv)
            mark = {"kind": res.kind, "apiVersion": res.api_version, "metadata": {"resourceVersion": version}}
            self._chunk({"type": "BOOKMARK", "object": mark})
            return True
        if signal == "expire":
            self._chunk(
                {"type": "ERROR", "object": status_object(410, "Expired", "too old resource version")}
            )
        return False  # "expire" and "end"


# ---- realistic objects -----------------------------------------------------------------


def _quantities(base: Mapping[str, str], extended: Mapping[str, int]) -> dict[str, str]:
    return {**base, **{k: str(v) for k, v in extended.items()}}


def node(
    name: str,
    gpus: int = 8,
    resource: str = "nvidia.com/gpu",
    *,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[tuple[str, str, str]] = (),
    unschedulable: bool = False,
    ready: bool = True,
    extra: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """A GPU node as the kubelet and the NVIDIA device plugin report it."""
    extended = {resource: gpus, **(extra or {})} if gpus or extra else {}
    base = {"cpu": "96", "memory": "1056762544Ki", "ephemeral-storage": "1843948744Ki", "pods": "110"}
    spec: dict[str, Any] = {"podCIDR": "10.244.1.0/24", "providerID": f"kind://docker/gpu/{name}"}
    if taints:
        spec["taints"] = [{"key": k, **({"value": v} if v else {}), "effect": e} for k, v, e in taints]
    if unschedulable:
        spec["unschedulable"] = True
    conditions = [
        {
            "type": t,
            "status": "False",
            "reason": f"KubeletHas{r}",
            "lastHeartbeatTime": CREATED,
            "lastTransitionTime": CREATED,
        }
        for t, r in (
            ("MemoryPressure", "SufficientMemory"),
            ("DiskPressure", "NoDiskPressure"),
            ("PIDPressure", "SufficientPID"),
        )
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True" if ready else "Unknown",
            "reason": "KubeletReady" if ready else "NodeStatusUnknown",
            "message": "kubelet is posting ready status" if ready else "Kubelet stopped posting node status.",
            "lastHeartbeatTime": CREATED,
            "lastTransitionTime": CREATED,
        }
    )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                **(labels or {}),
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": spec,
        "status": {
            "capacity": _quantities(base, extended),
            "allocatable": _quantities(base, extended),
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.10"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, name).hex,
                "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
                "bootID": str(uuid.uuid5(uuid.NAMESPACE_OID, name)),
                "kernelVersion": "6.8.0-45-generic",
                "osImage": "Ubuntu 22.04.5 LTS",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kubeletVersion": "v1.31.2",
                "kubeProxyVersion": "v1.31.2",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def controller(api_version: str, kind: str, name: str) -> dict[str, Any]:
    """An ownerReference to the controller ``kind``/``name`` (a fresh uid), which blocks the owner's
    deletion while this object stands, as the ReplicaSet and the scheduler write them."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": str(uuid.uuid4()),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _container(name: str, gpus: int, resource: str, limits_only: bool) -> dict[str, Any]:
    limits: dict[str, str] = {"cpu": "8", "memory": "64Gi"}
    requests: dict[str, str] = {"cpu": "4", "memory": "48Gi"}
    if gpus:
        limits[resource] = str(gpus)
        if not limits_only:
            requests[resource] = str(gpus)
    return {
        "name": name,
        "image": "vllm/vllm-openai:v0.6.3",
        "ports": [{"containerPort": 8000, "protocol": "TCP"}],
        "resources": {"limits": limits, "requests": requests},
        "terminationMessagePath": "/dev/termination-log",
        "imagePullPolicy": "IfNotPresent",
    }


def pod_spec(
    gpus: int = 1,
    resource: str = "nvidia.com/gpu",
    *,
    node_selector: Mapping[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    affinity: dict[str, Any] | None = None,
    limits_only: bool = False,
) -> dict[str, Any]:
    """A GPU inference pod spec as the API server returns it, with default tolerations."""
    spec: dict[str, Any] = {
        "containers": [_container("vllm", gpus, resource, limits_only)],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            *(tolerations or []),
        ],
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = affinity
    return spec


def pod(
    name: str,
    namespace: str = "default",
    *,
    labels: Mapping[str, str] | None = None,
    node: str | None = None,
    gpus: int = 1,
    resource: str = "nvidia.com/gpu",
    phase: str | None = None,
    ready: bool = False,
    deleting: bool = False,
    limits_only: bool = False,
    owner: str | None = None,
    created: str | None = None,
    scheduled_at: str | None = None,
    ready_at: str | None = None,
    scheduling_gates: Iterable[str] = (),
    claim_template: str | None = None,
    extended_claim: str | None = None,
) -> dict[str, Any]:
    """A pod; bound when ``node`` is given; phase Running when bound, else Pending.

    ``created``, ``scheduled_at`` and ``ready_at`` set the creation time and when the
    PodScheduled and Ready conditions turned True (RFC 3339; all ``CREATED`` by default).
    ``scheduling_gates`` holds the pod back (Kueue's ``kueue.x-k8s.io/admission``), as the API
    server reports it: Pending with ``PodScheduled`` False, reason ``SchedulingGated``.
    ``claim_template`` adds a ``resourceClaims`` entry from that ResourceClaimTemplate (its claim
    ``<pod>-gpu``); ``extended_claim`` names the claim the scheduler wrote for the pod's
    extended-resource request served by DRA (``status.extendedResourceClaimStatus``, KEP-5004).
    """
    spec = pod_spec(gpus, resource, limits_only=limits_only)
    gates = list(scheduling_gates)
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if claim_template:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": claim_template}]
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    phase = phase or ("Running" if node else "Pending")
    conditions = [
        {
            "type": "PodScheduled",
            "status": "True" if node else "False",
            "lastTransitionTime": scheduled_at or created or CREATED,
        }
    ]
    if gates:
        conditions[0].update(
            reason="SchedulingGated", message="Scheduling is blocked due to non-empty scheduling gates"
        )
    elif not node:
        conditions[0].update(
            reason="Unschedulable", message=f"0/3 nodes are available: 3 Insufficient {resource}."
        )
    else:
        spec["nodeName"] = node
        conditions += [
            {"type": "Initialized", "status": "True", "lastTransitionTime": CREATED},
            {
                "type": "ContainersReady",
                "status": "True" if ready else "False",
                "lastTransitionTime": CREATED,
            },
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                "lastTransitionTime": ready_at or created or CREATED,
            },
        ]
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": dict(labels or {}),
    }
    if created:
        metadata["creationTimestamp"] = created
    if owner:
        metadata["ownerReferences"] = [controller("apps/v1", "ReplicaSet", owner)]
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-01T09:00:00Z"
        metadata["deletionGracePeriodSeconds"] = 30
    status: dict[str, Any] = {"phase": phase, "conditions": conditions, "qosClass": "Burstable"}
    if node:
        status.update(hostIP="10.0.0.10", podIP="10.244.1.7", startTime=CREATED)
    if claim_template and node:
        status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]
    if extended_claim:
        status["extendedResourceClaimStatus"] = {
            "requestMappings": [
                {"containerName": "vllm", "resourceName": resource, "requestName": "container-0-request-0"}
            ],
            "resourceClaimName": extended_claim,
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def deployment(
    name: str,
    namespace: str = "default",
    *,
    replicas: int = 1,
    gpus: int = 1,
    resource: str = "nvidia.com/gpu",
    match_labels: Mapping[str, str] | None = None,
    match_expressions: list[dict[str, Any]] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    affinity: dict[str, Any] | None = None,
    template_labels: Mapping[str, str] | None = None,
    claim_template: str | None = None,
) -> dict[str, Any]:
    """A Deployment whose pods request ``gpus`` of ``resource``, with its selector and status.

    ``template_labels`` adds pod-template labels (Kueue's ``kueue.x-k8s.io/queue-name``);
    ``claim_template`` gives each pod a claim from that ResourceClaimTemplate.
    """
    labels = dict(match_labels if match_labels is not None else {"app": name})
    selector: dict[str, Any] = {"matchLabels": labels}
    template_spec = pod_spec(
        gpus, resource, node_selector=node_selector, tolerations=tolerations, affinity=affinity
    )
    if claim_template:
        template_spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": claim_template}]
        template_spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    if match_expressions:
        selector["matchExpressions"] = match_expressions
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app": name},
            "annotations": {"deployment.kubernetes.io/revision": "1"},
        },
        "spec": {
            "replicas": replicas,
            "selector": selector,
            "template": {
                "metadata": {"labels": {**labels, **(template_labels or {})}},
                "spec": template_spec,
            },
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
            },
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
        },
        "status": {"observedGeneration": 1, "replicas": replicas, "updatedReplicas": replicas},
    }


def scaledobject(
    name: str,
    namespace: str = "default",
    *,
    target: str | None = None,
    kind: str | None = None,
    api_version: str | None = None,
    fallback: bool = False,
) -> dict[str, Any]:
    """A ScaledObject with this scaler's trigger; ``fallback`` sets KEDA's Fallback condition True."""
    ref: dict[str, Any] = {"name": target or name}
    if kind:
        ref["kind"] = kind
    if api_version:
        ref["apiVersion"] = api_version
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "scaleTargetRef": ref,
            "minReplicaCount": 1,
            "maxReplicaCount": 16,
            "pollingInterval": 15,
            "triggers": [
                {
                    "type": "external",
                    "metadata": {
                        "scalerAddress": "llm-gpu-scaler.keda.svc:9090",
                        "minReplicas": "1",
                        "maxReplicas": "16",
                    },
                }
            ],
        },
        "status": {
            "hpaName": f"keda-hpa-{name}",
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "ScaledObjectReady"},
                {
                    "type": "Fallback",
                    "status": "True" if fallback else "False",
                    "reason": "FallbackExists" if fallback else "NoFallbackFound",
                },
            ],
        },
    }


def hpa(
    scaledobject: str,
    namespace: str = "default",
    *,
    metrics: list[dict[str, Any]] | None = None,
    min_replicas: int = 2,
    max_replicas: int = 16,
    current: int = 2,
    desired: int = 2,
    conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The HPA KEDA creates for a ScaledObject (``keda-hpa-<name>``), scaling on this scaler's metric.

    ``metrics`` replaces the spec's metrics, e.g. with a CPU target as KEDA 2.7 writes it
    while the scaler is unreachable.
    """
    external = {
        "type": "External",
        "external": {
            "metric": {
                "name": "s0-llm-inference-replicas",
                "selector": {"matchLabels": {"scaledobject.keda.sh/name": scaledobject}},
            },
            "target": {"type": "AverageValue", "averageValue": "1"},
        },
    }
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": f"keda-hpa-{scaledobject}", "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": scaledobject},
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "metrics": [external] if metrics is None else metrics,
        },
        "status": {
            "currentReplicas": current,
            "desiredReplicas": desired,
            "conditions": conditions
            or [
                {
                    "type": "AbleToScale",
                    "status": "True",
                    "reason": "ReadyForNewScale",
                    "lastTransitionTime": CREATED,
                },
                {
                    "type": "ScalingActive",
                    "status": "True",
                    "reason": "ValidMetricFound",
                    "lastTransitionTime": CREATED,
                },
                {
                    "type": "ScalingLimited",
                    "status": "False",
                    "reason": "DesiredWithinRange",
                    "lastTransitionTime": CREATED,
                },
            ],
        },
    }


# ---- DRA (resource.k8s.io/v1) and Kueue (kueue.x-k8s.io/v1beta1), as their controllers write them ----

NVIDIA_DRIVER = "gpu.nvidia.com"
WHOLE_GPU = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
MIG = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"


def api_object(
    api_version: str, kind: str, name: str, spec: dict[str, Any], namespace: str | None = None, **fields: Any
) -> dict[str, Any]:
    """An object of ``kind`` named ``name``, in ``namespace`` unless it is cluster-scoped (None): its
    ``spec`` and any other top-level ``fields`` (``status``)."""
    metadata = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec, **fields}


def deviceclass(name: str, expression: str, extended_resource_name: str | None = None) -> dict[str, Any]:
    """A DeviceClass as the NVIDIA DRA driver's chart installs it (``gpu.nvidia.com``, ``mig.nvidia.com``);
    ``extended_resource_name`` serves that extended resource through it (KEP-5004)."""
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    if extended_resource_name:
        spec["extendedResourceName"] = extended_resource_name
    return api_object("resource.k8s.io/v1", "DeviceClass", name, spec)


def _gpu_attributes(index: int, node: str, kind: str = "gpu", **more: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": {"string": kind},
        "uuid": {"string": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}-{index}')}"},
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": "Hopper"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "driverVersion": {"version": "570.124.6"},
        "cudaDriverVersion": {"version": "12.8.0"},
        "index": {"int": index},
        "minor": {"int": index},
        "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{index:02x}"},
        **more,
    }


def resourceslice(
    node: str,
    gpus: int = 8,
    *,
    generation: int = 1,
    name: str | None = None,
    slices: int = 1,
    first: int = 0,
) -> dict[str, Any]:
    """The ResourceSlice the NVIDIA DRA driver's kubelet plugin publishes for a node of whole GPUs:
    one of the pool's ``slices`` (its ``resourceSliceCount``), holding GPUs ``first`` on."""
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": _gpu_attributes(i, node),
            "capacity": {"memory": {"value": "81559Mi"}},
        }
        for i in range(first, first + gpus)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": name or f"{node}-gpu.nvidia.com-x7k2p",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": node,
                    "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, node)),
                    "controller": True,
                }
            ],
        },
        "spec": {
            "driver": NVIDIA_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": slices},
            "devices": devices,
        },
    }


# An A100 40GB's MIG placements: (profile, memory slices taken, where each placement starts)
A100_PROFILES = (("1g.5gb", 1, range(7)), ("3g.20gb", 4, (0, 4)), ("7g.40gb", 8, (0,)))


def resourceslices_mig(node: str, gpus: int = 1) -> list[dict[str, Any]]:
    """A node of partitionable A100s (KEP-4815) as the NVIDIA driver publishes it on 1.36: one slice of
    shared counters (each GPU's eight memory slices) and one of devices: each MIG placement, and the
    whole GPU, consuming the slices it occupies. Allocating one leaves the overlapping ones unallocatable."""
    counter_sets, devices = [], []
    for g in range(gpus):
        counters = {f"memory-slice-{i}": {"value": "1"} for i in range(8)}
        counters["memory"] = {"value": "40Gi"}
        counter_sets.append({"name": f"gpu-{g}-counter-set", "counters": counters})
        for profile, size, starts in A100_PROFILES:
            for start in starts:
                taken = {f"memory-slice-{i}": {"value": "1"} for i in range(start, start + size)}
                taken["memory"] = {"value": f"{5 * size}Gi"}
                whole = profile == "7g.40gb"
                devices.append(
                    {
                        "name": f"gpu-{g}" if whole else f"gpu-{g}-mig-{profile.replace('.', '')}-{start}",
                        "attributes": _gpu_attributes(
                            g,
                            node,
                            "gpu" if whole else "mig",
                            **({} if whole else {"profile": {"string": profile}}),
                        ),
                        "capacity": {"memory": {"value": f"{5 * size}Gi"}},
                        "consumesCounters": [{"counterSet": f"gpu-{g}-counter-set", "counters": taken}],
                    }
                )
    pool = {"name": node, "generation": 1, "resourceSliceCount": 2}
    base = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice"}
    return [
        {**base, "metadata": {"name": f"{node}-gpu.nvidia.com-counters"},
         "spec": {"driver": NVIDIA_DRIVER, "nodeName": node, "pool": pool, "sharedCounters": counter_sets}},
        {**base, "metadata": {"name": f"{node}-gpu.nvidia.com-devices"},
         "spec": {"driver": NVIDIA_DRIVER, "nodeName": node, "pool": pool, "devices": devices}},
    ]  # fmt: skip


def resourceclaim(
    name: str,
    namespace: str,
    node: str,
    devices: Iterable[str],
    *,
    pod: str | None = None,
    device_class: str = "gpu.nvidia.com",
    extended: bool = False,
) -> dict[str, Any]:
    """An allocated ResourceClaim: its request, and the devices of ``node``'s pool it got. ``extended``:
    the claim the scheduler writes for a pod's extended-resource request (KEP-5004)."""
    chosen = list(devices)
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if extended:
        meta["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    if pod:
        meta["ownerReferences"] = [controller("v1", "Pod", pod)]
    request = "container-0-request-0" if extended else "gpu"
    status: dict[str, Any] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": request, "driver": NVIDIA_DRIVER, "pool": node, "device": d} for d in chosen
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            },
            "allocationTimestamp": CREATED,
        }
    }
    if pod:
        status["reservedFor"] = [{"resource": "pods", "name": pod, "uid": str(uuid.uuid4())}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": request,
                        "exactly": {
                            "deviceClassName": device_class,
                            "allocationMode": "ExactCount",
                            "count": len(chosen),
                        },
                    }
                ]
            }
        },
        "status": status,
    }  # fmt: skip


def resourceclaimtemplate(
    name: str, namespace: str, device_class: str, count: int = 1, selectors: Iterable[str] = ()
) -> dict[str, Any]:
    """A ResourceClaimTemplate: each pod's claim asks for ``count`` devices of ``device_class``."""
    exactly: dict[str, Any] = {
        "deviceClassName": device_class,
        "allocationMode": "ExactCount",
        "count": count,
    }
    chosen = [{"cel": {"expression": e}} for e in selectors]
    if chosen:
        exactly["selectors"] = chosen
    spec = {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}
    return api_object("resource.k8s.io/v1", "ResourceClaimTemplate", name, spec, namespace)


def _active(message: str) -> dict[str, Any]:
    return {
        "type": "Active",
        "status": "True",
        "reason": "Ready",
        "message": message,
        "lastTransitionTime": CREATED,
        "observedGeneration": 1,
    }


def clusterqueue(
    name: str,
    nominal: int,
    used: int = 0,
    *,
    cohort: str | None = None,
    borrowing_limit: int | None = None,
    lending_limit: int | None = None,
    flavor: str = "h100",
    resource: str = "nvidia.com/gpu",
    version: str = "v1beta1",
) -> dict[str, Any]:
    """A ClusterQueue with GPU, CPU and memory quota in one flavor, and its status as Kueue writes it
    (``flavorsReservation`` and ``flavorsUsage``: ``used`` GPUs, ``borrowed`` past the nominal), at
    Kueue's API ``version`` (v1beta2 names the cohort ``cohortName``)."""
    gpu: dict[str, Any] = {"name": resource, "nominalQuota": nominal}
    if borrowing_limit is not None:
        gpu["borrowingLimit"] = borrowing_limit
    if lending_limit is not None:
        gpu["lendingLimit"] = lending_limit
    usage = [
        {
            "name": flavor,
            "resources": [
                {"name": "cpu", "total": str(4 * used), "borrowed": "0"},
                {"name": "memory", "total": f"{48 * used}Gi", "borrowed": "0"},
                {"name": resource, "total": str(used), "borrowed": str(max(0, used - nominal))},
            ],
        }
    ]
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", resource],
                "flavors": [
                    {
                        "name": flavor,
                        "resources": [
                            {"name": "cpu", "nominalQuota": "512"},
                            {"name": "memory", "nominalQuota": "4Ti"},
                            gpu,
                        ],
                    }
                ],
            }
        ],
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "preemption": {
            "reclaimWithinCohort": "Never",
            "borrowWithinCohort": {"policy": "Never"},
            "withinClusterQueue": "Never",
        },
        "stopPolicy": "None",
    }  # fmt: skip
    if cohort:
        spec["cohortName" if version == "v1beta2" else "cohort"] = cohort
    status = {
        "conditions": [_active("Can admit new workloads")],
        "flavorsReservation": usage,
        "flavorsUsage": usage,
        "pendingWorkloads": 0,
        "reservingWorkloads": used,
        "admittedWorkloads": used,
    }
    return api_object(f"kueue.x-k8s.io/{version}", "ClusterQueue", name, spec, status=status)


def localqueue(name: str, namespace: str, cluster_queue: str, version: str = "v1beta1") -> dict[str, Any]:
    """A LocalQueue pointing a namespace's workloads at a ClusterQueue, at Kueue's API ``version``."""
    status = {
        "conditions": [_active("Can submit new workloads to localQueue")],
        "pendingWorkloads": 0,
        "reservingWorkloads": 0,
        "admittedWorkloads": 0,
    }
    spec = {"clusterQueue": cluster_queue, "stopPolicy": "None"}
    return api_object(f"kueue.x-k8s.io/{version}", "LocalQueue", name, spec, namespace, status=status)


def kubeconfig(path: Path, server: str, token: str) -> Path:
    """A kubeconfig file (JSON is YAML) that points the real client at the double with a bearer token."""
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "double", "cluster": {"server": server}}],
                "users": [{"name": "scaler", "user": {"token": token}}],
                "contexts": [{"name": "double", "context": {"cluster": "double", "user": "scaler"}}],
                "current-context": "double",
            }
        )
    )
    return path
