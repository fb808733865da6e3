"""Which cold start the replay's pods take: configured, measured from the Deployment's pods, or default."""

from __future__ import annotations

import pytest

from scaler.decider.coldstart import PodTimes, startup_times
from scaler.replay.startup import choose, with_recorded

# The module docstring's example: seven pods, scheduled 2 s after creation.
STARTS = [180.0, 200.0, 210.0, 240.0, 260.0, 280.0, 300.0]


def test_the_median_start_stands_for_every_pod() -> None:
    """Measured: the median of the pods' starts, with the p90 and the range beside it."""
    choice = choose(None, 180.0, "inference/vllm", STARTS)
    assert (choice.seconds, choice.source) == (240.0, "measured")
    assert (choice.pods, choice.p90_s, choice.fastest_s, choice.slowest_s) == (7, 288.0, 180.0, 300.0)
    assert choice.said == (
        "cold start 240s: measured, the median of 7 pod(s) of Deployment inference/vllm from scheduled"
        " to Ready (p90 288s, 180-300s)"
    )
    (limit,) = choice.limits
    assert limit.startswith("every replayed pod starts in 240s, the median of the pods of Deployment")
    assert "fewer than" not in limit


def test_few_pods_are_used_and_said_to_be_few() -> None:
    """Two pods are a measurement too, said to be fewer than five."""
    choice = choose(None, 180.0, "inference/vllm", [30.0, 50.0])
    assert (choice.seconds, choice.source) == (40.0, "measured")
    assert "only 2 pod(s), fewer than 5: it may not be typical" in choice.limits[0]


def test_a_configured_cold_start_wins_and_the_measurement_is_said() -> None:
    """cold_start_s written in --cluster wins; the measurement is reported as not used."""
    choice = choose(45.0, 180.0, "inference/vllm", STARTS)
    assert (choice.seconds, choice.source, choice.median_s) == (45.0, "configured", 240.0)
    assert choice.said == "cold start 45s: cold_start_s in --cluster"
    assert "measured 240s, the median of 7 pod(s)" in choice.limits[0]
    assert "delete cold_start_s to replay with the measurement" in choice.limits[0]


@pytest.mark.parametrize(
    ("startups", "problem", "says"),
    [
        (None, None, "not measured: --kubeconfig measures it from the Deployment's pods"),
        ([], None, "no pod of Deployment inference/vllm is Ready, so none could be measured"),
        (
            None,
            "Deployment inference/vllm: HTTP 403 Forbidden",
            "could not be read (Deployment inference/vllm",
        ),
    ],
    ids=["no-kubeconfig", "no-ready-pod", "unreadable"],
)
def test_otherwise_the_default_and_why(startups: list[float] | None, problem: str | None, says: str) -> None:
    """Without a measurement the default runs, and the limit line says why and what it moves."""
    choice = choose(None, 180.0, "inference/vllm", startups, problem)
    assert (choice.seconds, choice.source, choice.said) == (180.0, "default", "cold start 180s: the default")
    assert says in choice.limits[0]
    assert choice.limits[0].endswith("so every policy's latency depends on it")


def test_a_pod_s_start_is_counted_from_its_scheduling() -> None:
    """The wait for a node is the replay's to simulate: a start runs from scheduled (or created) to Ready."""
    pods = [
        PodTimes("waited", 0.0, 100.0, 280.0),  # 100 s Pending, then 180 s
        PodTimes("unknown-scheduling", 0.0, None, 200.0),
        PodTimes("starting", 0.0, 1.0, None),  # not Ready: not measured
    ]
    assert sorted(startup_times(pods)) == [180.0, 200.0]


def test_the_pods_kube_state_metrics_recorded_replace_only_the_default() -> None:
    """With the default chosen, the history's pods give the cold start (their median, said as from the
    history); a configured or --kubeconfig-measured one is kept; none recorded, or unreadable, leaves
    the default with why."""
    default = choose(None, 180.0)
    recorded = with_recorded(default, "inference/vllm", STARTS)
    assert (recorded.seconds, recorded.source, recorded.pods) == (240.0, "history", 7)
    assert recorded.said == (
        "cold start 240s: measured from the history, the median of 7 pod(s) of Deployment inference/vllm"
        " kube-state-metrics recorded, from scheduled to Ready (p90 288s, 180-300s)"
    )
    assert recorded.limits[0].startswith("every replayed pod starts in 240s, the median of the newest pods")
    configured = with_recorded(choose(45.0, 180.0), "inference/vllm", STARTS)
    assert (configured.seconds, configured.source) == (45.0, "configured")
    assert configured.limits[0].endswith(
        "the pods kube-state-metrics recorded in the history measured 240s, not used"
    )
    measured = choose(None, 180.0, "inference/vllm", [20.0])
    assert with_recorded(measured, "inference/vllm", STARTS) == measured
    none = with_recorded(default, "inference/vllm", [])
    assert none.source == "default"
    assert none.limits[0].endswith(
        "kube-state-metrics recorded no Ready pod of Deployment inference/vllm in the span"
    )
    failed = with_recorded(default, "inference/vllm", None, "connection refused")
    assert "could not be read from the history (connection refused)" in failed.limits[0]
    assert with_recorded(default, "inference/vllm", None) == default  # not read: nothing to say
