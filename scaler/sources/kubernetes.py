"""Kubernetes inventory: the cluster's nodes, pods, Deployments, ScaledObjects and HPAs, DRA's
devices and claims and Kueue's queues, read through watched caches.

One ``scaler.sources.reflector.Reflector`` per resource keeps a local cache in step with
the API server (list, then watch, and recover: that module says how). Reads never touch the
API: ``workload()`` answers from the caches in microseconds, or ``Unknown(reason)`` while a
cache has not synced yet or a resource has been failing for longer than
``failure_grace_seconds``, so callers fail open. RBAC: get, list and watch on nodes, pods,
deployments.apps and scaledobjects.keda.sh (and horizontalpodautoscalers.autoscaling, for
the landing monitor only), cluster-wide; list and watch on resourceslices, deviceclasses,
resourceclaims and resourceclaimtemplates (resource.k8s.io) and clusterqueues and localqueues
(kueue.x-k8s.io). Those last six are optional: a cluster that does not serve them (404) has
empty caches, said once; one the ClusterRole does not grant (403) leaves the GPU fit counting
allocatable GPUs only, and says so in the explanation.

Here too: the client's configuration (``api_client``: in-cluster, or a kubeconfig named
when it is missing), and the pods' index by namespace and by GPU use. ``scaler.inventory``
turns the raw JSON into values and does the arithmetic.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes import config as _config
from kubernetes.client.exceptions import ApiException

from scaler.decider.coldstart import WINDOW as COLD_START_WINDOW
from scaler.decider.coldstart import PodTimes
from scaler.errors import UnreachableError
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
from scaler.inventory.dra import (
    ClaimTemplate,
    ClassMatcher,
    DeviceClass,
    DraInventory,
    ResourceClaim,
    ResourceSlice,
    claimtemplate_from_json,
    deviceclass_from_json,
    dra_inventory,
    resourceclaim_from_json,
    resourceslice_from_json,
)
from scaler.inventory.kueue import (
    ClusterQueue,
    KueueInventory,
    LocalQueue,
    clusterqueue_from_json,
    localqueue_from_json,
)
from scaler.model import HpaStatus
from scaler.sources.reflector import Key, Logger, Reflector, Store, WatchOptions, describe

__all__ = [
    "InventoryOptions",
    "KubernetesConfigError",
    "KubernetesInventory",
    "KubernetesReadError",
    "Unknown",
    "WorkloadState",
]

# The config loaders carry no annotations in some client versions; call them as Any.
kube_config: Any = _config

KEDA_GROUP, KEDA_VERSION, KEDA_PLURAL = "keda.sh", "v1alpha1", "scaledobjects"
KEDA_MISSING = "is KEDA installed? the ScaledObject CRD keda.sh/v1alpha1 was not found"
KUEUE_GROUP = "kueue.x-k8s.io"
# Every (API group, resource) the inventory lists and watches: what the ClusterRole must grant.
WATCHED_RESOURCES: tuple[tuple[str, str], ...] = (
    ("", "nodes"),
    ("", "pods"),
    ("apps", "deployments"),
    (KEDA_GROUP, KEDA_PLURAL),
    ("autoscaling", "horizontalpodautoscalers"),
    ("resource.k8s.io", "resourceslices"),
    ("resource.k8s.io", "deviceclasses"),
    ("resource.k8s.io", "resourceclaims"),
    ("resource.k8s.io", "resourceclaimtemplates"),
    (KUEUE_GROUP, "clusterqueues"),
    (KUEUE_GROUP, "localqueues"),
)
DRA_MISSING = "resource.k8s.io/v1 is served from Kubernetes 1.34"
# Kueue's API versions the inventory reads, the newest first: v1beta2 from Kueue 0.15 (its storage
# version from 0.16), v1beta1 from 0.3 (deprecated from 0.15; Kueue said it would stop serving it).
# Each list asks them in this order and reads the first the cluster serves.
KUEUE_VERSIONS = ("v1beta2", "v1beta1")
KUEUE_MISSING = "Kueue is not installed, or serves a version this scaler does not read (it reads " + (
    ", ".join(KUEUE_VERSIONS) + ")"
)


class ServedVersion:
    """A cluster-scoped list (and watch) of a custom resource at the first of ``versions`` the API
    serves: each list asks them in order and the watch after it uses the version that answered; a
    404 on every version is raised as one 404 naming them all (``KUEUE_VERSIONS`` for Kueue)."""

    def __init__(self, custom: Any, group: str, plural: str, versions: tuple[str, ...]) -> None:
        self._custom, self.group, self.plural, self.versions = custom, group, plural, versions
        self.version: str | None = None  # the version the last list read

    def __call__(self, **kwargs: Any) -> Any:
        """``list_cluster_custom_object`` at the served version (``watch=True``: the listed one)."""
        if kwargs.get("watch"):
            return self._custom.list_cluster_custom_object(
                self.group, self.version or self.versions[0], self.plural, **kwargs
            )
        for version in self.versions:
            try:
                answer = self._custom.list_cluster_custom_object(self.group, version, self.plural, **kwargs)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                continue
            self.version = version
            return answer
        self.version = None
        raise ApiException(
            status=404,
            reason=f"NotFound: {self.group} serves {self.plural} at none of {', '.join(self.versions)}",
        )


class KubernetesConfigError(UnreachableError):
    """No usable Kubernetes client configuration (in-cluster or kubeconfig)."""


class KubernetesReadError(LookupError):
    """The API did not give what was asked (not found, forbidden, unreachable); the message says
    what and why, without secrets."""


@dataclass(frozen=True, slots=True)
class InventoryOptions(WatchOptions):
    """Tuning for the watches (``WatchOptions``) and the GPU resources. The defaults suit a
    production cluster; tests shorten the times."""

    gpu_resource_patterns: tuple[str, ...] = GPU_RESOURCE_PATTERNS
    default_gpu_resource: str = DEFAULT_GPU_RESOURCE  # for gpusPerReplica when the template has no GPU
    kueue_versions: tuple[str, ...] = KUEUE_VERSIONS  # Kueue's API versions, the first served read


class _PodStore(Store[Pod]):
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


def _context_namespace(kubeconfig: str | None) -> str:
    """The namespace the kubeconfig's current context names, or "" when it names none."""
    try:
        _, active = kube_config.list_kube_config_contexts(config_file=kubeconfig)
    except (kube_config.ConfigException, OSError, ValueError, TypeError):
        return ""
    namespace = (active or {}).get("context", {}).get("namespace")
    return namespace if isinstance(namespace, str) else ""


