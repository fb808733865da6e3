"""The manifests in manifests/ and the Dockerfile: validated offline against Kubernetes' schemas,
KEDA's CRD and promtool, and checked against each other and against the scaler's own flags."""

from __future__ import annotations

import copy
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from scaler.cli import build_parser
from scaler.config import parse_metadata
from scaler.decider import coldstart
from scaler.outputs.endpoint import SERIES_BY_NAME
from scaler.service.settings import from_args
from scaler.sim.prometheus import find_binary
from tests.conftest import require_prometheus
from tests.crd import CRD, crd_validator

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = ROOT / "manifests"
ENTRY_POINTS = {
    "default": MANIFESTS,
    "with-monitoring": MANIFESTS / "with-monitoring",
    "example": MANIFESTS / "example",
}
# Kinds defined by CRDs: validated below by their own means (KEDA's schema, promtool, selectors).
CUSTOM_KINDS = {"ScaledObject", "ServiceMonitor", "PrometheusRule"}
# The oldest Kubernetes the manifests target (grpc probes are GA since 1.27) and the newest
# kubernetes-validate knows.
KUBERNETES_VERSIONS = ("1.30", kubernetes_validate.utils.latest_version())


# ---- a minimal kustomize: enough to list every object an entry point installs ----------


def load_yaml(path: Path) -> list[dict[str, Any]]:
    """Every non-empty YAML document in ``path``."""
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def kustomization(folder: Path) -> dict[str, Any]:
    """The kustomization.yaml in ``folder``, parsed."""
    doc: dict[str, Any] = yaml.safe_load((folder / "kustomization.yaml").read_text())
    return doc


def build(folder: Path) -> list[dict[str, Any]]:
    """Objects of a kustomization: its resources, components and generated ConfigMaps.

    The namespace transformer is applied to objects that name no namespace; labels, images
    and other transformers are not. It keeps these checks free of subprocesses (unit tests,
    in ``--fast``); tests/test_manifest_image.py checks that it lists the objects the real
    ``kubectl kustomize`` renders.
    """
    k = kustomization(folder)
    objects: list[dict[str, Any]] = []
    for entry in [*k.get("resources", []), *k.get("components", [])]:
        path = (folder / entry).resolve()
        objects.extend(build(path) if path.is_dir() else load_yaml(path))
    for generator in k.get("configMapGenerator", []):
        options = generator.get("options", {})
        data = {Path(f).name: (folder / f).read_text() for f in generator.get("files", [])}
        meta: dict[str, Any] = {"name": generator["name"], "labels": dict(options.get("labels", {}))}
        if options.get("annotations"):
            meta["annotations"] = dict(options["annotations"])
        objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})
    namespace = k.get("namespace")
    if namespace:
        for obj in objects:
            if obj["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
                obj["metadata"].setdefault("namespace", namespace)
    return objects


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The objects of kind ``kind``."""
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The one object of kind ``kind``; fails unless there is exactly one."""
    found = by_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


@pytest.fixture(scope="module")
def default() -> list[dict[str, Any]]:
    """The objects the default entry point installs."""
    return build(MANIFESTS)


@pytest.fixture(scope="module")
def monitoring() -> list[dict[str, Any]]:
    """The objects the with-monitoring entry point installs."""
    return build(MANIFESTS / "with-monitoring")


@pytest.fixture(scope="module")
def example() -> list[dict[str, Any]]:
    """The objects the example entry point installs."""
    return build(MANIFESTS / "example")


def kustomization_folders() -> Iterator[Path]:
    """Every folder under manifests/ holding a kustomization.yaml, sorted."""
    for path in sorted(MANIFESTS.rglob("kustomization.yaml")):
        yield path.parent


# ---- structure ---------------------------------------------------------------------------


def test_every_kustomization_entry_resolves_and_every_manifest_is_used() -> None:
    """Every kustomization entry exists and is the right kind, and every manifest file is installed."""
    referenced: set[Path] = set()
    for folder in kustomization_folders():
        k = kustomization(folder)
        for entry in k.get("resources", []):
            path = (folder / entry).resolve()
            assert path.exists(), f"{folder}/kustomization.yaml: {entry} does not exist"
            if path.is_dir():
                assert (path / "kustomization.yaml").is_file(), f"{entry} is a folder without a kustomization"
                assert kustomization(path)["kind"] == "Kustomization"
            referenced.add(path)
        for entry in k.get("components", []):
            path = (folder / entry).resolve()
            assert kustomization(path)["kind"] == "Component", f"{entry} is not a kustomize Component"
        for generator in k.get("configMapGenerator", []):
            for name in generator["files"]:
                path = (folder / name).resolve()
                assert path.is_file(), f"{name}: missing or outside {folder}"
                assert path.is_relative_to(folder), f"{name}: missing or outside {folder}"
                referenced.add(path)
    manifests = {p.resolve() for p in MANIFESTS.rglob("*.yaml") if p.name != "kustomization.yaml"}
    manifests |= {p.resolve() for p in MANIFESTS.rglob("*.json")}
    unused = sorted(str(p.relative_to(MANIFESTS)) for p in manifests - referenced)
    assert not unused, f"files no kustomization installs: {unused}"


def test_monitoring_objects_are_optional(
    default: list[dict[str, Any]], monitoring: list[dict[str, Any]]
) -> None:
    """The default install has no Prometheus CRD objects; with-monitoring adds exactly two."""
    kinds = {o["kind"] for o in default}
    assert not kinds & {"ServiceMonitor", "PrometheusRule"}, (
        "the default install must not need Prometheus CRDs"
    )
    names = {(o["kind"], o["metadata"]["name"]) for o in default}
    with_monitoring = {(o["kind"], o["metadata"]["name"]) for o in monitoring}
    assert with_monitoring == names | {
        ("ServiceMonitor", "llm-gpu-scaler"),
        ("PrometheusRule", "llm-gpu-scaler"),
    }


# ---- schemas -----------------------------------------------------------------------------


def test_every_builtin_object_validates_against_kubernetes_schemas(
    monitoring: list[dict[str, Any]], example: list[dict[str, Any]]
) -> None:
    """Every built-in object validates strictly on the oldest and newest targeted Kubernetes."""
    checked = set()
    for obj in [*monitoring, *example]:
        if obj["kind"] in CUSTOM_KINDS:
            continue
        for version in KUBERNETES_VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                path = ".".join(str(p) for p in exc.path)
                pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} on {version}: {path}: {exc.message}")
        checked.add(obj["kind"])
    assert checked == {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "ConfigMap",
    }
    assert {o["kind"] for o in [*monitoring, *example]} - checked == CUSTOM_KINDS


