"""The landing monitor: what the Deployment runs against what the scaler asked, and why not."""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from scaler.config import engine_for
from scaler.decider import landing
from scaler.decider.landing import LandingMonitor
from scaler.hpa import (
    hpa_from_json,
    landing_step_up,
    quantity,
    tolerances,
    within_hpa_tolerance,
)
from scaler.model import HpaStatus, Observation
from scaler.proto import externalscaler_pb2 as pb
from scaler.proto import externalscaler_pb2_grpc as pb_grpc
from scaler.sim.fleet import SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus, free_port
from tests import k8s_double as k8s
from tests.helpers import get_metrics, serve, wait_serving

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
CPU = [
    {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
    }
]


def status(**kw: Any) -> HpaStatus:
    """The HpaStatus read from KEDA's HPA for the llama ScaledObject, shaped by ``kw``."""
    return hpa_from_json(k8s.hpa("llama", "inference", **kw))


def obs(
    seconds: float, landed: int, hpa: HpaStatus | None, *, read: bool = True, fallback: bool = False
) -> Observation:
    """An observation ``seconds`` after T0 with ``landed`` replicas running and the given HPA."""
    return Observation(
        now=T0 + timedelta(seconds=seconds),
        current_replicas=landed,
        ready_replicas=landed,
        deployment_replicas=landed,
        hpa=hpa,
        hpa_read=read,
        scaledobject_fallback=fallback,
    )


def test_keda_s_hpa_is_read_with_its_external_metric_limits_and_conditions() -> None:
    """KEDA's HPA is read with its limits, replicas, conditions and whether it lists our metric."""
    got = status(min_replicas=2, max_replicas=8, current=3, desired=4)
    assert (got.name, got.namespace, got.lists_metric, got.other_metrics) == (
        "keda-hpa-llama",
        "inference",
        True,
        0,
    )
    assert (got.min_replicas, got.max_replicas, got.current_replicas, got.desired_replicas) == (2, 8, 3, 4)
    assert ("AbleToScale", "True", "ReadyForNewScale") in got.conditions
    rewritten = status(metrics=CPU)  # what KEDA 2.7 left after the scaler was unreachable
    assert (rewritten.lists_metric, rewritten.other_metrics) == (False, 1)
    assert hpa_from_json({}) == HpaStatus("", "", False, 0, None, None, None, None, ())


def limited(reason: str) -> list[dict[str, Any]]:
    """HPA conditions saying scaling is limited for ``reason``."""
    return [{"type": "ScalingLimited", "status": "True", "reason": reason}]


STABILIZED = [{"type": "AbleToScale", "status": "True", "reason": "ScaleDownStabilized"}]
EXTERNAL = k8s.hpa("x")["spec"]["metrics"]


@pytest.mark.parametrize(
    ("target", "landed", "hpa", "kw", "reason"),
    [
        (3, 4, None, {"read": False}, "hpa_unknown"),
        (3, 4, None, {"read": False, "fallback": True}, "fallback"),
        (3, 4, None, {}, "no_hpa"),
        (3, 4, status(metrics=CPU), {}, "metric_missing"),
        (3, 4, status(), {"fallback": True}, "fallback"),
        (3, 6, status(metrics=[*EXTERNAL, *CPU], desired=6), {}, "other_trigger"),
        (20, 16, status(max_replicas=16, current=16, desired=16), {}, "max"),
        (1, 2, status(min_replicas=2), {}, "min"),
        (11, 10, status(current=10, desired=10), {}, "tolerance"),
        (4, 8, status(current=8, desired=8, conditions=STABILIZED), {}, "stabilization"),
        (12, 4, status(current=4, desired=8, conditions=limited("ScaleUpLimit")), {}, "rate_limit"),
        (3, 4, status(current=4, desired=4), {}, "unexplained"),
    ],
    ids=[
        "hpa-unread",
        "hpa-unread-fallback",
        "no-hpa",
        "metric-missing",
        "fallback",
        "other-trigger",
        "max",
        "min",
        "tolerance",
        "stabilization",
        "rate-limit",
        "unexplained",
    ],
)
def test_a_lasting_gap_gets_the_first_cause_that_applies(
    target: int, landed: int, hpa: HpaStatus | None, kw: dict[str, Any], reason: str
) -> None:
    """A gap that lasts a sync is explained by the first cause that applies, in order."""
    monitor = LandingMonitor()
    monitor.remember(target)
    first = monitor.observe(obs(0, landed, hpa, **kw))
    monitor.remember(target)
    later = monitor.observe(obs(60, landed, hpa, **kw))
    assert later is not None
    assert (later.target, later.landed, later.gap) == (target, landed, target - landed)
    assert later.reason == reason
    assert later.since_s == 60
    assert first is not None
    # what the API says outright is reported at once; what the HPA's rules may still undo waits a sync
    assert first.reason == (
        reason if reason in {"no_hpa", "metric_missing", "fallback", "other_trigger"} else "in_flight"
    )
    assert landing.WHY[reason] in later.explanation


