"""Shared by the decision-trace tests: an in-process scaler with its /metrics endpoint, two
ScaledObjects with full inputs, and readers for real HTTP scrapes."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from scaler.model import INPUTS, HpaStatus
from scaler.outputs.endpoint import DecisionCollector, MetricsEndpoint, install
from scaler.outputs.grpc_server import METRIC_NAME
from scaler.outputs.logs import DecisionLogger
from scaler.proto import externalscaler_pb2 as pb
from scaler.targets.registry import TargetKey
from tests.helpers import ScriptedSource, ServerThread

LLAMA = TargetKey("inference", "llama")
QWEN = TargetKey("research", "qwen")

METADATA: dict[TargetKey, dict[str, str]] = {
    # Queue-bound (a saturated fleet behind a backlog), clamped by maxReplicas, then by the GPUs.
    LLAMA: {
        "minReplicas": "2",
        "maxReplicas": "16",
        "targetQueuePerReplica": "10",
        "promptTokensPerSecondPerReplica": "9000",
        "generationTokensPerSecondPerReplica": "1800",
        "ttftObjectiveSeconds": "1.5",
    },
    # Pre-warm-bound (a window open all day, UTC), clamped by the GPU inventory.
    QWEN: {
        "minReplicas": "1",
        "maxReplicas": "8",
        "promptTokensPerSecondPerReplica": "9000",
        "generationTokensPerSecondPerReplica": "1800",
        "prewarmStart": "0 0 * * *",
        "prewarmEnd": "59 23 * * *",
        "prewarmReplicas": "6",
    },
}

LOAD: dict[TargetKey, dict[str, Any]] = {
    # 5 Ready replicas full (KV cache at 1) serve 2 requests/s, each in service 32 s, behind
    # 4,000 waiting: 0.4 requests/s per replica, so the backlog asks (2 + 4000 / 210) / 0.4 = 53.
    LLAMA: {
        "queue_waiting": 4000.0,
        "requests_running": 64.0,
        "prompt_tokens_per_s": 2250.0,
        "generation_tokens_per_s": 450.0,
        "current_replicas": 6,
        "ready_replicas": 5,
        "pending_replicas": 1,
        "starting_replicas": 0,
        "gpu_schedulable_replicas": 2,
        "ttft_p95_seconds": 0.9,
        "ttft_p99_seconds": 2.4,
        "ttft_over_objective": 0.03,
        "requests_per_s": 2.0,
        "cold_start_seconds": 210.0,
        "cold_start_pending_seconds": 3.0,
        "cold_start_samples": 12,
        "kv_cache_usage": 1.0,
        "router_queue_waiting": 0.0,
        "slots_per_replica": 64.0,
        "deployment_replicas": 6,
        "kueue_quota_replicas": 64,  # under a Kueue queue whose quota does not bind
        "hpa": HpaStatus("keda-hpa-llama", "inference", True, 0, 2, 16, 6, 6),
        "hpa_read": True,
    },
    QWEN: {
        "queue_waiting": 5.0,
        "requests_running": 10.0,
        "prompt_tokens_per_s": 3000.0,
        "generation_tokens_per_s": 600.0,
        "current_replicas": 3,
        "ready_replicas": 2,
        "pending_replicas": 0,
        "starting_replicas": 1,
        "gpu_schedulable_replicas": 1,
        "ttft_p95_seconds": 0.3,
        "ttft_p99_seconds": 0.7,
        "ttft_over_objective": 0.0,
        "requests_per_s": 3.0,
        "cold_start_seconds": 95.0,
        "cold_start_pending_seconds": 1.0,
        "cold_start_samples": 3,
        "kv_cache_usage": 0.2,
        "router_queue_waiting": 0.0,
        "slots_per_replica": 32.0,
        "deployment_replicas": 3,
        "kueue_quota_replicas": 64,
        "hpa_read": True,  # and no HPA found
    },
}


def full_inputs(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with every input of the table (``INPUTS``) that it does not give set to an
    example value (1 for a count, else 0.5), so that a new input is in a full decision too."""
    examples = {name: 1 if spec.count else 0.5 for name, spec in INPUTS.items()}
    return {**examples, **values}


def full_source() -> ScriptedSource:
    """A scripted source serving LOAD's full inputs for both ScaledObjects."""
    source = ScriptedSource()
    source.per_target = {key: full_inputs(values) for key, values in LOAD.items()}
    return source


class TracedServer:
    """ServerThread plus a decision series on its own registry, served on a free loopback port."""

    def __init__(
        self,
        source: ScriptedSource,
        clock: Callable[[], datetime] | None = None,
        refresh_interval_s: float = 3600.0,
        log: Any = None,
    ) -> None:
        self.thread = ServerThread(source=source, clock=clock, refresh_interval_s=refresh_interval_s)
        self.log = log
        self.registry = CollectorRegistry()

    def __enter__(self) -> TracedServer:
        self.thread.__enter__()
        self.trace: DecisionCollector = install(
            self.thread.runtime, self.registry, lambda: self.thread.service.rpc_counts
        )
        if self.log is not None:
            self.thread.runtime.sinks.append(DecisionLogger(self.log))
        self.metrics = MetricsEndpoint(self.registry, "127.0.0.1", 0)
        return self

    def __exit__(self, *exc: object) -> None:
        self.metrics.close()
        self.thread.__exit__(*exc)

    @property
    def address(self) -> str:
        """The /metrics endpoint's host:port."""
        return f"127.0.0.1:{self.metrics.port}"

    def register(self, *keys: TargetKey) -> None:
        """Ask for each target's metric as KEDA would; the first call waits for its first decision."""
        stub = self.thread.stub()
        for key in keys:
            ref = pb.ScaledObjectRef(name=key.name, namespace=key.namespace, scalerMetadata=METADATA[key])
            stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref, metricName=METRIC_NAME), timeout=5)

    def poll(self, key: TargetKey) -> None:
        """An IsActive call: keeps a known target registered without waiting on a decision."""
        ref = pb.ScaledObjectRef(name=key.name, namespace=key.namespace, scalerMetadata=METADATA[key])
        assert self.thread.stub().IsActive(ref, timeout=5).result is True

    def scrape_text(self) -> str:
        """The text of one real HTTP scrape of /metrics."""
        with urllib.request.urlopen(f"http://{self.address}/metrics", timeout=5) as reply:
            text: str = reply.read().decode()
        return text

    def scrape(self) -> list[tuple[str, dict[str, str], float]]:
        """Every sample of one real scrape: (name, labels, value)."""
        return [
            (s.name, dict(s.labels), s.value)
            for family in text_string_to_metric_families(self.scrape_text())
            for s in family.samples
        ]


def samples_for(
    samples: list[tuple[str, dict[str, str], float]], name: str, key: TargetKey
) -> list[tuple[dict[str, str], float]]:
    """The (labels, value) samples of metric ``name`` for one ScaledObject."""
    return [
        (labels, value)
        for sample_name, labels, value in samples
        if sample_name == name
        and labels.get("namespace") == key.namespace
        and labels.get("scaledobject") == key.name
    ]


def value_for(samples: list[tuple[str, dict[str, str], float]], name: str, key: TargetKey) -> float | None:
    """The one value of metric ``name`` for one ScaledObject, or None when absent."""
    found = samples_for(samples, name, key)
    assert len(found) <= 1, f"{name} has {len(found)} series for {key}"
    return found[0][1] if found else None
