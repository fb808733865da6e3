"""Decision seriess on /metrics: what each series carries, read back through real HTTP scrapes."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import urllib.error
import urllib.request
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
import structlog
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scaler.model import INPUTS, Decision, Inert, InertReason, Observation, Signal
from scaler.outputs.endpoint import SERIES, SERIES_BY_NAME, install, serve_metrics
from scaler.outputs.logs import DecisionLogger
from scaler.proto import externalscaler_pb2 as pb
from scaler.proto import externalscaler_pb2_grpc as pb_grpc
from scaler.sim.prometheus import find_binary, free_port
from scaler.targets.registry import Target, TargetKey, TargetRegistry
from scaler.targets.runtime import Runtime
from tests.conftest import require_prometheus
from tests.helpers import (
    ScriptedSource,
    StepClock,
    get_metrics,
    serve,
    slowdown_history,
    target_of,
    wait_serving,
)
from tests.observability import (
    LLAMA,
    LOAD,
    QWEN,
    TracedServer,
    full_source,
    samples_for,
    value_for,
)

ROOT = Path(__file__).resolve().parent.parent


class Capture:
    """A structlog-style logger that keeps each info event, its fields included, as a dict."""

    def __init__(self) -> None:
        self.events: list[dict[str, object]] = []

    def info(self, event: str, **fields: object) -> None:
        """Keep the event and its fields."""
        self.events.append({"event": event, **fields})


def json_logger(buffer: io.StringIO) -> object:
    """A structlog logger rendering JSON lines into ``buffer``, configured locally (no global state)."""
    return structlog.wrap_logger(
        structlog.PrintLogger(buffer),
        processors=[structlog.processors.add_log_level, structlog.processors.JSONRenderer()],
    )


@pytest.mark.e2e
def test_every_series_of_a_full_decision_is_exported_once_per_target() -> None:
    """With full inputs every series is exported, once per target, and the input age is zero."""
    clock = StepClock()
    with TracedServer(full_source(), clock=clock) as server:
        server.register(LLAMA, QWEN)
        history = slowdown_history(clock.now + timedelta(seconds=15), count=200)  # within the idle hour
        for target in server.thread.runtime.registry.targets():
            target.engine.warm(history)  # enough refreshes to fit the decode slowdown
        clock.advance(15 * (len(history) + 1))
        server.thread.refresh()  # a later decision: whether the first landed
        samples = server.scrape()
    names = {name for name, _, _ in samples}
    for spec in SERIES:
        assert spec.name in names, f"{spec.name} missing from a scrape with full inputs"
    for key in (LLAMA, QWEN):
        for spec in SERIES:
            if not spec.per_target or spec.extra_labels:
                continue
            assert len(samples_for(samples, spec.name, key)) == 1, f"{spec.name} for {key}"
        assert value_for(samples, "llm_scaler_input_age_seconds", key) == 0.0  # inputs fresh this refresh


@pytest.mark.e2e
def test_series_carry_the_decision_and_its_inputs() -> None:
    """The series carry each decision's replicas, proposals, binding, clamps, capacity and inputs."""
    with TracedServer(full_source(), clock=StepClock()) as server:
        server.register(LLAMA, QWEN)
        samples = server.scrape()
        targets = {t.key: t for t in server.thread.runtime.registry.targets()}
    for key in (LLAMA, QWEN):
        decision = targets[key].latest
        assert decision is not None
        assert value_for(samples, "llm_scaler_desired_replicas", key) == decision.replicas
        proposals = {
            labels["signal"]: value
            for labels, value in samples_for(samples, "llm_scaler_signal_proposed_replicas", key)
        }
        assert proposals == dict(decision.proposals)
        binding = samples_for(samples, "llm_scaler_binding_signal_info", key)
        assert [(labels["signal"], value) for labels, value in binding] == [(decision.binding.value, 1.0)]
        for field, value in LOAD[key].items():
            if field in ("deployment_replicas", "hpa", "hpa_read"):
                continue  # the landing monitor's: test_landing_series_carry_the_gap_and_its_reason
            series = INPUTS[field].series
            assert series is not None, field
            assert value_for(samples, series, key) == value, series
        assert value_for(samples, "llm_scaler_forecast_prompt_tokens_per_second", key) == pytest.approx(
            decision.forecast.prompt_tokens_per_s
        )
        assert (
            value_for(samples, "llm_scaler_ttft_objective_seconds", key)
            == targets[key].policy.ttft_objective_seconds
        )
        capacity = decision.capacity
        assert capacity is not None
        assert value_for(samples, "llm_scaler_capacity_prefill_tokens_per_second", key) == pytest.approx(
            capacity.prefill_tokens_per_s
        )
        assert value_for(samples, "llm_scaler_capacity_slots", key) == pytest.approx(capacity.slots)
        source = samples_for(samples, "llm_scaler_capacity_source_info", key)
        assert sorted((labels["resource"], labels["source"]) for labels, _ in source) == [
            ("prefill", capacity.prefill_source),
            ("slots", capacity.slots_source),
        ]
    # The scenario: llama is queue-bound, clamped to max then to what the GPUs fit; qwen pre-warms.
    assert value_for(samples, "llm_scaler_prewarm_active", LLAMA) == 0
    assert value_for(samples, "llm_scaler_prewarm_active", QWEN) == 1
    llama_clamps = {
        labels["kind"]: value
        for labels, value in samples_for(samples, "llm_scaler_clamp_held_back_replicas", LLAMA)
    }
    # The load signal sizes the arrivals and the backlog's drain within one more lead in one proposal:
    # at least the bare drain, (2 + 4000 / 210) / 0.4 = 53, with the queueing model's headroom on top;
    # max 16; GPUs fit (6 - 1 pending) + 2 schedulable = 7.
    asked = targets[LLAMA].latest.proposals[Signal.LOAD]  # type: ignore[union-attr]
    assert asked >= 53
    assert llama_clamps == {"max": asked - 16, "gpu_inventory": 16 - 7}
    assert value_for(samples, "llm_scaler_gpu_held_back_replicas", LLAMA) == 16 - 7
    assert value_for(samples, "llm_scaler_ttft_objective_seconds", QWEN) == 2.0  # the default


