"""The policies' control rules: the clairvoyant's lead, and KEDA's triggers read at a tick."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scaler.inputs import Input, Reading
from scaler.model import Signal
from scaler.readings import Readings
from scaler.replay.keda import PodSeries, scaledobject_model
from scaler.replay.policies import ClairvoyantPolicy, KedaPolicy, TickInputs
from tests.helpers import WEEKDAY_CRON


def test_clairvoyant_orders_one_cold_start_ahead_and_keeps_what_is_needed_within_it() -> None:
    """The clairvoyant targets the most needed within one cold start ahead, then its last value."""
    policy = ClairvoyantPolicy("c", [2, 2, 2, 5, 5, 2, 2, 2, 2], bucket_s=60, lead_s=180, min_replicas=1)
    assert policy.target(-1.0) == 2  # a replica ordered now is Ready at 179 s: not yet needed
    assert policy.target(0.0) == 5  # ordered now, Ready at 180 s when minute 3 needs it
    assert policy.target(299.0) == 5
    assert policy.target(300.0) == 2  # from minute 5 on, nothing above 2 is needed again
    assert policy.target(10_000.0) == 2  # past the schedule: its last value


def tick(now: datetime, **values: Any) -> TickInputs:
    """One tick at ``now``: two ready replicas, an idle queue, overridden by ``values`` (the inputs by
    their short names, ``ttft_buckets`` for the TTFT histogram, or a TickInputs field)."""
    state: dict[str, Any] = {
        "now_s": 0.0,
        "now": now,
        "spec_replicas": 2,
        "status_replicas": 2,
        "pods": PodSeries([0, 0], [5, 5], 0.5, 2, 1, 60),
    }
    state.update({k: values.pop(k) for k in list(values) if k in state})
    read: dict[str, Any] = {
        "ready": 2,
        "pending": 0,
        "starting": 0,
        "gpu_schedulable_replicas": 14,
        "waiting": 0,
        "running": 10,
        "prompt_tokens_per_s": 1000.0,
        "generation_tokens_per_s": 200.0,
    }
    buckets = values.pop("ttft_buckets", None)
    read.update(values)
    readings = Readings(
        {
            Input.QUEUE_WAITING: float(read["waiting"]),
            Input.REQUESTS_RUNNING: float(read["running"]),
            Input.PROMPT_TOKENS_PER_S: read["prompt_tokens_per_s"],
            Input.GENERATION_TOKENS_PER_S: read["generation_tokens_per_s"],
            Input.CURRENT_REPLICAS: state["status_replicas"],
            Input.READY_REPLICAS: read["ready"],
            Input.GPU_SCHEDULABLE_REPLICAS: read["gpu_schedulable_replicas"],
            Input.PENDING_REPLICAS: read["pending"],
            Input.STARTING_REPLICAS: read["starting"],
            Input.DEPLOYMENT_REPLICAS: state["spec_replicas"],
        },
        {} if buckets is None else {Reading.TTFT: buckets},
    )
    return TickInputs.seen(readings=readings, **state)


def so(*triggers: dict[str, Any]) -> Any:
    """The ScaledObject model for 2 to 16 replicas with the given triggers."""
    return scaledobject_model(
        {
            "kind": "ScaledObject",
            "spec": {"minReplicaCount": 2, "maxReplicaCount": 16, "triggers": list(triggers)},
        }
    )


def test_cron_trigger_inside_and_outside_its_window() -> None:
    """A cron trigger scales up inside its window (at the HPA's rate) and not outside it."""
    monday_10 = datetime.fromisoformat("2026-12-07T10:00:00+08:00")
    monday_13 = datetime.fromisoformat("2026-12-07T13:00:00+08:00")
    cron = so(WEEKDAY_CRON)
    assert KedaPolicy("k", cron).tick(tick(monday_10)) == 6  # 2 -> max(2 * 2, 2 + 4) = 6 this period
    assert KedaPolicy("k", cron).tick(tick(monday_13)) == 2  # metric 1: the floor


def test_waiting_trigger_aggregates_the_pods() -> None:
    """A prometheus trigger on the waiting queue sums the pods' queues against its threshold."""
    trigger = {
        "type": "prometheus",
        "metadata": {"query": "sum(vllm:num_requests_waiting)", "threshold": "10"},
    }
    inputs = tick(
        datetime.fromisoformat("2026-12-07T13:00:00+08:00"), pods=PodSeries([25, 15], [5, 5], 0.5, 2, 1, 60)
    )
    assert KedaPolicy("k", so(trigger)).tick(inputs) == 4  # ceil(40 / 10)


def test_external_trigger_is_this_scalers_engine() -> None:
    """An external trigger runs this scaler's engine, whose target the HPA then applies."""
    external = {
        "type": "external",
        "metadata": {"minReplicas": "2", "maxReplicas": "16", "targetQueuePerReplica": "10"},
    }
    policy = KedaPolicy("s", so(external))
    assert policy.engine is not None
    now = datetime.fromisoformat("2026-12-07T13:00:00+08:00")
    # 50 waiting at 10 per replica: the engine asks 5, the HPA scales 2 -> 5.
    assert policy.tick(tick(now, waiting=50)) == 5
    assert policy.latest is not None
    assert policy.latest.replicas == 5
    assert policy.latest.observation.queue_waiting == 50


def test_the_policy_keeps_the_capacity_each_decision_used_by_tick() -> None:
    """Each refresh's Decision.capacity is kept with its tick, so a replay can set the estimates
    beside the truth: at any instant, the last decision's (none before the first)."""
    external = {
        "type": "external",
        "metadata": {"promptTokensPerSecondPerReplica": "5000", "generationTokensPerSecondPerReplica": "432"},
    }
    policy = KedaPolicy("s", so(external))
    now = datetime.fromisoformat("2026-12-07T13:00:00+08:00")
    made, scales = [], []
    for t in (0.0, 15.0):
        policy.tick(tick(now, now_s=t))
        assert policy.latest is not None
        made.append(policy.latest.capacity)
        scales.append(policy.latest.forecast.capacity_scale)
    first, second = made
    assert first is not None
    assert first.prefill_tokens_per_s == 5000
    assert first.prefill_source == "configured"
    assert policy.capacity_at(-1.0) is None
    assert policy.capacity_at(0.0) is first
    assert policy.capacity_at(14.9) is first
    assert policy.capacity_at(15.0) is second
    assert policy.capacity_at(1e9) is second
    assert policy.scale_at(-1.0) is None
    assert [policy.scale_at(0.0), policy.scale_at(1e9)] == scales


def test_the_scaler_sees_ttft_quantiles_and_its_share_over_objective_from_the_histogram() -> None:
    """The replay's TTFT histogram reaches the engine as a live source would deliver it."""
    import math

    from scaler.histogram import histogram_quantile, share_above

    so = scaledobject_model(
        {
            "kind": "ScaledObject",
            "spec": {
                "triggers": [{"type": "external", "metadata": {"ttftObjectiveSeconds": "2"}}],
            },
        }
    )
    policy = KedaPolicy("scaler", so)
    buckets = {0.5: 900.0, 1.0: 980.0, 2.5: 998.0, math.inf: 1000.0}
    obs = policy.observation(tick(datetime.fromisoformat("2026-12-07T00:00:00+08:00"), ttft_buckets=buckets))
    assert obs.ttft_p95_seconds == histogram_quantile(0.95, buckets)
    assert obs.ttft_p99_seconds == histogram_quantile(0.99, buckets)
    assert obs.ttft_over_objective == share_above(2.0, buckets)
    empty = {0.5: 0.0, 1.0: 0.0, 2.5: 0.0, math.inf: 0.0}
    quiet = policy.observation(tick(datetime.fromisoformat("2026-12-07T00:00:00+08:00"), ttft_buckets=empty))
    assert quiet.ttft_over_objective is None
    assert quiet.requests_per_s == 0.0  # a histogram with no first token: none served, not unknown
    assert quiet.missing["ttft_over_objective"] == "no requests in the rate window"


def test_the_replay_models_the_hpa_tolerance_and_the_scaler_accounts_for_it() -> None:
    """At 10 replicas the queue asks for 11: the default 10% would swallow it, so the scaler asks 12
    and the HPA lands 12; with ``scaleUp.tolerance: 0`` the scaler reads it and 11 lands."""
    external = {
        "type": "external",
        "metadata": {"minReplicas": "2", "maxReplicas": "16", "targetQueuePerReplica": "10"},
    }
    now = datetime.fromisoformat("2026-12-07T13:00:00+08:00")
    # Nothing running yet and no capacity known: the load signal abstains, the queue binds.
    at_ten = {"spec_replicas": 10, "status_replicas": 10, "ready": 10, "waiting": 110, "running": 0}
    for behavior, landed in ((None, 12), ({"scaleUp": {"tolerance": "0"}}, 11)):
        spec: dict[str, Any] = {"minReplicaCount": 2, "maxReplicaCount": 16, "triggers": [external]}
        if behavior is not None:
            spec["advanced"] = {"horizontalPodAutoscalerConfig": {"behavior": behavior}}
        policy = KedaPolicy("s", scaledobject_model({"kind": "ScaledObject", "spec": spec}))
        assert policy.tick(tick(now, **at_ten)) == landed
        assert policy.latest is not None
        assert policy.latest.proposals[Signal.QUEUE] == 11
        hpa = policy.latest.observation.hpa
        assert hpa is not None
        assert hpa.scale_up_tolerance == (0.1 if behavior is None else 0.0)


def test_a_gpu_limit_within_the_hpa_tolerance_lands_the_replica_that_fits() -> None:
    """At 10 replicas the queue asks for 11 and the free GPUs fit one more: the HPA would swallow 11,
    so the scaler asks 12 and the HPA lands 12 (11 run, one waits Pending). Next, with that replica
    Pending and no GPU free, 11 fit, which the HPA's tolerance would leave at 12: the scaler holds
    12 and says the one beyond is Pending. The fleet keeps the replica that fits rather than standing
    at 10, and the target stands where the Deployment does."""
    external = {
        "type": "external",
        "metadata": {"minReplicas": "2", "maxReplicas": "16", "targetQueuePerReplica": "10"},
    }
    now = datetime.fromisoformat("2026-12-07T13:00:00+08:00")
    spec: dict[str, Any] = {"minReplicaCount": 2, "maxReplicaCount": 16, "triggers": [external]}
    policy = KedaPolicy("s", scaledobject_model({"kind": "ScaledObject", "spec": spec}))
    at_ten = {"spec_replicas": 10, "status_replicas": 10, "ready": 10, "waiting": 110, "running": 0}
    assert policy.tick(tick(now, gpu_schedulable_replicas=1, **at_ten)) == 12
    assert policy.latest is not None
    assert policy.latest.replicas == 12
    assert policy.latest.proposals[Signal.QUEUE] == 11
    stepped = {"spec_replicas": 12, "status_replicas": 12, "ready": 10, "starting": 1, "pending": 1}
    later = tick(
        now + timedelta(seconds=30), now_s=30.0, gpu_schedulable_replicas=0, waiting=110, running=0, **stepped
    )
    assert policy.tick(later) == 12  # the HPA holds the 12
    assert policy.latest.now == now + timedelta(seconds=30)
    assert policy.latest.replicas == 12
    assert policy.latest.reason.endswith("holding 12, the 1 beyond the 11 that fit Pending)")


def test_a_tick_builds_its_series_once_only_for_a_policy_that_reads_them_and_never_after() -> None:
    """The clairvoyant never reads the series, so the replay builds none for it; a reading policy
    builds them once however often it reads; once the tick has ended they cannot be built."""
    built: list[int] = []
    shown = tick(datetime(2026, 1, 5, 12, tzinfo=UTC))

    def observe() -> tuple[PodSeries, Readings]:
        built.append(1)
        return shown.pods, shown.readings

    clairvoyant = ClairvoyantPolicy("c", [3] * 10, bucket_s=60, lead_s=180, min_replicas=1)
    ticked = TickInputs(0.0, shown.now, 2, 2, observe)
    assert clairvoyant.tick(ticked) == 3
    assert built == []
    keda = KedaPolicy(
        "k",
        so({"type": "prometheus", "metadata": {"query": "sum(vllm:num_requests_waiting)", "threshold": "5"}}),
    )
    keda.tick(ticked)
    assert ticked.readings is shown.readings
    assert built == [1]
    ticked.end()
    assert ticked.pods is shown.pods  # read during the tick: kept
    late = TickInputs(5.0, shown.now, 2, 2, observe)
    late.end()
    with pytest.raises(RuntimeError, match="after its tick"):
        _ = late.readings
    assert built == [1]


def slow_poll(trigger: dict[str, Any]) -> Any:
    """The ScaledObject model for ``trigger`` with a pollingInterval of 300 s, 20 HPA syncs."""
    return scaledobject_model(
        {
            "kind": "ScaledObject",
            "spec": {
                "minReplicaCount": 2,
                "maxReplicaCount": 16,
                "pollingInterval": 300,
                "triggers": [trigger],
            },
        }
    )


QUEUE_TRIGGER = {
    "type": "prometheus",
    "metadata": {"query": "sum(vllm:num_requests_waiting)", "threshold": "10"},
}


def test_the_hpa_reads_each_trigger_at_its_sync_whatever_the_polling_interval() -> None:
    """KEDA's metrics server calls the source at every HPA sync (every KEDA version): with a
    pollingInterval of 300 s the queue of 40 that arrives at 15 s is read at the 15 s sync."""
    now = datetime.fromisoformat("2026-12-07T13:00:00+08:00")
    busy = PodSeries([25, 15], [5, 5], 0.5, 2, 1, 60)
    policy = KedaPolicy("k", slow_poll(QUEUE_TRIGGER))
    assert policy.tick(tick(now, now_s=0.0)) == 2
    assert policy.tick(tick(now, now_s=15.0, pods=busy)) == 4  # ceil(40 / 10), one sync later


def test_a_trigger_with_use_cached_metrics_is_read_from_the_last_poll() -> None:
    """useCachedMetrics: the HPA gets the scale loop's last poll, so the queue of 40 waits for the
    poll at 300 s."""
    now = datetime.fromisoformat("2026-12-07T13:00:00+08:00")
    busy = PodSeries([25, 15], [5, 5], 0.5, 2, 1, 60)
    policy = KedaPolicy("k", slow_poll({**QUEUE_TRIGGER, "useCachedMetrics": True}))
    assert policy.tick(tick(now, now_s=0.0)) == 2
    assert policy.tick(tick(now, now_s=15.0, pods=busy)) == 2  # the poll at 0 s: an empty queue
    assert policy.tick(tick(now, now_s=300.0, pods=busy)) == 4


def test_this_scalers_latest_decision_reaches_the_hpa_at_the_next_sync() -> None:
    """This scaler's trigger, pollingInterval 300 s: the decision of 5 replicas made at the 30 s
    refresh (50 waiting for two refreshes) is what the HPA reads at the 30 s sync."""
    external = {
        "type": "external",
        "metadata": {"minReplicas": "2", "maxReplicas": "16", "targetQueuePerReplica": "10"},
    }
    now = datetime.fromisoformat("2026-12-07T13:00:00+08:00")
    policy = KedaPolicy("s", slow_poll(external))
    assert policy.tick(tick(now, now_s=0.0)) == 2
    assert policy.tick(tick(now + timedelta(seconds=15), now_s=15.0, waiting=50)) == 2  # one refresh: held
    assert policy.tick(tick(now + timedelta(seconds=30), now_s=30.0, waiting=50)) == 5
    assert policy.latest is not None
    assert policy.latest.replicas == 5
