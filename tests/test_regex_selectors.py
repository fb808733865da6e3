"""One tenant's regex stalls nobody: RE2 selectors over a real Prometheus and a real gRPC socket."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import grpc
import pytest

from scaler.config import parse_metadata
from scaler.decider import Engine
from scaler.inputs import Input
from scaler.matchers import MATCH_CALL_STEPS
from scaler.outputs.dryrun import missing_inputs
from scaler.readings import Readings
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sources.prometheus import PrometheusReader, TargetQuery
from tests.helpers import ScrapedFleets, ServerThread, eventually, ref, started

pytestmark = pytest.mark.prometheus

LONG = "a" * 40  # the model name (a|aa)+b backtracks on: 12 s a series in Python's re
AT = datetime(2026, 12, 1, tzinfo=UTC)


class Stack(ScrapedFleets):
    """A real Prometheus scraping two vLLM fleets: one serving a model named 40 a's, one llama."""

    def __init__(self) -> None:
        fleets = []
        for model, pods, waiting in ((LONG, ["long-0", "long-1"], 7), ("llama", ["llama-0"], 3)):
            fleet = SimulatedFleet(namespace="inference", model=model)
            fleet.set_pods(pods)
            fleet.set_fleet_load(PodLoad(waiting=waiting, running=4, prompt_tokens_per_s=900))
            fleets.append(fleet)
        super().__init__(fleets)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """The module's Prometheus and fleets."""
    yield from started(Stack)


def query(stack: Stack, key: str, selector: str) -> TargetQuery:
    """A vLLM target reading the stack's Prometheus with ``selector``."""
    return TargetQuery(key, parse_metadata({"labelSelector": selector}), stack.prometheus.url)


def test_a_backtracking_selector_reads_its_series(stack: Stack) -> None:
    """``model_name=~"(a|aa)+"`` selects the 40-a model's series (RE2: no backtracking) and sums them."""
    reader = PrometheusReader(stack.prometheus.url, rate_window="5s")
    slow = query(stack, "slow", 'model_name=~"(a|aa)+"')

    def read() -> Readings:
        return reader.read([slow])["slow"]

    got = eventually(read, lambda r: r.values.get(Input.QUEUE_WAITING) == 7, timeout=25, every=0.25)
    assert got.values[Input.QUEUE_WAITING] == 7


def test_a_selector_over_its_share_delays_only_its_own_target(stack: Stack) -> None:
    """A selector past its regex budget leaves only its target's inputs unknown, its decision says
    so, the other target reads on, and the next refresh, charged only for new values, reads it."""
    # Both fleets scraped first, read with = selectors (no regex memory is made here).
    plain = query(stack, "plain", 'model_name="llama"')
    ready = query(stack, "ready", f'model_name="{LONG}"')
    waiting = PrometheusReader(stack.prometheus.url, rate_window="5s")
    eventually(
        lambda: waiting.read([plain, ready]),
        lambda r: (
            r["plain"].values.get(Input.QUEUE_WAITING) == 3
            and r["ready"].values.get(Input.QUEUE_WAITING) == 7
        ),
        timeout=25,
        every=0.25,
    )
    # Room for one new label value's regex a refresh: the first refresh meets two model names.
    reader = PrometheusReader(stack.prometheus.url, rate_window="5s", selector_steps=MATCH_CALL_STEPS + 800)
    slow = query(stack, "slow", 'model_name=~"(a|aa)+"')
    first = reader.read([slow, plain])
    assert first["plain"].values.get(Input.QUEUE_WAITING) == 3
    why = first["slow"].missing.get(Input.QUEUE_WAITING, "")
    assert "went over their share of this refresh" in why
    assert Input.QUEUE_WAITING not in first["slow"].values
    decision = Engine(slow.policy.spec).decide(first["slow"].observation(AT, slow.policy))
    assert "share of this refresh" in missing_inputs(decision)  # what its decision line says
    again = reader.read([slow, plain])
    assert again["slow"].values.get(Input.QUEUE_WAITING) == 7
    assert again["plain"].values.get(Input.QUEUE_WAITING) == 3


@pytest.mark.e2e
def test_a_regex_re2_cannot_compile_is_invalid_argument_naming_the_key() -> None:
    """A labelSelector with a backreference: INVALID_ARGUMENT over gRPC naming the key and RE2."""
    with ServerThread() as server, pytest.raises(grpc.RpcError) as caught:
        server.stub().GetMetricSpec(ref(labelSelector='model_name=~"(a)\\\\1"'), timeout=5)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    details = caught.value.details() or ""
    assert "labelSelector=" in details
    assert "invalid regular expression for 'model_name'" in details
    assert "RE2" in details
