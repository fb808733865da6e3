"""KEDA's calls of this scaler and its fallback in the replay, per KEDA version: scenarios stepping
the replay's clock (``KedaPolicy.tick``) through a scrape outage longer than maxStalenessSeconds."""

from __future__ import annotations

from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from scaler.inventory.scaledobject import Fallback
from scaler.replay import cli
from scaler.replay.keda import (
    HPA_PATH,
    KEDA_VERSION,
    KEDA_VERSIONS,
    LOOP_PATH,
    KedaCalls,
    KedaVersion,
    fallback_replicas,
    scaledobject_model,
)
from scaler.replay.policies import KedaPolicy, in_outage
from scaler.replay.report import keda_lines
from tests.test_replay_policies import tick

START = datetime.fromisoformat("2026-12-07T13:00:00+08:00")
TICK_S = 5  # the replay's control tick in these scenarios
# maxStalenessSeconds 60: inputs last complete at the 105 s refresh are stale from 166 s on.
EXTERNAL = {
    "type": "external",
    "metadata": {
        "minReplicas": "2",
        "maxReplicas": "16",
        "targetQueuePerReplica": "10",
        "maxStalenessSeconds": "60",
    },
}
OUTAGE = (120.0, 300.0)  # Prometheus holds nothing from 120 s to 420 s


def keda_so(*, fallback: dict[str, Any] | None = None, **spec: Any) -> Any:
    """This scaler's ScaledObject, 2 to 16 replicas, pollingInterval 5 s, with ``spec`` over it."""
    body: dict[str, Any] = {
        "minReplicaCount": 2,
        "maxReplicaCount": 16,
        "pollingInterval": 5,
        "triggers": [EXTERNAL],
        **spec,
    }
    if fallback is not None:
        body["fallback"] = fallback
    return scaledobject_model({"kind": "ScaledObject", "spec": body})


def replay(policy: KedaPolicy, until_s: int) -> dict[int, int]:
    """Tick ``policy`` every ``TICK_S`` from 0 to ``until_s`` with 50 requests waiting, the Deployment
    taking each replica count at once; its spec.replicas after each tick, by second."""
    spec, seen = 2, {}
    for t in range(0, until_s + 1, TICK_S):
        moment = START + timedelta(seconds=t)
        got = policy.tick(tick(moment, now_s=float(t), spec_replicas=spec, status_replicas=spec, waiting=50))
        spec = spec if got is None else got
        seen[t] = spec
    return seen


def first_at(seen: dict[int, int], replicas: int) -> int:
    """The first second at which the Deployment has ``replicas``."""
    return next(t for t, n in seen.items() if n == replicas)


@pytest.mark.parametrize(
    ("version", "polling_s", "fallback_at"), [("2.21", 300, 225), ("2.21", 5, 195), ("2.20", 5, 180)]
)
def test_the_fallback_takes_over_past_the_failure_threshold(
    version: KedaVersion, polling_s: int, fallback_at: int
) -> None:
    """Stale from 166 s, failureThreshold 3: the HPA reads the fallback's 8 replicas at the first sync
    whose failure is the fourth. 2.21 with no poll in the way: the syncs at 180, 195, 210 and 225 s.
    2.21 polling every 5 s: the failed sync at 180 s sets ScalingActive False, so the loop polls again
    (185, 190, 195 s) and the sync at 195 s is the fifth failure. 2.20 polls every 5 s throughout
    (170, 175, 180 s): the sync at 180 s."""
    fallback = {"failureThreshold": 3, "replicas": 8}
    so = keda_so(fallback=fallback, pollingInterval=polling_s)
    policy = KedaPolicy("s", so, keda_version=version, outages=[OUTAGE])
    seen = replay(policy, 415)
    assert seen[fallback_at - TICK_S] == 5  # this scaler's target until then
    assert first_at(seen, 8) == fallback_at
    assert seen[415] == 8


