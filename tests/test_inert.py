"""Inert-autoscaler detection, the pure part (scaler.inert): each reason from a layout of series or a
run of decisions, named, and gone once the cause is. The same reasons from a real Prometheus are in
tests/test_inert_e2e.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scaler.config import engine_for
from scaler.decider.held import HELD_REFRESHES, InertMonitor
from scaler.inert import (
    DEFAULT_SCRAPE_INTERVAL_S,
    STALE_FLOOR_S,
    EndpointSeries,
    FamilySeries,
    Layout,
    Pods,
    PresetSeries,
    ScrapeTarget,
    SeriesGroup,
    layout_reasons,
    stale_after,
)
from scaler.inputs import Input, Reading
from scaler.matchers import LabelMatcher, parse_selector
from scaler.model import Decision, ForecastRecord, Inert, InertReason, Landing, Lead, Observation, Signal
from scaler.sources.files import InputFileError, observation_from_dict
from tests.fleet_model import FleetModel

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
NOW = T0.timestamp()
STEP = timedelta(seconds=15)
SELECTOR = parse_selector('model_name="llama-3-8b"')
LABELS = {"job": "vllm", "instance": "10.0.0.1:8000", "namespace": "inference", "pod": "llama-7f9-a"}


def group(metric: str, age_s: float = 5.0, **labels: str) -> SeriesGroup:
    """A group of ``metric`` whose newest sample is ``age_s`` old, with the usual labels and ``labels``."""
    return SeriesGroup(metric, {**LABELS, "model_name": "llama-3-8b", **labels}, NOW - age_s)


def engine_series(*groups: SeriesGroup, matchers: tuple[LabelMatcher, ...] = SELECTOR) -> PresetSeries:
    """vLLM's queue and prompt families, each with the groups of its metric."""
    families = (
        FamilySeries(Input.QUEUE_WAITING, ("vllm:num_requests_waiting",), matchers, ()),
        FamilySeries(Input.PROMPT_TOKENS_PER_S, ("vllm:prompt_tokens_total",), matchers, ()),
        FamilySeries(Reading.TTFT, ("vllm:time_to_first_token_seconds_count",), matchers, ()),
    )
    return PresetSeries(
        "vllm",
        "engine",
        tuple(
            FamilySeries(f.field, f.metrics, f.matchers, tuple(g for g in groups if g.metric in f.metrics))
            for f in families
        ),
    )


def every(age_s: float = 5.0, **labels: str) -> list[SeriesGroup]:
    """A group of each family's metric, ``age_s`` old."""
    return [
        group(m, age_s, **labels)
        for m in (
            "vllm:num_requests_waiting",
            "vllm:prompt_tokens_total",
            "vllm:time_to_first_token_seconds_count",
        )
    ]


def layout(*presets: PresetSeries, **more: object) -> Layout:
    """The layout of ``presets`` over an hour's lookback, with ``more`` (targets, intervals, endpoints)."""
    return Layout(presets, 3600.0, **more)  # type: ignore[arg-type]


PODS = Pods("inference", "llama-7f9", ("llama-7f9-a",), frozenset({"llama-7f9-a"}))


def test_fresh_series_the_selector_picks_are_not_inert() -> None:
    """Every family fresh and picked by the selector: nothing to say."""
    assert layout_reasons(layout(engine_series(*every())), NOW, PODS, "inference").reasons == ()


def test_a_renamed_model_label_names_the_values_that_exist_and_a_guess() -> None:
    """The servers label meta-llama/Llama-3-8B: no_series, the engine's inputs unknown, a did-you-mean."""
    found = layout_reasons(
        layout(engine_series(*every(model_name="meta-llama/Llama-3-8B"))), NOW, PODS, "inference"
    )
    (reason,) = found.reasons
    assert reason.reason is InertReason.NO_SERIES
    assert 'model_name="llama-3-8b" matches no series of engine vllm' in reason.text
    assert "while Deployment inference/llama-7f9 has 1 Ready pod;" in reason.text
    assert 'did you mean model_name="meta-llama/Llama-3-8B"?' in reason.text
    assert {Input.QUEUE_WAITING, Input.PROMPT_TOKENS_PER_S, Input.TTFT_P99_SECONDS} <= set(reason.inputs)
    assert set(found.unknown) == {Input.QUEUE_WAITING, Input.PROMPT_TOKENS_PER_S, Reading.TTFT}
    assert found.unknown[Input.QUEUE_WAITING].startswith("no_series: ")