def test_the_kubernetes_validator_rejects_a_misspelt_field(default: list[dict[str, Any]]) -> None:
    """The strict Kubernetes validator rejects a misspelt field."""
    broken = copy.deepcopy(one(default, "Deployment"))
    broken["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"grpc": {"port": 9090}}
    with pytest.raises(kubernetes_validate.ValidationError, match="readinesProbe"):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[-1], strict=True)


@pytest.fixture(scope="module")
def scaledobject_validator() -> jsonschema.protocols.Validator:
    """A strict validator for KEDA's ScaledObject CRD, for the module."""
    return crd_validator(CRD)


def scaledobjects() -> list[tuple[str, dict[str, Any]]]:
    """Every ScaledObject in the deployed and the embedded example, with its file."""
    return [
        (str(path.relative_to(ROOT)), obj)
        for path in (
            MANIFESTS / "example" / "scaledobject.yaml",
            ROOT / "scaler" / "examples" / "scaledobject.yaml",
        )
        for obj in load_yaml(path)
    ]


@pytest.mark.parametrize(
    ("source", "obj"),
    scaledobjects(),
    ids=lambda value: value if isinstance(value, str) else value["metadata"]["name"],
)
def test_scaledobjects_validate_against_kedas_crd(
    source: str, obj: dict[str, Any], scaledobject_validator: jsonschema.protocols.Validator
) -> None:
    """Each example ScaledObject is a keda.sh/v1alpha1 ScaledObject valid under KEDA's strict CRD."""
    assert obj["apiVersion"] == "keda.sh/v1alpha1"
    assert obj["kind"] == "ScaledObject"
    errors = [f"{'.'.join(map(str, e.path))}: {e.message}" for e in scaledobject_validator.iter_errors(obj)]
    assert not errors, f"{source}: {errors}"


