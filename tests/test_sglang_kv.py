"""SGLang's KV cache usage from its token counts where exported, its older gauge where not, on a real
Prometheus scraping simulated SGLang servers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scaler.config import parse_metadata
from scaler.inputs import Input
from scaler.readings import Readings
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sources.prometheus import PrometheusReader, TargetQuery
from tests.helpers import ScrapedFleets, eventually, started

pytestmark = pytest.mark.prometheus


class Stack(ScrapedFleets):
    """A real Prometheus scraping three SGLang fleets of one model each: ``counts`` writes the KV token
    counts (PR #22726), ``older`` only sglang:token_usage, and ``both`` writes the counts at 0.3 and,
    as another scrape target of the same pods (a hybrid model's token_usage reading its Mamba pool),
    token_usage at 0.9."""

    def __init__(self) -> None:
        fleets: list[SimulatedFleet] = []
        for model, generations, usage in (
            ("counts", ("current",), 0.3),
            ("older", ("legacy",), 0.6),
            ("both", ("current",), 0.3),
            ("both", ("legacy",), 0.9),
        ):
            fleet = SimulatedFleet(model=model, engine="sglang", generations=generations)
            fleet.set_pods([f"{model}-0", f"{model}-1"])
            fleet.set_fleet_load(PodLoad(waiting=2, running=8, kv_cache_usage=usage))
            fleets.append(fleet)
        super().__init__(fleets)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """The module's Prometheus and fleets."""
    yield from started(Stack)


def query(model: str, stack: Stack) -> TargetQuery:
    """An SGLang ScaledObject of ``model``'s servers."""
    metadata = {"engine": "sglang", "labelSelector": f'model_name="{model}"'}
    return TargetQuery(model, parse_metadata(metadata), stack.prometheus.url)


def test_the_kv_token_counts_are_read_where_exported_and_token_usage_where_not(stack: Stack) -> None:
    """Used over used, available and evictable where the counts exist (0.3, with as many tokens
    evictable as free), even beside a token_usage that says 0.9; token_usage where they do not."""
    reader = PrometheusReader(stack.prometheus.url, rate_window="5s")
    targets = [query(m, stack) for m in ("counts", "older", "both")]
    both = '{model_name="both"}'
    ready = f"count(sglang:kv_evictable_tokens{both}) == 2 and count(sglang:token_usage{both}) == 2"

    def read() -> dict[object, Readings]:
        return reader.read(targets)

    eventually(lambda: stack.prometheus.query(ready), bool, timeout=25, every=0.25)
    got = eventually(read, lambda r: all(Input.KV_CACHE_USAGE in r[t.key].values for t in targets))
    usage = {key: r.values[Input.KV_CACHE_USAGE] for key, r in got.items()}
    fullest = {key: r.values[Input.KV_CACHE_USAGE_MAX] for key, r in got.items()}
    assert usage == pytest.approx({"counts": 0.3, "older": 0.6, "both": 0.3})
    assert fullest == pytest.approx({"counts": 0.3, "older": 0.6, "both": 0.3})