@pytest.mark.e2e
def test_absent_inputs_are_absent_series_never_zero() -> None:
    """Unknown inputs leave their series out instead of exporting zero; the decision is still there."""
    source = ScriptedSource()
    source.values = {"queue_waiting": 12.0}  # nothing else known: no replicas, no TTFT, no tokens
    with TracedServer(source, clock=StepClock()) as server:
        server.register(LLAMA)
        samples = server.scrape()
    present = {name for name, _, _ in samples_for_all(samples, LLAMA)}
    assert "llm_scaler_input_waiting_requests" in present
    for absent in (
        "llm_scaler_input_ttft_p95_seconds",
        "llm_scaler_input_ttft_p99_seconds",
        "llm_scaler_input_prompt_tokens_per_second",
        "llm_scaler_input_current_replicas",
        # Observation defaults these to 0; unknown while the replica counts are.
        "llm_scaler_input_pending_replicas",
        "llm_scaler_input_starting_replicas",
        "llm_scaler_input_gpu_schedulable_replicas",
        "llm_scaler_forecast_prompt_tokens_per_second",
        # token rates missing: the inputs were never complete, so there is no age
        "llm_scaler_input_age_seconds",
    ):
        assert absent not in present, f"{absent} exported without data"
    assert "llm_scaler_desired_replicas" in present


def samples_for_all(
    samples: list[tuple[str, dict[str, str], float]], key: TargetKey
) -> list[tuple[str, dict[str, str], float]]:
    """The samples labelled with one target's namespace and ScaledObject."""
    return [
        s for s in samples if s[1].get("namespace") == key.namespace and s[1].get("scaledobject") == key.name
    ]