def test_the_crd_validator_rejects_what_the_api_server_would(
    scaledobject_validator: jsonschema.protocols.Validator,
) -> None:
    """The CRD validator rejects an unknown field, a missing required one and a bad enum value."""
    _, obj = scaledobjects()[0]
    misspelt = copy.deepcopy(obj)
    misspelt["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behaviour"] = {}
    assert not scaledobject_validator.is_valid(misspelt)
    no_replicas = copy.deepcopy(obj)
    del no_replicas["spec"]["fallback"]["replicas"]
    assert not scaledobject_validator.is_valid(no_replicas)
    bad_behavior = copy.deepcopy(obj)
    bad_behavior["spec"]["fallback"]["behavior"] = "sometimes"
    assert not scaledobject_validator.is_valid(bad_behavior)


# ---- the example -------------------------------------------------------------------------


def test_embedded_example_is_the_deployed_example() -> None:
    """The example embedded in the package equals the one in manifests/example."""
    (_, deployed), (_, embedded) = scaledobjects()
    assert embedded == deployed


def test_example_scaledobject_fits_the_scaler_and_the_workload(
    example: list[dict[str, Any]], default: list[dict[str, Any]]
) -> None:
    """The example's bounds, address, target, GPUs and HPA behavior agree with the scaler and workload."""
    so = one(example, "ScaledObject")
    spec = so["spec"]
    assert len(spec["triggers"]) == 1, "the GPU check can only hold a scale-up as the only trigger"
    assert "scalingModifiers" not in spec.get("advanced", {})
    trigger = spec["triggers"][0]
    assert trigger["type"] == "external"
    metadata = trigger["metadata"]
    policy = parse_metadata({k: str(v) for k, v in metadata.items()})
    assert all(isinstance(v, str) for v in metadata.values()), "KEDA metadata values are strings"
    # The HPA's bounds and the scaler's agree.
    assert spec["minReplicaCount"] == policy.min_replicas
    assert spec["maxReplicaCount"] == policy.max_replicas
    assert spec["fallback"]["replicas"] <= policy.max_replicas
    assert spec["fallback"]["failureThreshold"] >= 1
    # scalerAddress is the headless Service's name, namespace and gRPC port.
    service = one(default, "Service")
    grpc_port = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "grpc")
    meta = service["metadata"]
    assert metadata["scalerAddress"] == f"{meta['name']}.{meta['namespace']}.svc.cluster.local:{grpc_port}"
    # It scales the example's vLLM Deployment, in its namespace, one GPU per replica.
    deployment = one(example, "Deployment")
    assert spec["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert so["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    gpus = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
    assert gpus == (policy.gpus_per_replica or 1)
    # HPA behavior: no second scale-down hold on top of the scaler's, scale-ups applied at once.
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert policy.cold_start_seconds is None, "the cold start is measured from the pods"
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] <= 60 < coldstart.DEFAULT_LEAD_S
    assert behavior["scaleUp"]["stabilizationWindowSeconds"] == 0
    assert behavior["scaleUp"]["tolerance"] == 0, "a one-replica step lands (KEP-4951, KEDA 2.18+)"
    assert "tolerance" not in behavior["scaleDown"], "the default 10% keeps a small hold on the way down"
    assert (
        max(p["value"] for p in behavior["scaleUp"]["policies"] if p["type"] == "Pods") >= policy.max_replicas
    )


# ---- the scaler's own objects -------------------------------------------------------------


def test_cluster_role_grants_read_access_to_exactly_what_the_inventory_watches(
    default: list[dict[str, Any]],
) -> None:
    """The ClusterRole grants get/list/watch on exactly the resources the inventory watches (nodes and
    pods to Kueue's queues), bound to the scaler's account."""
    from scaler.sources.kubernetes import WATCHED_RESOURCES

    role = one(default, "ClusterRole")
    granted = set()
    for rule in role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, f"unexpected rule fields: {rule}"
        assert sorted(rule["verbs"]) == ["get", "list", "watch"], rule
        granted |= {(group, resource) for group in rule["apiGroups"] for resource in rule["resources"]}
    assert granted == set(WATCHED_RESOURCES)
    # ... and that list is what the inventory starts a watch for (constructing one connects to nothing)
    from kubernetes import client

    from scaler.sources.kubernetes import KubernetesInventory

    inventory = KubernetesInventory(client.ApiClient(client.Configuration(host="http://127.0.0.1:9")))
    assert sorted(r.resource for r in inventory._all_reflectors) == sorted(p for _, p in WATCHED_RESOURCES)
    assert ("resource.k8s.io", "resourceslices") in granted
    assert ("kueue.x-k8s.io", "clusterqueues") in granted
    assert not by_kind(default, "Role")
    assert not by_kind(default, "RoleBinding")
    binding = one(default, "ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "llm-gpu-scaler",
    }
    account = one(default, "ServiceAccount")
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": account["metadata"]["name"],
            "namespace": account["metadata"]["namespace"],
        }
    ]
    pod = one(default, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]