def test_a_label_the_same_pods_now_write_otherwise_is_no_series_not_stale() -> None:
    """The selector's series stopped 40 s ago and the same pods write a new model name since: no_series."""
    old = every(age_s=40)
    renamed = every(model_name="Llama-3-8B")
    known = layout(engine_series(*old, *renamed), intervals={("vllm", "10.0.0.1:8000"): 15.0})
    (reason,) = layout_reasons(known, NOW, PODS, "inference").reasons
    assert reason.reason is InertReason.NO_SERIES
    assert (
        'model_name="llama-3-8b" matches no fresh series: the pods it read (llama-7f9-a) now write'
        in reason.text
    )
    assert (
        'model_name=Llama-3-8B (did you mean model_name="Llama-3-8B"?); its series stopped 40s ago'
        in reason.text
    )


def test_no_series_without_ready_pods_is_nothing_to_say() -> None:
    """No Ready pod exports anything yet: the floor holds, the target is not inert."""
    empty = Pods("inference", "llama-7f9", (), frozenset())
    assert layout_reasons(layout(engine_series()), NOW, empty, "inference").reasons == ()
    (reason,) = layout_reasons(layout(engine_series()), NOW, None, "inference").reasons
    assert reason.reason is InertReason.NO_SERIES
    assert "holds no series of engine vllm at all" in reason.text


def test_old_series_are_stale_not_missing() -> None:
    """Series eight minutes old: stale, with their age and the limit, never "no series match"."""
    found = layout_reasons(layout(engine_series(*every(age_s=480))), NOW, None, "inference")
    (reason,) = found.reasons
    assert reason.reason is InertReason.STALE
    assert "the last sample is 8m old, over 2 scrape intervals (120s)" in reason.text
    assert "no series match" not in reason.text
    assert Input.QUEUE_WAITING in reason.inputs


def test_the_scrape_interval_the_targets_api_gives_sets_the_limit() -> None:
    """Scraped every 15 s, a sample 40 s old is stale; at the default 60 s it is not."""
    old = engine_series(*every(age_s=40))
    assert layout_reasons(layout(old), NOW, None, "inference").reasons == ()
    known = layout(old, intervals={("vllm", "10.0.0.1:8000"): 15.0})
    (reason,) = layout_reasons(known, NOW, None, "inference").reasons
    assert reason.reason is InertReason.STALE
    assert stale_after(0.5) == STALE_FLOOR_S
    assert stale_after(DEFAULT_SCRAPE_INTERVAL_S) == 120.0


def test_a_stopped_exporter_is_not_scraped() -> None:
    """The series' target reads up == 0: not_scraped, naming the target and its error."""
    down = ScrapeTarget({"job": "vllm", "instance": "10.0.0.1:8000"}, up=False, error="connection refused")
    found = layout_reasons(layout(engine_series(*every(age_s=200)), targets=(down,)), NOW, None, "inference")
    (reason,) = found.reasons
    assert reason.reason is InertReason.NOT_SCRAPED
    assert "up == 0 for vllm/10.0.0.1:8000 (connection refused)" in reason.text


def test_ready_pods_without_series_are_not_scraped() -> None:
    """Two Ready pods, one of them with fresh series: the other is named, with no target for it."""
    pods = Pods(
        "inference", "llama-7f9", ("llama-7f9-a", "llama-7f9-b"), frozenset({"llama-7f9-a", "llama-7f9-b"})
    )
    up = ScrapeTarget(
        {"job": "vllm", "instance": "10.0.0.1:8000", "namespace": "inference", "pod": "llama-7f9-a"}, True
    )
    (reason,) = layout_reasons(layout(engine_series(*every()), targets=(up,)), NOW, pods, "inference").reasons
    assert reason.reason is InertReason.NOT_SCRAPED
    assert "1 of 2 Ready pods not scraped" in reason.text
    assert "llama-7f9-b and no scrape target for them" in reason.text
    assert reason.inputs == ()  # the other pod's series are read: no input is unknown