def test_nothing_to_compare_before_a_target_or_without_the_deployment() -> None:
    """No landing is reported before a target exists or when the Deployment is not read."""
    monitor = LandingMonitor()
    assert monitor.observe(obs(0, 3, status())) is None  # no target decided yet
    monitor.remember(3)
    assert monitor.observe(Observation(now=T0, current_replicas=3)) is None  # no Kubernetes


def test_the_clock_restarts_while_the_deployment_follows_and_resets_once_it_lands() -> None:
    """A ramp the HPA follows one sync behind stays in flight; a Deployment that stopped following ages."""
    monitor = LandingMonitor()
    hpa = status(current=4, desired=4)
    seen = []
    for second, target, landed in [
        (0, 6, 4),
        (30, 8, 5),
        (60, 10, 7),
        (90, 10, 7),
        (120, 10, 7),
        (150, 10, 10),
    ]:
        got = monitor.observe(obs(second, landed, hpa))
        seen.append(None if got is None else (got.reason, got.since_s))
        monitor.remember(target)
    assert seen == [
        None,
        ("in_flight", 0),
        ("in_flight", 0),
        ("in_flight", 30),
        ("unexplained", 60),
        ("landed", 0),
    ]


def test_moving_away_from_the_target_does_not_restart_the_clock() -> None:
    """A Deployment moving further from the target keeps the gap's age; it is not reset."""
    monitor = LandingMonitor()
    monitor.remember(3)
    monitor.observe(obs(0, 4, status(metrics=CPU)))
    monitor.remember(3)
    got = monitor.observe(obs(90, 5, status(metrics=CPU)))  # the CPU target scales it further up
    assert got is not None
    assert (got.reason, got.since_s, got.gap) == ("metric_missing", 90, -2)


def test_the_decision_carries_the_landing_and_a_note_when_it_did_not_land() -> None:
    """Each decision carries the landing, with a not-landed note only while the gap lasts."""
    engine = engine_for({"minReplicas": "3", "coldStartSeconds": "60"})
    lost = status(metrics=CPU, current=2, desired=2)
    first = engine.decide(obs(0, 2, lost))
    assert first.landing is None
    assert first.replicas == 3
    second = engine.decide(obs(15, 2, lost))
    assert second.landing is not None
    assert (second.landing.gap, second.landing.reason) == (1, "metric_missing")
    assert any(note.startswith("not landed: Deployment at 2, target 3") for note in second.notes)
    assert second.to_json()["landing"]["reason"] == "metric_missing"
    # once it lands the note goes
    third = engine.decide(obs(30, 3, status(current=3, desired=3)))
    assert third.landing is not None
    assert third.landing.reason == "landed"
    assert not any(note.startswith("not landed") for note in third.notes)


def test_an_observation_log_round_trips_the_hpa() -> None:
    """An observation with an HPA survives the observation log's JSON round trip unchanged."""
    from scaler.sources.files import observation_from_dict

    original = obs(0, 4, status(metrics=CPU))
    assert observation_from_dict(original.to_json()) == original


# ---- as a new user meets it: scaler serve, a cluster whose HPA lost the metric ------------------