def container_env(container: dict[str, Any]) -> dict[str, str]:
    """A container's environment as a name-to-value map."""
    return {e["name"]: e["value"] for e in container.get("env", [])}


def test_deployment_is_hardened_and_matches_the_scalers_flags(
    default: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Deployment runs hardened, and its ports, probes and grace period match the scaler's flags."""
    deployment = one(default, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security.get("privileged", False) is False
    for kind in ("requests", "limits"):
        assert set(container["resources"][kind]) == {"cpu", "memory"}, kind

    # The flags the container gets, read by the scaler's own parser.
    env = container_env(container)
    assert all(name.startswith("SCALER_") for name in env)
    for name in list(os.environ):
        if name.startswith("SCALER_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = from_args(build_parser().parse_args(["serve"]))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"grpc": args.port, "metrics": args.metrics_port}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"]["port"] == args.port, probe
    # SIGTERM comes after the preStop hook; then in-flight RPCs get --grace seconds.
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    assert pod["terminationGracePeriodSeconds"] > int(pre_stop[1]) + args.grace_seconds


def test_pods_meet_the_restricted_pod_security_standard(default: list[dict[str, Any]]) -> None:
    """The namespace enforces restricted; the pod uses only safe volume types, no host namespace or port."""
    namespace = one(default, "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    pod = one(default, "Deployment")["spec"]["template"]["spec"]
    for volume in pod.get("volumes", []):
        assert set(volume) - {"name"} <= {"emptyDir", "configMap", "secret", "projected", "downwardAPI"}
    assert not pod.get("hostNetwork")
    assert not pod.get("hostPID")
    assert not pod.get("hostIPC")
    for container in pod["containers"]:
        assert not any("hostPort" in p for p in container["ports"])


def test_service_is_headless_and_reaches_both_ports(default: list[dict[str, Any]]) -> None:
    """The Service is headless, selects the scaler's pods and targets both named ports."""
    service = one(default, "Service")
    assert service["spec"]["clusterIP"] == "None", "KEDA's round-robin balancer needs every pod address"
    pod_template = one(default, "Deployment")["spec"]["template"]
    labels = pod_template["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    container_ports = {p["name"] for p in pod_template["spec"]["containers"][0]["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} == container_ports == {"grpc", "metrics"}
    budget = one(default, "PodDisruptionBudget")
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_service_monitor_scrapes_the_metrics_port_keeping_our_labels(
    monitoring: list[dict[str, Any]],
) -> None:
    """The ServiceMonitor scrapes the Service's metrics port at /metrics with honorLabels."""
    monitor = one(monitoring, "ServiceMonitor")
    service = one(monitoring, "Service")
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["port"] == "metrics"
    assert endpoint["path"] == "/metrics"
    assert endpoint["honorLabels"] is True, "the series' namespace label is the ScaledObject's"


def test_dashboard_configmap_is_generated_for_the_grafana_sidecar(default: list[dict[str, Any]]) -> None:
    """The dashboard ConfigMap carries the sidecar's label, a stable name and the dashboard file."""
    (configmap,) = [o for o in by_kind(default, "ConfigMap") if o["metadata"]["name"].endswith("dashboard")]
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["data"] == {"dashboard.json": (MANIFESTS / "grafana" / "dashboard.json").read_text()}
    generator = kustomization(MANIFESTS / "grafana")["configMapGenerator"][0]
    assert generator["options"]["disableNameSuffixHash"] is True  # a stable name for the sidecar
    # kubectl apply (client side) keeps the object in an annotation limited to 256 KiB.
    assert len(configmap["data"]["dashboard.json"]) < 200_000


# ---- alerts ------------------------------------------------------------------------------

ALERT_TESTS = ROOT / "tests" / "data" / "prometheusrule_test.yaml"


def rule_groups(monitoring: list[dict[str, Any]]) -> dict[str, Any]:
    """The PrometheusRule's groups, as a promtool rules file."""
    rule = one(monitoring, "PrometheusRule")
    return {"groups": rule["spec"]["groups"]}


@pytest.mark.e2e
def test_alert_rules_pass_promtool(monitoring: list[dict[str, Any]], tmp_path: Path) -> None:
    """The alert rules pass promtool's check and its unit tests."""
    require_prometheus()
    promtool = find_binary("promtool")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_groups(monitoring)))
    (tmp_path / "rules_test.yaml").write_text(ALERT_TESTS.read_text())
    for command in (["check", "rules", "rules.yaml"], ["test", "rules", "rules_test.yaml"]):
        result = subprocess.run(
            [promtool, *command], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
        )
        assert result.returncode == 0, f"promtool {' '.join(command)}:\n{result.stdout}{result.stderr}"


def test_alerts_cover_what_they_must_and_query_real_series(monitoring: list[dict[str, Any]]) -> None:
    """The required alerts exist, query only exported series and carry severity and annotations."""
    rules = [r for group in rule_groups(monitoring)["groups"] for r in group["rules"]]
    alerts = {r["alert"] for r in rules}
    assert {
        "LLMScalerDecisionsStale",
        "LLMScalerGPUSuppressionSustained",
        "LLMScalerTTFTAboveObjective",
        "LLMScalerInert",
    } <= alerts
    for rule in rules:
        for name in re.findall(r"llm_scaler_[a-z0-9_]+", rule["expr"]):
            assert name in SERIES_BY_NAME, f"{rule['alert']} queries {name}, which the scaler does not export"
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert {"summary", "description"} <= set(rule["annotations"])


def test_the_not_landed_alert_fires_on_exactly_the_reasons_the_hpa_does_not_explain(
    monitoring: list[dict[str, Any]],
) -> None:
    """The not-landed alert matches exactly landing.ALERTING, a strict subset of the known reasons."""
    from scaler.decider import landing

    rules = {r.get("alert"): r for group in rule_groups(monitoring)["groups"] for r in group["rules"]}
    (pattern,) = re.findall(r'reason=~"([^"]+)"', rules["LLMScalerDecisionNotLanded"]["expr"])
    assert set(pattern.split("|")) == landing.ALERTING
    assert set(landing.WHY) > landing.ALERTING, "every alerting reason is one the monitor gives"


# ---- the image -----------------------------------------------------------------------------


def test_dockerfile_builds_from_files_that_exist_and_runs_as_non_root() -> None:
    """The image cannot be built here (no Docker engine); check what can be checked without one."""
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]
    stages = [line for line in lines if line.startswith("FROM ")]
    assert len(stages) == 2, "a build stage and a runtime stage"
    for line in lines:
        if line.startswith("COPY ") and "--from=" not in line:
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
    assert any("scripts/gen_proto.py" in line and line.startswith("RUN ") for line in lines)
    runtime = lines[lines.index(stages[1]) :]
    assert not any("grpcio-tools" in line for line in runtime), "build tools stay in the build stage"
    user = next(line.split()[1] for line in runtime if line.startswith("USER "))
    assert user.split(":")[0].isdigit(), "a numeric non-root user"
    assert user.split(":")[0] != "0", "a numeric non-root user"
    pod_user = one(build(MANIFESTS), "Deployment")["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    assert int(user.split(":")[0]) == pod_user
    assert "EXPOSE 9090 8080" in runtime
    assert 'ENTRYPOINT ["scaler", "serve"]' in runtime
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert "scaler/proto/externalscaler_pb2.py" in ignored, "the image regenerates the gRPC code"
    # Dependencies in their own layer, pinned, before the source: a code change reuses it.
    assert lines.index("COPY constraints.txt ./") < lines.index("COPY scaler/ scaler/")
    assert "!constraints.txt" in ignored
    assert any(line.startswith("RUN /opt/venv/bin/pip install --no-deps .") for line in lines)
    labels = " ".join(runtime)
    for key in ("title", "description", "version", "licenses", "base.name"):
        assert f"org.opencontainers.image.{key}=" in labels, key
    from scaler import __version__

    assert f"ARG VERSION={__version__}" in runtime, "the image's default version is the package's"