def test_after_the_outage_the_next_answered_call_resets_the_count_and_reads_the_target() -> None:
    """The data return at 420 s: that refresh completes the inputs, the sync after it is answered, the
    count goes back to 0 and the HPA reads this scaler's target again, not the fallback's 8."""
    policy = KedaPolicy("s", keda_so(fallback={"failureThreshold": 3, "replicas": 8}), outages=[OUTAGE])
    replay(policy, 415)
    assert policy.keda.failures > 3
    assert policy.hpa.last is not None
    assert policy.hpa.last.desired == 8
    replay_from(policy, 420, 8)
    assert policy.keda.failures == 0
    assert policy.latest is not None
    assert policy.hpa.last.desired == policy.latest.replicas != 8
    assert policy.keda.fallback_active_s() == 420 - 195  # active from the sync at 195 s to the one at 420 s


def replay_from(policy: KedaPolicy, t: int, spec: int) -> int | None:
    """One tick at ``t`` with the Deployment at ``spec``."""
    moment = START + timedelta(seconds=t)
    return policy.tick(tick(moment, now_s=float(t), spec_replicas=spec, status_replicas=spec, waiting=50))


@pytest.mark.parametrize("version", ["2.21", "2.20"])
def test_without_fallback_the_hpa_holds_its_replicas(version: KedaVersion) -> None:
    """No fallback: the erroring metric leaves the HPA nothing to scale on, so it holds 5 replicas
    through the outage (ScalingActive False). Under 2.21 the scale loop then polls again, every 5 s:
    after the first failed sync at 180 s, 47 polls to 415 s."""
    policy = KedaPolicy("s", keda_so(), keda_version=version, outages=[OUTAGE])
    seen = replay(policy, 415)
    assert set(seen[t] for t in range(180, 416, TICK_S)) == {5}
    assert not policy.keda.scaling_active
    assert policy.keda.fallback_active_s() == 0
    assert policy.keda.calls[LOOP_PATH] == (47 if version == "2.21" else 84)
    replay_from(policy, 420, 5)
    assert policy.keda.scaling_active  # answered again: under 2.21 the loop rests once more
    assert policy.keda.polls() is (version == "2.20")


def test_without_fallback_the_hpa_does_not_scale_down_on_the_other_triggers() -> None:
    """The HPA's rule for a metric it cannot get: it scales on the others only where they do not scale
    down. A queue trigger asking 1 replica (50 waiting, threshold 100) beside this scaler's 5, with no
    scale-down stabilization: through the outage the HPA holds 5 rather than fall to the floor of 2."""
    queue = {
        "type": "prometheus",
        "metadata": {"query": "sum(vllm:num_requests_waiting)", "threshold": "100"},
    }
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 0}}
    so = keda_so(
        triggers=[EXTERNAL, queue], advanced={"horizontalPodAutoscalerConfig": {"behavior": behavior}}
    )
    policy = KedaPolicy("s", so, outages=[OUTAGE])
    seen = replay(policy, 415)
    assert set(seen[t] for t in range(120, 416, TICK_S)) == {5}
    assert not policy.keda.scaling_active


def test_nothing_stale_nothing_fails() -> None:
    """Without an outage no call fails and the fallback never serves, under either version."""
    for version in KEDA_VERSIONS:
        policy = KedaPolicy(
            "s", keda_so(fallback={"failureThreshold": 3, "replicas": 8}), keda_version=version
        )
        seen = replay(policy, 600)
        assert max(seen.values()) == 5
        assert policy.keda.failed == {HPA_PATH: 0, LOOP_PATH: 0}