@pytest.mark.prometheus
@pytest.mark.slow
def test_scaler_serve_reports_an_hpa_that_lost_the_metric_within_two_refreshes(
    fleet: SimulatedFleet, prometheus: LocalPrometheus, tmp_path: Path
) -> None:
    """KEDA rewrote the HPA to a CPU target; the Deployment stays at 2 while the scaler asks for 3.

    The second decision (the first that can compare) carries the gap and ``metric_missing``, on
    /metrics and in the decision log.
    """
    with k8s.KubeDouble() as double:
        double.apply(k8s.node("gpu-a", 8))
        double.apply(k8s.deployment("vllm-llama", "inference", replicas=2, gpus=1))
        for i in range(2):
            double.apply(
                k8s.pod(
                    f"vllm-llama-{i}", "inference", labels={"app": "vllm-llama"}, node="gpu-a", ready=True
                )
            )
        double.apply(k8s.scaledobject("llama", "inference", target="vllm-llama"))
        double.apply(k8s.hpa("llama", "inference", metrics=CPU, current=2, desired=2))
        config = k8s.kubeconfig(tmp_path / "kubeconfig", double.url, "token")
        grpc_port, metrics_port = free_port(), free_port()
        options = ["--prometheus", prometheus.url, "--kubeconfig", str(config), "--refresh-interval", "1"]
        proc = serve(grpc_port, *options, "--metrics-port", str(metrics_port), "--log-format", "json")
        try:
            channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
            wait_serving(proc, channel)
            metadata = {"labelSelector": 'model_name="meta-llama/Llama-3.1-8B-Instruct"', "minReplicas": "3"}
            ref = pb.ScaledObjectRef(name="llama", namespace="inference", scalerMetadata=metadata)
            stub = pb_grpc.ExternalScalerStub(channel)  # type: ignore[no-untyped-call]
            get_metrics(stub, pb.GetMetricsRequest(scaledObjectRef=ref))  # the first decision is there
            first: float | None = None
            gap: list[tuple[str, float]] = []
            while not gap:  # counted in refreshes, not seconds: a loaded machine refreshes later
                samples = [s for family in scrape(metrics_port) for s in family.samples]
                refreshes = next(s.value for s in samples if s.name == "llm_scaler_refreshes_total")
                first = refreshes if first is None else first
                gap = [
                    (s.labels["reason"], s.value)
                    for s in samples
                    if s.name == "llm_scaler_landing_gap_replicas" and s.labels.get("scaledobject") == "llama"
                ]
                assert gap or refreshes - first <= 2, "no landing gap on /metrics within two refreshes"
                time.sleep(0.2)
            assert gap == [("metric_missing", 1.0)]
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=20)
    decisions = [
        entry
        for entry in (json.loads(line) for line in err.splitlines() if line.startswith("{"))
        if entry["event"] == "decision" and entry["scaledobject"] == "llama"
    ]
    # The first decision for the target has nothing to compare; the second already says why.
    assert decisions[0]["landing"] is None
    assert decisions[0]["replicas"] == 3
    second = decisions[1]["landing"]
    assert (second["landed"], second["target"], second["gap"], second["reason"]) == (
        2,
        3,
        1,
        "metric_missing",
    )
    assert any("not landed" in note and "external metric" in note for note in decisions[1]["notes"])


def scrape(port: int) -> list[Any]:
    """The metric families the scaler serves on its /metrics port."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        return list(text_string_to_metric_families(reply.read().decode()))


# ---- the HPA's tolerance: accounted for, not only noted ------------------------------------------


@pytest.mark.parametrize(
    ("current", "tolerance", "up", "down"),
    [
        (10, 0.1, 12, 8),
        (9, 0.1, 10, 8),
        (13, 0.1, 15, 11),
        (20, 0.1, 23, 17),
        (10, 0.0, 11, 9),
        (2, 0.1, 3, 1),
    ],
)
def test_the_smallest_steps_that_land(current: int, tolerance: float, up: int, down: int) -> None:
    """The smallest steps up and down from ``current`` fall outside the HPA's tolerance, every
    count between them within it; the policy asks ``landing_step_up`` for the one up."""
    assert landing_step_up(current, tolerance) == up
    for step in (up, down):
        assert not within_hpa_tolerance(step, current, (tolerance, tolerance))
    for between in (*range(down + 1, current), *range(current + 1, up)):
        assert within_hpa_tolerance(between, current, (tolerance, tolerance))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (0, 0.0),
        ("0", 0.0),
        (0.05, 0.05),
        ("0.05", 0.05),
        ("50m", 0.05),
        ("-1", None),
        ("ten", None),
        (True, None),
    ],
    ids=repr,
)
def test_tolerance_quantities(raw: Any, expected: float | None) -> None:
    """Tolerance quantities parse from numbers, decimals and milli-units; bad ones are None."""
    assert quantity(raw) == (pytest.approx(expected) if expected is not None else None)


def test_the_hpa_s_own_tolerance_is_read_per_direction() -> None:
    """The HPA's tolerance is read per direction; an unset one is the cluster default 0.1."""
    raw = k8s.hpa("llama", "inference")
    raw["spec"]["behavior"] = {"scaleUp": {"tolerance": "0"}, "scaleDown": {"stabilizationWindowSeconds": 0}}
    hpa = hpa_from_json(raw)
    assert (hpa.scale_up_tolerance, hpa.scale_down_tolerance) == (0.0, None)
    assert tolerances(hpa) == (0.0, 0.1)  # unset: the cluster's default
    assert tolerances(None) == (0.1, 0.1)


