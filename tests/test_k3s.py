"""The inventory against a real API server and scheduler: k3s in Docker (testcontainers).

The single k3s node is made to advertise four ``nvidia.com/gpu`` (the documented way to
advertise an extended resource: a JSON patch of the node's status), then a Deployment
asking one GPU per replica is scaled past what fits. The real scheduler leaves the
excess Pending, and ``workload()`` must agree with it.

Needs a Docker engine; without one the tests skip and say why.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client
from kubernetes import config as _config
from kubernetes.dynamic import DynamicClient

from scaler.sources.kubernetes import InventoryOptions, KubernetesInventory, Unknown, WorkloadState
from tests import k8s_double as k8s
from tests.helpers import eventually

pytestmark = pytest.mark.docker

K3S_IMAGE = "rancher/k3s:v1.31.2-k3s1"
NS = "inference"
GPU = "nvidia.com/gpu"
OPTIONS = InventoryOptions(backoff_initial_seconds=0.2, backoff_max_seconds=2, failure_grace_seconds=30)
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "scaledobjects.keda.sh"},
    "spec": {
        "group": "keda.sh",
        "scope": "Namespaced",
        "names": {
            "plural": "scaledobjects",
            "singular": "scaledobject",
            "kind": "ScaledObject",
            "listKind": "ScaledObjectList",
        },
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}

T = TypeVar("T")

# The kubernetes package ships py.typed but leaves these unannotated: call them through Any,
# as scaler/sources/kubernetes.py does.
kube_config: Any = _config
new_dynamic_client: Any = DynamicClient


def require_docker() -> None:
    """Skip (with the reason) unless a Docker engine answers."""
    # The catch is blind on purpose: any failure to reach an engine, whatever its type, means
    # no Docker here (BLE is not in the project's ruff set).
    try:
        import docker

        docker.from_env(timeout=5).ping()
    except Exception as exc:  # noqa: BLE001, RUF100
        pytest.skip(f"no Docker engine: {type(exc).__name__}: {exc}")


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A kubeconfig for a k3s cluster in Docker, kept up for the module's tests."""
    require_docker()
    try:
        from testcontainers.community.k3s import K3SContainer
    except ImportError:  # testcontainers before the community split
        from testcontainers.k3s import K3SContainer

    with K3SContainer(image=K3S_IMAGE) as cluster:
        path = tmp_path_factory.mktemp("k3s") / "kubeconfig.yaml"
        path.write_text(cluster.config_yaml())
        yield path


@pytest.fixture(scope="module")
def cluster(kubeconfig: Path) -> DynamicClient:
    """A dynamic client on k3s, with the KEDA CRD, a namespace and four GPUs on the node."""
    configuration = client.Configuration()
    kube_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    api = client.ApiClient(configuration)
    dynamic: DynamicClient = new_dynamic_client(api)
    dynamic.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition").create(
        body=CRD
    )
    dynamic.resources.get(api_version="v1", kind="Namespace").create(
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    )
    nodes = dynamic.resources.get(api_version="v1", kind="Node")
    name = nodes.get().items[0].metadata.name
    patch = [
        {"op": "add", "path": "/status/capacity/nvidia.com~1gpu", "value": "4"},
        {"op": "add", "path": "/status/allocatable/nvidia.com~1gpu", "value": "4"},
    ]
    client.CoreV1Api(api).patch_node_status(name, patch, _content_type="application/json-patch+json")
    return dynamic


def create_scaledobject(dynamic: DynamicClient, body: dict[str, Any]) -> None:
    """Create a ScaledObject, retrying while the just-created CRD is not yet served."""
    custom = client.CustomObjectsApi(dynamic.client)
    body = {k: v for k, v in body.items() if k != "status"}

    def attempt() -> bool:
        try:
            custom.create_namespaced_custom_object("keda.sh", "v1alpha1", NS, "scaledobjects", body)
        except client.exceptions.ApiException as exc:
            if exc.status == 404:  # the CRD is not established yet
                return False
            raise
        return True

    eventually(attempt, bool, timeout=30, every=0.5)


def test_workload_agrees_with_the_real_scheduler(cluster: DynamicClient, kubeconfig: Path) -> None:
    """Inventory counts match what the real scheduler binds, and the excess stays Pending."""
    deployments = cluster.resources.get(api_version="apps/v1", kind="Deployment")
    body = k8s.deployment("llama", NS, replicas=1, gpus=1)
    template = body["spec"]["template"]["spec"]
    template["containers"][0].update(image="registry.k8s.io/pause:3.10", ports=[])
    template["containers"][0]["resources"] = {"limits": {GPU: "1"}}  # requests default to limits
    deployments.create(body={k: v for k, v in body.items() if k != "status"})
    create_scaledobject(cluster, k8s.scaledobject("llama", NS))
    create_scaledobject(cluster, k8s.scaledobject("sts", NS, target="db", kind="StatefulSet"))

    with KubernetesInventory.from_config(str(kubeconfig), options=OPTIONS) as inventory:
        assert inventory.wait_synced(60), inventory.problem()

        def state() -> WorkloadState | Unknown:
            return inventory.workload(NS, "llama")

        one = eventually(
            state,
            lambda s: (
                isinstance(s, WorkloadState) and s.pending_replicas == 0 and s.gpu_schedulable_replicas == 3
            ),
            timeout=90,
            every=0.5,
        )
        assert isinstance(one, WorkloadState)
        assert (one.current_replicas, one.ready_replicas + one.starting_replicas) == (1, 1)
        assert (one.gpus_per_replica, one.gpu_resource) == (1, GPU)

        # six replicas on four GPUs: the scheduler binds four and leaves two Pending
        deployments.patch(name="llama", namespace=NS, body={"spec": {"replicas": 6}})
        six = eventually(
            state,
            lambda s: (
                isinstance(s, WorkloadState)
                and s.current_replicas == 6
                and s.pending_replicas == 2
                and s.gpu_schedulable_replicas == 0
            ),
            timeout=90,
            every=0.5,
        )
        assert isinstance(six, WorkloadState)
        assert six.ready_replicas + six.starting_replicas == 4
        assert "0 of 4 nvidia.com/gpu free" in six.explanation

        unsupported = inventory.workload(NS, "sts")
        assert isinstance(unsupported, Unknown)
        assert "scales StatefulSet db" in unsupported.reason