@pytest.mark.parametrize(
    ("version", "spec", "loop_calls"),
    [
        ("2.21", {}, 0),  # minReplicaCount 2, nothing else: the loop rests while ScalingActive is True
        ("2.20", {}, 10),  # every pollingInterval (30 s) from 0 to 285 s
        ("2.21", {"minReplicaCount": 0}, 10),
        ("2.21", {"idleReplicaCount": 0, "minReplicaCount": 1}, 10),
        ("2.21", {"triggers": [{**EXTERNAL, "useCachedMetrics": True}]}, 10),
        ("2.21", {"advanced": {"scalingModifiers": {"formula": "s", "target": "1"}}}, 10),
    ],
)
def test_calls_per_path_per_version(version: KedaVersion, spec: dict[str, Any], loop_calls: int) -> None:
    """GetMetrics calls over 300 s, pollingInterval 30 s: one per HPA sync (20) under every version;
    from the scale loop one per pollingInterval under 2.20, and under 2.21 only where the object does
    not let the loop rest (minReplicaCount 0, idleReplicaCount, useCachedMetrics, scalingModifiers)."""
    policy = KedaPolicy("s", keda_so(pollingInterval=30, **spec), keda_version=version)
    replay(policy, 295)
    assert policy.keda.calls == {HPA_PATH: 20, LOOP_PATH: loop_calls}


def test_keda_counts_failures_past_the_threshold_on_either_path() -> None:
    """KEDA's NumberOfFailures (pkg/fallback/fallback.go): each failure adds one, an answer resets it,
    the fallback serves a failed call whose count is above failureThreshold; its time runs from the
    first such call to the next answered one."""
    calls = KedaCalls("2.20", Fallback(2, 8), loop_may_rest=True)
    assert [calls.call(t, LOOP_PATH, True) for t in (0.0, 5.0)] == [False, False]
    assert calls.call(10.0, HPA_PATH, True)  # the third failure, past 2
    assert calls.call(15.0, LOOP_PATH, True)
    assert not calls.call(20.0, HPA_PATH, False)
    assert calls.failures == 0
    assert calls.fallback_active_s() == 10.0
    assert calls.calls == {HPA_PATH: 2, LOOP_PATH: 3}
    assert calls.failed == {HPA_PATH: 1, LOOP_PATH: 3}


@pytest.mark.parametrize(
    ("behavior", "current", "replicas"),
    [
        ("static", 12, 8),
        ("currentReplicas", 12, 12),
        ("currentReplicasIfHigher", 12, 12),
        ("currentReplicasIfHigher", 3, 8),
        ("currentReplicasIfLower", 12, 8),
        ("currentReplicasIfLower", 3, 3),
    ],
)
def test_fallback_replicas_by_behavior(behavior: str, current: int, replicas: int) -> None:
    """fallback.behavior: the fallback's replicas, or the scale target's current count where it says so."""
    assert fallback_replicas(Fallback(3, 8, behavior), current) == replicas


def test_in_outage() -> None:
    """An outage holds its start and not its end."""
    outages = [(120.0, 300.0), (1000.0, 60.0)]
    assert [in_outage(outages, t) for t in (119.0, 120.0, 419.0, 420.0, 1030.0, 1060.0)] == [
        False,
        True,
        True,
        False,
        True,
        False,
    ]


def test_the_command_offers_the_versions_the_model_knows() -> None:
    """scaler replay's --keda-version choices and default (kept in the CLI so `scaler --help` loads no
    numpy) are the model's."""
    assert cli.KEDA_VERSIONS == KEDA_VERSIONS
    assert cli.KEDA_VERSION == KEDA_VERSION


def test_the_report_says_each_paths_calls_and_the_fallbacks_time() -> None:
    """One line per run with this scaler's trigger: the calls from each path, the failed ones and how long
    the fallback was active, with its threshold; a run without one says nothing."""
    policy = KedaPolicy(
        "this scaler", keda_so(fallback={"failureThreshold": 3, "replicas": 8}), outages=[OUTAGE]
    )
    replay(policy, 415)
    ours = SimpleNamespace(name="this scaler", extra=policy.keda_figures())
    plain = SimpleNamespace(name="keda baseline", extra={})
    fallbacks = {"this scaler": Fallback(3, 8), "keda baseline": None}
    assert keda_lines("2.21", [ours, plain], fallbacks) == [  # type: ignore[list-item]
        "KEDA 2.21: this scaler: 28 GetMetrics calls from HPA syncs, 3 from the scale loop, 19 failed;"
        " fallback active 4 min (failureThreshold 3)"
    ]