def read_pod_times(
    kubeconfig: str | None, namespace: str, deployment: str, page_size: int = 500
) -> tuple[str, list[PodTimes]]:
    """One read through the real client, no watch: the Deployment ``namespace/deployment``
    ("" names the kubeconfig context's namespace, else ``default``) and, of the pods its
    selector matches that have not finished, when each was created, scheduled and became
    Ready. Returns ``namespace/deployment`` as read and the pods' times.

    KubernetesConfigError for a kubeconfig that cannot be used; KubernetesReadError for what
    the API did not give (the Deployment not found, RBAC, an unreachable server).
    """
    api = api_client(kubeconfig)
    namespace = namespace or _context_namespace(kubeconfig) or "default"
    where = f"Deployment {namespace}/{deployment}"
    # Raw JSON (``_preload_content=False``): the response, not the client's model, hence Any.
    apps: Any = client.AppsV1Api(api)
    core: Any = client.CoreV1Api(api)
    try:
        response = apps.read_namespaced_deployment(deployment, namespace, _preload_content=False)
        parsed = deployment_from_json(json.loads(response.data))
        if parsed.problem:
            raise KubernetesReadError(f"{where}: {parsed.problem}")
        pods: list[Pod] = []
        token: str | None = None
        while True:
            page = core.list_namespaced_pod(
                namespace, limit=page_size, _continue=token or None, _preload_content=False
            )
            body = json.loads(page.data)
            pods += [pod_from_json(item) for item in body.get("items") or []]
            token = (body.get("metadata") or {}).get("continue") or None
            if not token:
                break
    except KubernetesReadError:
        raise
    except Exception as exc:  # noqa: BLE001 - the client's errors have no common base; say which
        raise KubernetesReadError(f"{where}: {describe(exc)}") from None
    mine = [p for p in pods if not p.terminal and parsed.selector.matches(p.labels)]
    times = [PodTimes(p.name, p.created_at, p.scheduled_at, p.ready_at) for p in mine]
    return f"{namespace}/{deployment}", times


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
        self._nodes: Store[Node] = Store("nodes", self._lock, node_from_json, log)
        self._pods = _PodStore(self._lock, log)
        self._deployments: Store[Deployment] = Store(
            "deployments", self._lock, functools.partial(deployment_from_json, gpu_patterns=patterns), log
        )
        self._scaledobjects: Store[ScaledObject] = Store(KEDA_PLURAL, self._lock, scaledobject_from_json, log)
        # The HPAs KEDA creates: read by the landing monitor only, so their watch failing
        # (an older ClusterRole without them) leaves the rest of the inventory standing.
        self._hpas: Store[HpaStatus] = Store("horizontalpodautoscalers", self._lock, hpa_from_json, log)
        core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
        custom = client.CustomObjectsApi(api_client)
        autoscaling = client.AutoscalingV2Api(api_client)
        # (resource, its list call, its cache, what a 404 on the list means)
        sources: list[tuple[str, Callable[..., Any], Store[Any], str]] = [
            ("nodes", core.list_node, self._nodes, ""),
            ("pods", core.list_pod_for_all_namespaces, self._pods, ""),
            ("deployments", apps.list_deployment_for_all_namespaces, self._deployments, ""),
            (
                KEDA_PLURAL,
                functools.partial(custom.list_cluster_custom_object, KEDA_GROUP, KEDA_VERSION, KEDA_PLURAL),
                self._scaledobjects,
                KEDA_MISSING,
            ),
        ]
        self._reflectors = [
            Reflector(name, call, store, self._options, clock, log, self._stopping, missing)
            for name, call, store, missing in sources
        ]
        self._hpa_reflector = Reflector(
            "horizontalpodautoscalers",
            autoscaling.list_horizontal_pod_autoscaler_for_all_namespaces,
            self._hpas,
            self._options,
            clock,
            log,
            self._stopping,
        )
        # DRA and Kueue: optional APIs (a 404 means the cluster has none), read for the GPU fit.
        resource = client.ResourceV1Api(api_client)
        self._kueue_calls = {
            plural: ServedVersion(custom, KUEUE_GROUP, plural, self._options.kueue_versions)
            for plural in ("clusterqueues", "localqueues")
        }
        self._slices: Store[ResourceSlice] = Store("resourceslices", self._lock, resourceslice_from_json, log)
        self._classes: Store[DeviceClass] = Store("deviceclasses", self._lock, deviceclass_from_json, log)
        self._claims: Store[ResourceClaim] = Store("resourceclaims", self._lock, resourceclaim_from_json, log)
        self._templates: Store[ClaimTemplate] = Store(
            "resourceclaimtemplates", self._lock, claimtemplate_from_json, log
        )
        self._cluster_queues: Store[ClusterQueue] = Store(
            "clusterqueues", self._lock, clusterqueue_from_json, log
        )
        self._local_queues: Store[LocalQueue] = Store("localqueues", self._lock, localqueue_from_json, log)
        optional: list[tuple[Callable[..., Any], Store[Any], str]] = [
            (resource.list_resource_slice, self._slices, DRA_MISSING),
            (resource.list_device_class, self._classes, DRA_MISSING),
            (resource.list_resource_claim_for_all_namespaces, self._claims, DRA_MISSING),
            (resource.list_resource_claim_template_for_all_namespaces, self._templates, DRA_MISSING),
            (self._kueue_calls["clusterqueues"], self._cluster_queues, KUEUE_MISSING),
            (self._kueue_calls["localqueues"], self._local_queues, KUEUE_MISSING),
        ]
        self._optional = {
            store.resource: Reflector(
                store.resource, call, store, self._options, clock, log, self._stopping, missing, optional=True
            )
            for call, store, missing in optional
        }
        self._matcher = ClassMatcher()  # CEL verdicts, kept across rebuilds of the DRA inventory
        self._dra: tuple[tuple[int, ...], DraInventory] | None = None

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
    def _all_reflectors(self) -> list[Reflector]:
        return [*self._reflectors, self._hpa_reflector, *self._optional.values()]

    def _optional_problem(self, resources: tuple[str, ...], now: float) -> str | None:
        """Why optional resources cannot be used: failing or unlisted ones; for Kueue also not served."""
        problems = [p for r in resources if (p := self._optional[r].problem(now)) is not None]
        return "; ".join(problems) or None

    def _dra_inventory(self) -> DraInventory:
        """The DRA inventory of the caches, rebuilt only when one of them changed. Caller holds the lock."""
        stores = (self._slices, self._classes, self._claims, self._templates)
        versions = tuple(store.version for store in stores)
        problem = self._optional_problem(tuple(store.resource for store in stores), self._clock())
        if self._dra is None or self._dra[0] != versions or self._dra[1].problem != problem:
            built = dra_inventory(
                self._slices.items.values(),
                self._classes.items.values(),
                self._claims.items.values(),
                problem,
                self._matcher,
                self._templates.items.values(),
            )
            self._dra = (versions, built)
        return self._dra[1]

    def _kueue_inventory(self) -> KueueInventory:
        """Kueue's queues from the caches, or why they cannot be read. Caller holds the lock."""
        names = ("clusterqueues", "localqueues")
        problem = self._optional_problem(names, self._clock())
        absent = next((a for r in names if (a := self._optional[r].absent) is not None), None)
        if problem or absent:
            return KueueInventory(problem=problem or f"{KUEUE_GROUP} {absent}")
        return KueueInventory(
            dict(self._local_queues.items),
            {queue.name: queue for queue in self._cluster_queues.items.values()},
        )

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
            dra = self._dra_inventory()
            queues = self._kueue_inventory()
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
            dra,
            queues,
        )
        if isinstance(state, WorkloadState):
            recent = sorted(state.pod_times, key=lambda p: (p.created_at or 0.0, p.name))[-COLD_START_WINDOW:]
            with self._lock:
                self._pod_times[(namespace, deployment.name)] = tuple(recent)
        return state