def test_a_router_series_on_pods_that_are_gone_is_stranded() -> None:
    """llm-d's inflight gauges for a deleted pod: stranded; a live pod's rank endpoint is not."""
    endpoints = (
        EndpointSeries("llm_d_epp_inflight_tokens", "inference", "llama-7f9-gone"),
        EndpointSeries("llm_d_epp_inflight_requests", "inference", "llama-7f9-gone"),
        EndpointSeries("llm_d_epp_inflight_tokens", "inference", "llama-7f9-a-rank-0"),
        EndpointSeries("llm_d_epp_inflight_tokens", "other", "llama-7f9-gone"),
        EndpointSeries("llm_d_epp_inflight_tokens", "inference", "mistral-1-x"),  # another Deployment's
    )
    (reason,) = layout_reasons(
        layout(engine_series(*every()), endpoints=endpoints), NOW, PODS, "inference"
    ).reasons
    assert reason.reason is InertReason.STRANDED
    assert "llm_d_epp_inflight_requests, llm_d_epp_inflight_tokens" in reason.text
    assert "1 endpoint that is no live pod of namespace inference (llama-7f9-gone)" in reason.text
    assert reason.inputs == ()
    fixed = (endpoints[2],)
    assert (
        layout_reasons(layout(engine_series(*every()), endpoints=fixed), NOW, PODS, "inference").reasons == ()
    )


def test_without_kubernetes_stranded_joins_the_pods_with_fresh_series() -> None:
    """Without Kubernetes the live endpoints are the pods whose engine series are fresh."""
    endpoints = (EndpointSeries("llm_d_epp_inflight_tokens", "inference", "llama-7f9-gone"),)
    (reason,) = layout_reasons(
        layout(engine_series(*every()), endpoints=endpoints), NOW, None, "inference"
    ).reasons
    assert "no pod with fresh series of namespace inference" in reason.text


# ---- held and not_landed -----------------------------------------------------------------


def decision(
    rate: float, replicas: int = 4, current: int = 4, binding: Signal = Signal.LOAD, i: int = 0
) -> Decision:
    """A decision of ``replicas`` at ``current`` replicas with ``rate`` requests/s offered."""
    return Decision(
        now=T0 + i * STEP,
        replicas=replicas,
        binding=binding,
        proposals={binding: replicas},
        signal_reasons={},
        clamps=(),
        notes=(),
        reason="",
        observation=Observation(now=T0 + i * STEP, current_replicas=current, ready_replicas=current),
        forecast=ForecastRecord(arrivals_per_s=rate),
    )


def held_after(monitor: InertMonitor, decisions: list[Decision]) -> list[Inert | None]:
    """What the monitor says of each decision in turn."""
    return [monitor.held(d) for d in decisions]


def test_a_target_held_while_the_demand_moved_is_held_after_the_set_refreshes() -> None:
    """4 replicas held while the demand goes from 2.0 to 2.6 requests/s: held at the 20th that moved."""
    monitor = InertMonitor()
    found = held_after(
        monitor, [decision(2.0, i=0)] + [decision(2.6, i=i) for i in range(1, HELD_REFRESHES + 1)]
    )
    assert found[:-1] == [None] * HELD_REFRESHES
    reason = found[-1]
    assert reason is not None
    assert reason.reason is InertReason.HELD
    assert "for 20 refreshes while the offered demand moved +30% (2 to 2.6 requests/s)" in reason.text
    assert "an HPA reading it would ask 6" in reason.text
    # It moves: the hold is over.
    moved = decision(2.6, replicas=6, i=30)
    assert monitor.held(moved) is None


def test_a_move_within_the_tolerance_or_a_floor_or_clamp_does_not_hold() -> None:
    """Within the HPA's tolerance, on the floor, or back within the tolerance: never held."""
    within = InertMonitor()
    assert all(
        r is None for r in held_after(within, [decision(2.0 * (1 + 0.02 * (i % 2)), i=i) for i in range(40)])
    )
    floor = InertMonitor()
    decisions = [decision(2.0, binding=Signal.FLOOR, i=0)] + [
        decision(2.6, binding=Signal.FLOOR, i=i) for i in range(1, 40)
    ]
    assert all(r is None for r in held_after(floor, decisions))
    back = InertMonitor()  # the demand comes back within the tolerance: the count starts again
    found = held_after(
        back,
        [decision(2.0, i=0)]
        + [decision(2.6, i=i) for i in range(1, HELD_REFRESHES)]
        + [decision(2.0, i=HELD_REFRESHES)]
        + [decision(2.6, i=i) for i in range(HELD_REFRESHES + 1, 2 * HELD_REFRESHES)],
    )
    assert all(r is None for r in found)