@pytest.mark.e2e
def test_input_age_grows_while_inputs_are_missing() -> None:
    """While an input is missing, the input age counts the seconds since the last complete refresh."""
    clock = StepClock()
    source = full_source()
    with TracedServer(source, clock=clock) as server:
        server.register(LLAMA)
        del source.per_target[LLAMA]["prompt_tokens_per_s"]
        clock.advance(45)
        server.thread.refresh()
        clock.advance(30)
        samples = server.scrape()
    assert value_for(samples, "llm_scaler_input_age_seconds", LLAMA) == 75.0
    assert value_for(samples, "llm_scaler_input_prompt_tokens_per_second", LLAMA) is None


@pytest.mark.e2e
def test_counters_count_decisions_by_binding_signal_and_pending_pod_seconds() -> None:
    """Counters count decisions per binding signal and held-back replicas times the refresh interval."""
    clock = StepClock()
    published: list[tuple[Target, Decision]] = []
    with TracedServer(full_source(), clock=clock) as server:
        server.thread.runtime.sinks.append(lambda target, decision: published.append((target, decision)))
        server.register(LLAMA, QWEN)
        for _ in range(3):
            clock.advance(15)
            server.thread.refresh()
        samples = server.scrape()
        interval = server.thread.runtime.refresh_interval_s
    for key in (LLAMA, QWEN):
        mine = [d for t, d in published if t.key == key]
        assert len(mine) == 4  # the first decision and three refreshes
        by_signal: dict[str, float] = {}
        for d in mine:
            by_signal[d.binding.value] = by_signal.get(d.binding.value, 0) + 1
        counted = {
            labels["signal"]: value
            for labels, value in samples_for(samples, "llm_scaler_decisions_total", key)
        }
        assert counted == by_signal
        avoided = value_for(samples, "llm_scaler_pending_pod_seconds_avoided_total", key)
        assert avoided == sum(d.gpu_held_back for d in mine) * interval
        assert avoided is not None
        assert avoided > 0  # both scenarios hold replicas back


@pytest.mark.e2e
def test_forgotten_targets_take_their_series_and_counters_with_them() -> None:
    """A target idle past the limit loses all its series and counters; a polled one keeps them."""
    clock = StepClock()
    with TracedServer(full_source(), clock=clock) as server:
        server.register(LLAMA, QWEN)
        idle = server.thread.runtime.registry.idle_seconds
        clock.advance(idle / 2)
        server.poll(QWEN)  # polled again: stays
        clock.advance(idle / 2 + 1)
        server.thread.refresh()
        samples = server.scrape()
    assert samples_for_all(samples, LLAMA) == []
    assert value_for(samples, "llm_scaler_desired_replicas", QWEN) is not None
    assert samples_for(samples, "llm_scaler_decisions_total", QWEN)


@pytest.mark.e2e
def test_log_line_and_metrics_carry_the_same_proposals_and_clamps() -> None:
    """The JSON decision log line and the metrics agree on proposals, clamps, binding and replicas."""
    buffer = io.StringIO()
    with TracedServer(full_source(), clock=StepClock(), log=json_logger(buffer)) as server:
        server.register(LLAMA, QWEN)
        samples = server.scrape()
    events = [json.loads(line) for line in buffer.getvalue().splitlines()]
    for key in (LLAMA, QWEN):
        logged = [
            e
            for e in events
            if e["event"] == "decision" and (e["namespace"], e["scaledobject"]) == (key.namespace, key.name)
        ]
        assert len(logged) == 1  # one refresh, one event
        line = logged[0]
        proposals = {
            labels["signal"]: value
            for labels, value in samples_for(samples, "llm_scaler_signal_proposed_replicas", key)
        }
        assert proposals == line["proposals"]
        held_back = {
            labels["kind"]: value
            for labels, value in samples_for(samples, "llm_scaler_clamp_held_back_replicas", key)
        }
        assert held_back == {c["kind"]: max(0, c["before"] - c["after"]) for c in line["clamps"]}
        active = {labels["kind"] for labels, _ in samples_for(samples, "llm_scaler_clamp_active", key)}
        assert active == {c["kind"] for c in line["clamps"]}
        assert line["clamps"], "the scenario clamps both targets"
        binding = samples_for(samples, "llm_scaler_binding_signal_info", key)
        assert binding[0][0]["signal"] == line["binding"]
        assert value_for(samples, "llm_scaler_desired_replicas", key) == line["replicas"]
        assert value_for(samples, "llm_scaler_gpu_held_back_replicas", key) == line["gpu_held_back"]
        assert value_for(samples, "llm_scaler_input_waiting_requests", key) == line["inputs"]["queue_waiting"]