def decide_through_the_hpa(
    want: int, current: int, hpa: HpaStatus | None = None, schedulable: int = 50, **policy: str
) -> tuple[int, list[str], list[str]]:
    """The policy alone: one proposal of ``want`` replicas at ``current``, ``schedulable`` more
    fitting the free GPUs; (target, clamp kinds and their reasons, notes)."""
    from scaler.config import parse_metadata
    from scaler.decider.combine import combine
    from scaler.model import Proposal, Signal

    observation = Observation(
        now=T0,
        current_replicas=current,
        ready_replicas=current,
        gpu_schedulable_replicas=schedulable,
        hpa=hpa,
    )
    proposals = [Proposal(Signal.FLOOR, 1, "floor"), Proposal(Signal.QUEUE, want, "queue")]
    d = combine(proposals, observation, parse_metadata({"maxReplicas": "40", **policy}).spec)
    clamped = [c for c in d.clamps if c.before != c.after]
    return d.replicas, [c.kind.value for c in clamped] + [c.reason for c in clamped], list(d.notes)


def held_back_by_gpus(want: int, current: int, schedulable: int) -> int:
    """``Decision.gpu_held_back`` for one proposal of ``want`` at ``current``, ``schedulable`` more fit."""
    from scaler.config import parse_metadata
    from scaler.decider.combine import combine
    from scaler.model import Proposal, Signal

    observation = Observation(
        now=T0, current_replicas=current, ready_replicas=current, gpu_schedulable_replicas=schedulable
    )
    proposals = [Proposal(Signal.FLOOR, 1, "floor"), Proposal(Signal.QUEUE, want, "queue")]
    return combine(proposals, observation, parse_metadata({"maxReplicas": "40"}).spec).gpu_held_back


def test_scale_ups_step_past_the_tolerance_and_scale_downs_it_swallows_hold() -> None:
    """A scale-up inside the tolerance steps past it; a swallowed scale-down holds instead."""

    def kinds(want: int, current: int, hpa: HpaStatus | None = None) -> tuple[int, list[str]]:
        target, clamped, _ = decide_through_the_hpa(want, current, hpa)
        return target, clamped[: len(clamped) // 2]

    assert kinds(11, 10) == (12, ["hpa_tolerance"])  # 11 would not land; 12 does
    assert kinds(9, 10) == (10, ["hpa_tolerance"])  # 9 would not land: hold 10
    assert kinds(8, 10) == (8, [])  # 8 lands as it is
    assert kinds(3, 2) == (3, [])  # below 10 replicas every step lands
    zero_up = HpaStatus("keda-hpa-llama", "inference", True, 0, 1, 40, 10, 10, (), 0.0, None)
    assert kinds(11, 10, zero_up) == (11, [])  # scaleUp tolerance 0: one replica lands
    assert kinds(9, 10, zero_up) == (10, ["hpa_tolerance"])  # scale-down keeps 0.1


def test_a_step_past_the_tolerance_stays_under_max_replicas() -> None:
    """A step past the tolerance never exceeds maxReplicas; the decision notes why it stopped."""
    target, clamps, notes = decide_through_the_hpa(40, 37)  # 40 is within 10% of 37; 41 is past maxReplicas
    assert (target, clamps) == (40, [])
    assert any("HPA tolerance" in note and "beyond maxReplicas=40" in note for note in notes)


def test_a_step_past_the_tolerance_is_asked_where_the_free_gpus_fit_the_target_but_not_the_step() -> None:
    """At 10 replicas with one more fitting the free GPUs, the load's 11 would not land: 12 is asked,
    11 run and one waits Pending (held to 11, the fleet would stand at 10 while the GPU sits free).
    Where the GPUs fit the step, nothing waits; where they fit nothing more, nothing is stepped."""
    target, clamped, notes = decide_through_the_hpa(11, 10, schedulable=1)
    assert (target, clamped[:1]) == (12, ["hpa_tolerance"]), notes
    assert clamped[1].endswith(
        "12, the smallest step that lands; the 1 beyond the 11 that fit may wait Pending"
    )
    assert not notes
    # The load wants 12 and the GPUs fit 11: clamped to 11, which would not land, then stepped to 12.
    assert decide_through_the_hpa(12, 10, schedulable=1)[0] == 12
    # So the GPU clamp held nothing back (no Pending pod avoided); wanting 13, it held back one.
    assert [held_back_by_gpus(want, 10, schedulable=1) for want in (11, 12, 13)] == [0, 0, 1]
    target, clamped, _ = decide_through_the_hpa(11, 10, schedulable=2)
    assert (target, clamped[1]) == (
        12,
        "the HPA ignores 10 -> 11 (within its scale-up tolerance of 0.1): 12, the smallest step that lands",
    )
    assert decide_through_the_hpa(11, 10, schedulable=0)[:2] == (
        10,
        [
            "gpu_inventory",
            "GPU inventory fits 10: 10 bound + 0 schedulable + 0 Pending allowed (maxPendingReplicas)",
        ],
    )