def test_not_landed_after_one_cold_start_with_a_reason_the_hpa_does_not_explain() -> None:
    """A gap with an alerting reason, older than one cold start, is not_landed; younger or explained, not."""
    d = decision(2.0)
    gap = Landing(
        4, 4, 6, 2, "metric_missing", 200.0, "Deployment at 4, target 6 for 200s: the HPA no longer ..."
    )
    judged = InertMonitor().judge(replace(d, landing=gap, lead=Lead(180.0, "default")))
    (reason,) = judged.inert
    assert reason.reason is InertReason.NOT_LANDED
    assert reason.text.startswith("metric_missing: Deployment at 4, target 6 for 200s")
    young = replace(gap, since_s=100.0)
    assert InertMonitor().judge(replace(d, landing=young, lead=Lead(180.0, "default"))).inert == ()
    explained = replace(gap, reason="stabilization")
    assert InertMonitor().judge(replace(d, landing=explained, lead=Lead(180.0, "default"))).inert == ()


def test_the_decision_carries_the_sources_reasons_and_its_json_names_them() -> None:
    """The observation's reasons reach the decision, its JSON and an observation log row, and back."""
    stale = Inert(InertReason.STALE, "the last sample is 8m old", (Input.QUEUE_WAITING,))
    engine = engine_for({"minReplicas": "2"})
    d = engine.decide(Observation(now=T0, inert=(stale,), missing={"queue_waiting": "stale: ..."}))
    assert d.inert == (stale,)
    assert d.to_json()["inert"] == [
        {"reason": "stale", "text": "the last sample is 8m old", "inputs": ["queue_waiting"]}
    ]
    assert str(stale) == "stale (queue_waiting): the last sample is 8m old"
    row = d.observation.to_json()
    assert observation_from_dict(row).inert == (stale,)


def test_an_observation_log_row_with_a_bad_reason_is_refused_by_name() -> None:
    """An unknown reason in an observation log is one error naming it."""
    with pytest.raises(InputFileError, match=r"inert: .*sleepy.* is not a reason"):
        observation_from_dict({"now": T0.isoformat(), "inert": [{"reason": "sleepy", "text": "x"}]})


# ---- the warm-up: issue 31, item 5 ---------------------------------------------------------


def test_after_a_restart_a_missing_input_holds_the_last_complete_demand() -> None:
    """A process warmed from history whose inputs then go missing holds the last complete demand
    (last_known), as one that lived through the history does, instead of proposing load from it."""
    meta = {"minReplicas": "1", "maxReplicas": "40"}
    lived, restarted = engine_for(meta), engine_for(meta)
    fleet = FleetModel()
    history = [fleet.observe(T0 + i * STEP, 4.0 + 4.0 * min(1.0, i / 100), 6) for i in range(160)]
    for o in history:
        last = lived.decide(o)
    restarted.warm(history)
    gone = Observation(
        now=T0 + 192 * STEP,
        current_replicas=6,
        ready_replicas=6,
        missing=dict.fromkeys(
            (Input.QUEUE_WAITING, Input.PROMPT_TOKENS_PER_S, Input.REQUESTS_RUNNING, Input.REQUESTS_PER_S),
            "stale: the last sample is 8m old",
        ),
    )
    a, b = lived.decide(gone), restarted.decide(gone)
    assert a.binding is b.binding is Signal.LAST_KNOWN
    assert (
        b.proposals[Signal.LAST_KNOWN]
        == a.proposals[Signal.LAST_KNOWN]
        == max(last.proposals.get(Signal.QUEUE, 0), last.proposals[Signal.LOAD])
    )
    assert Signal.LOAD not in b.proposals
    assert b.inputs_complete_at == history[-1].timestamp
    assert "prompt_tokens_per_s: stale" in " ".join(b.notes)
