"""vLLM's KV cache size, a label of its cache_config_info, read on a real Prometheus where exported."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from scaler.config import parse_metadata
from scaler.inputs import Input
from scaler.readings import Readings
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sources.prometheus import PrometheusReader, TargetQuery
from tests.helpers import ScrapedFleets, eventually, started

pytestmark = pytest.mark.prometheus

AT = datetime(2026, 12, 1, tzinfo=UTC)
SIZE = 290_925.0  # one engine's cache, in tokens: what vLLM's boot log prints as "GPU KV cache size"


class OlderVllm(SimulatedFleet):
    """A vLLM before PR #42206: its cache_config_info carries the CacheConfig's fields, no size in tokens."""

    def render(self) -> str:
        """The fleet's exposition and a cache_config_info as such a vLLM writes it."""
        older = (
            "# TYPE vllm:cache_config_info gauge\n"
            'vllm:cache_config_info{namespace="inference",pod="older-0",model_name="older",engine="0",'
            'block_size="16",num_gpu_blocks="18182",gpu_memory_utilization="0.9"} 1\n'
        )
        return super().render() + older


class Stack(ScrapedFleets):
    """A real Prometheus scraping three vLLM fleets: one that writes its cache's size, one whose
    cache_config_info lacks it, one that writes no cache_config_info at all."""

    def __init__(self) -> None:
        fleets = []
        for model, kind in (("new", SimulatedFleet), ("older", OlderVllm), ("none", SimulatedFleet)):
            fleet = kind(namespace="inference", model=model)
            fleet.set_pods([f"{model}-0", f"{model}-1"] if model == "new" else [f"{model}-0"])
            fleet.kv_cache_tokens = SIZE if model == "new" else None
            fleet.set_fleet_load(PodLoad(running=6))
            fleets.append(fleet)
        super().__init__(fleets)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """The module's Prometheus and fleets."""
    yield from started(Stack)


def test_the_kv_cache_size_is_summed_over_the_engines_and_unknown_where_not_exported(stack: Stack) -> None:
    """Two pods of 290,925 tokens each read 581,850 in all; a cache_config_info without the label, and
    none at all, leave it unknown with a reason (never 0), the rest of the fleet read as before."""
    reader = PrometheusReader(stack.prometheus.url, rate_window="5s")
    new, older, none = (
        TargetQuery(m, parse_metadata({"labelSelector": f'model_name="{m}"'}), stack.prometheus.url)
        for m in ("new", "older", "none")
    )

    def read() -> dict[object, Readings]:
        return reader.read([new, older, none])

    got = eventually(
        read,
        lambda r: (
            r["new"].values.get(Input.KV_CACHE_TOKENS) == 2 * SIZE
            and r["older"].values.get(Input.REQUESTS_RUNNING) == 6
            and Input.KV_CACHE_TOKENS in r["older"].missing
            and r["none"].values.get(Input.REQUESTS_RUNNING) == 6
        ),
        timeout=25,
        every=0.25,
    )
    assert got["new"].observation(AT, new.policy).kv_cache_tokens == 2 * SIZE
    seen = got["older"].observation(AT, older.policy)
    assert seen.kv_cache_tokens is None
    assert (
        seen.missing[Input.KV_CACHE_TOKENS]
        == "the series carry no kv_cache_size_tokens label (an older version)"
    )
    assert seen.requests_running == 6
    unseen = got["none"].observation(AT, none.policy)
    assert unseen.kv_cache_tokens is None
    assert unseen.missing[Input.KV_CACHE_TOKENS] == "no series match labelSelector"