def test_registry_is_passed_in_and_names_are_checked() -> None:
    """Series go to the registry passed in, never the global one, and installing twice is refused."""
    registry = CollectorRegistry()
    runtime = Runtime(TargetRegistry(), ScriptedSource(), StepClock())
    install(runtime, registry)
    assert "llm_scaler_" not in generate_latest(REGISTRY).decode()
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        install(runtime, registry)
    assert serve_metrics(runtime, "127.0.0.1", 0) is None


def test_every_series_is_documented() -> None:
    """docs/metrics.md names every exported series and no series the scaler does not export."""
    doc = (ROOT / "docs" / "metrics.md").read_text()
    for spec in SERIES:
        assert f"`{spec.name}`" in doc, f"{spec.name} is not in docs/metrics.md"
    documented = set(re.findall(r"`(llm_scaler_[a-z0-9_]+)`", doc))
    unknown = documented - set(SERIES_BY_NAME)
    assert not unknown, f"docs/metrics.md names series the scaler does not export: {unknown}"


@pytest.mark.e2e
def test_exposition_passes_promtool_lint() -> None:
    """promtool checks names against Prometheus' conventions (units, _total on counters)."""
    require_prometheus()
    with TracedServer(full_source(), clock=StepClock()) as server:
        server.register(LLAMA, QWEN)
        text = server.scrape_text()
    result = subprocess.run(
        [find_binary("promtool"), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    families = {f.name for f in text_string_to_metric_families(text)}
    assert "llm_scaler_decisions" in families  # counters are typed as counters


@pytest.mark.slow
@pytest.mark.e2e
def test_scaler_serve_exposes_metrics_on_the_metrics_port() -> None:
    """`scaler serve` exposes decisions on SCALER_METRICS_PORT, logs it, and closes it on SIGTERM."""
    grpc_port, metrics_port = free_port(), free_port()
    env = {**os.environ, "SCALER_METRICS_PORT": str(metrics_port), "SCALER_LOG_FORMAT": "json"}
    proc = serve(grpc_port, env=env)
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        wait_serving(proc, channel)
        ref = pb.ScaledObjectRef(name="llama", namespace="inference", scalerMetadata={"minReplicas": "3"})
        stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
        get_metrics(stub, pb.GetMetricsRequest(scaledObjectRef=ref))
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as reply:
            text = reply.read().decode()
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
        }
        assert (
            samples[("llm_scaler_desired_replicas", (("namespace", "inference"), ("scaledobject", "llama")))]
            == 3
        )
        assert any(name.startswith("process_") for name, _ in samples)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert proc.stderr is not None
        logs = [json.loads(line) for line in proc.stderr.read().splitlines() if line.startswith("{")]
        serving = next(entry for entry in logs if entry["event"] == "serving")
        assert serving["metrics_port"] == metrics_port
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.e2e
def test_refresh_interval_is_exported_without_target_labels() -> None:
    """The refresh interval is one series with no target labels."""
    with TracedServer(full_source(), clock=StepClock(), refresh_interval_s=7.5) as server:
        samples = server.scrape()
    interval = [
        (labels, value) for name, labels, value in samples if name == "llm_scaler_refresh_interval_seconds"
    ]
    assert interval == [({}, 7.5)]


@pytest.mark.e2e
def test_server_series_count_rpcs_refreshes_and_targets() -> None:
    """Server series count gRPC requests by method and code, refreshes, and registered targets."""
    with TracedServer(full_source(), clock=StepClock()) as server:
        server.register(LLAMA, QWEN)
        for _ in range(3):
            server.poll(LLAMA)
        server.thread.refresh()
        samples = server.scrape()
    by_name = {(name, tuple(sorted(labels.items()))): value for name, labels, value in samples}
    assert by_name[("llm_scaler_grpc_requests_total", (("code", "OK"), ("method", "GetMetrics")))] == 2
    assert by_name[("llm_scaler_grpc_requests_total", (("code", "OK"), ("method", "IsActive")))] == 3
    assert by_name[("llm_scaler_targets", ())] == 2
    assert by_name[("llm_scaler_refreshes_total", ())] >= 1
    assert by_name[("llm_scaler_refresh_duration_seconds", ())] >= 0


@pytest.mark.e2e
def test_decision_log_of_changes_only_skips_repeats() -> None:
    """A changes-only decision logger writes a repeated decision once; the plain one every time."""
    with TracedServer(full_source(), clock=StepClock()) as server:
        server.register(LLAMA)
        target = server.thread.runtime.registry.targets()[0]
        assert target.latest is not None
        every, changes = Capture(), Capture()
        for sink in (DecisionLogger(every), DecisionLogger(changes, only_changes=True)):
            for _ in range(3):
                sink(target, target.latest)
    assert len(every.events) == 3
    assert len(changes.events) == 1
    assert changes.events[0]["replicas"] == target.latest.replicas
    assert changes.events[0]["inert"] == []


def test_a_decision_that_becomes_inert_is_logged_with_why_even_when_only_changes_are() -> None:
    """The same target and binding, now stale: a changes-only log writes it, its inert field the reason."""
    target = target_of(LLAMA, {"minReplicas": "2"})
    decided = target.engine.decide(Observation(now=datetime(2026, 12, 1, tzinfo=UTC), current_replicas=2))
    stale = Inert(InertReason.STALE, "the last sample is 8m old", ("queue_waiting",))
    log = Capture()
    sink = DecisionLogger(log, only_changes=True)
    for decision in (decided, decided, replace(decided, inert=(stale,)), replace(decided, inert=(stale,))):
        sink(target, decision)
    assert [e["inert"] for e in log.events] == [
        [],
        [{"reason": "stale", "text": "the last sample is 8m old", "inputs": ["queue_waiting"]}],
    ]


@pytest.mark.e2e
def test_landing_series_carry_the_gap_and_its_reason() -> None:
    """llama's 7 is on its way to its 6 replicas; qwen has no HPA, so its 6 will not come of its 3."""
    clock = StepClock()
    with TracedServer(full_source(), clock=clock) as server:
        server.register(LLAMA, QWEN)
        first = server.scrape()
        for _ in range(2):
            clock.advance(15)
            server.thread.refresh()
        samples = server.scrape()
        targets = {t.key: t.latest for t in server.thread.runtime.registry.targets()}
    assert not samples_for(first, "llm_scaler_landing_gap_replicas", LLAMA)  # nothing decided before
    for key, landed, reason in ((LLAMA, 6, "in_flight"), (QWEN, 3, "no_hpa")):
        decision = targets[key]
        assert decision is not None
        assert decision.landing is not None
        assert decision.landing.gap > 0
        assert value_for(samples, "llm_scaler_landed_replicas", key) == landed
        gap = samples_for(samples, "llm_scaler_landing_gap_replicas", key)
        assert [(labels["reason"], value) for labels, value in gap] == [(reason, decision.landing.gap)]
        assert value_for(samples, "llm_scaler_landing_gap_seconds", key) == 15.0  # first seen one refresh ago
