"""The preset registry: each metric name with its upstream file, the simulated exporters serving
exactly each preset's names, and a registration that names every problem."""

from __future__ import annotations

import ast
import inspect
import re
from types import ModuleType

import pytest

from scaler.config import MetadataError, parse_metadata
from scaler.presets import (
    PRESETS,
    REGISTRY,
    ROUTERS,
    Combine,
    Family,
    Kind,
    Preset,
    PresetError,
    engines,
    queue_read,
    register,
    registered,
    removed_in,
    routers,
    unregister,
)
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.router import RouterLoad, SimulatedRouter

# A file of an upstream repository: a path with the extension of its language or docs.
UPSTREAM_FILE = re.compile(r"[\w./-]+\.(?:py|go|rs|cc|md)\b")


def family_calls(module: ModuleType) -> list[tuple[str, str, str]]:
    """Each ``Family(field, template, ...)`` written in ``module``: field, template, and the comment
    lines right above it."""
    source = inspect.getsource(module)
    lines = source.splitlines()
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Family":
            # the field is an enum member (Input.X or Reading.X): its name, in the input table's words
            first = node.args[0]
            field = first.attr.lower() if isinstance(first, ast.Attribute) else ast.literal_eval(first)
            try:
                template = ast.literal_eval(node.args[1])
            except ValueError:  # a template built from a module constant (SGLANG_KV.format(...))
                template = eval(compile(ast.Expression(node.args[1]), "<template>", "eval"), vars(module))
            above: list[str] = []
            index = node.lineno - 2
            while index >= 0 and lines[index].strip().startswith("#"):
                above.insert(0, lines[index].strip())
                index -= 1
            out.append((field, template, "\n".join(above)))
    return out


BUILT_IN = [call for module in (engines, routers) for call in family_calls(module)]


def test_every_built_in_family_is_found() -> None:
    """The source walk finds every family of the built-in presets (none escapes the check below)."""
    assert len(BUILT_IN) == sum(len(p.families) for p in REGISTRY.all())


@pytest.mark.parametrize(("field", "template", "comment"), BUILT_IN, ids=[c[1][:60] for c in BUILT_IN])
def test_every_metric_name_carries_its_upstream_file(field: str, template: str, comment: str) -> None:
    """The comment above each family names the upstream file and every metric name it reads."""
    assert UPSTREAM_FILE.search(comment), f"no upstream file above {field}: {template}"
    for selector in Family(field, template).selectors():
        assert selector.base in comment, f"{selector.base} is not named above its family"


def served(text: str) -> set[str]:
    """The families a /metrics text declares (``# TYPE`` lines)."""
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def expected(preset: Preset, generations: tuple[str, ...]) -> set[str]:
    """The names a preset reads in ``generations``: a family's names before its first `or` are the
    current ones (a share of a pool reads its parts), those after it older; a family with no older
    name has its current in both. A per-pod signature (Combine.PODS) joins current names with `and`,
    each served by its own family, and adds none."""
    out = set()
    for family in preset.families:
        if family.combine is Combine.PODS:
            continue
        current, older = ({s.base for s in names} for names in family.generations())
        if "current" in generations:
            out |= current
        if "legacy" in generations:
            out |= older or current
    return out


def render(preset: Preset, generations: tuple[str, ...] | None) -> str:
    """The simulated exporter of ``preset`` (two pods, or the router) under load, rendered once."""
    if preset.kind is Kind.ROUTER:
        router = SimulatedRouter(preset.name, generations=generations)
        router.set_load(RouterLoad(queued=5, saturation=0.5, requests_per_s=2))
        return router.render()
    fleet = SimulatedFleet(engine=preset.name, generations=generations)
    fleet.set_pods(["p-0", "p-1"])
    fleet.set_fleet_load(PodLoad(waiting=4, running=6, prompt_tokens_per_s=100, requests_per_s=2))
    return fleet.render()


@pytest.mark.parametrize("preset", REGISTRY.all(), ids=lambda p: f"{p.kind}-{p.name}")
@pytest.mark.parametrize("generations", [("current",), ("legacy",)])
def test_the_simulated_exporter_serves_exactly_the_presets_names(
    preset: Preset, generations: tuple[str, ...]
) -> None:
    """Each generation serves exactly the names the preset reads in it; the two together, every
    name the preset reads."""
    assert served(render(preset, generations)) == expected(preset, generations)
    every = {s.base for f in preset.families for s in f.selectors()}
    assert served(render(preset, ("current", "legacy"))) == every


@pytest.mark.parametrize("preset", REGISTRY.all(), ids=lambda p: f"{p.kind}-{p.name}")
def test_by_default_the_exporter_writes_what_the_upstream_writes(preset: Preset) -> None:
    """Both generations where the upstream writes both (llm-d-router v0.9-v0.10), else the current."""
    default = ("current", "legacy") if preset.both_generations else ("current",)
    assert served(render(preset, None)) == expected(preset, default)


def test_llm_d_writes_both_generations() -> None:
    """llm-d-router writes each flow-control series under both names at once."""
    names = served(render(ROUTERS["llm-d"], None))
    assert {"llm_d_epp_flow_control_queue_size", "inference_extension_flow_control_queue_size"} <= names


def throwaway(name: str = "throwaway", **overrides: object) -> Preset:
    """A small engine preset for the registry's own tests."""
    families = (Family("queue_waiting", "sum by ({by}) (throwaway_queue)"),)
    return Preset(name, families, "example/throwaway server.go", **overrides)  # type: ignore[arg-type]


def test_registering_names_every_problem() -> None:
    """A bad preset is refused with one reason per problem, and nothing is registered."""
    bad = Preset(
        "Bad Name",
        (
            Family("queue_waitng", "sum by ({by}) (x_queue)"),
            Family("requests_running", "sum by ({by}) (a_running) + sum by ({by}) (b_running)"),
            Family("kv_cache_usage", "avg by ({by}) (sum(x_kv))"),
        ),
        "example",
        image="(",
    )
    with pytest.raises(PresetError) as caught:
        register(bad)
    message = str(caught.value)
    for part in (
        "name 'Bad Name'",
        "'queue_waitng'",
        "requests_running: a family reads one metric",
        "image '('",
    ):
        assert part in message
    assert "Bad Name" not in PRESETS


@pytest.mark.parametrize(
    ("preset", "reason"),
    [
        (throwaway("vllm"), "engine 'vllm' is registered already"),
        (throwaway("custom"), "engine 'custom' is reserved"),
        (throwaway(kind=Kind.ROUTER, name="none"), "router 'none' is reserved"),
    ],
    ids=["taken", "custom", "none"],
)
def test_a_taken_or_reserved_name_is_refused(preset: Preset, reason: str) -> None:
    """A preset cannot replace one registered, nor take the names that mean "no preset"."""
    with pytest.raises(PresetError, match=reason):
        register(preset)


def test_registered_is_undone_after_the_block_even_on_an_error() -> None:
    """``registered`` unregisters the preset after the block, also when the block raises."""
    preset = throwaway()

    def fail_inside() -> None:
        with registered(preset):
            assert parse_metadata({"engine": "throwaway"}).engine == "throwaway"
            raise RuntimeError

    with pytest.raises(RuntimeError):
        fail_inside()
    assert "throwaway" not in PRESETS
    with pytest.raises(MetadataError, match="engine"):
        parse_metadata({"engine": "throwaway"})
    with pytest.raises(KeyError, match="not registered"):
        unregister(preset)


def test_an_engine_not_in_the_registry_is_refused_with_the_choices() -> None:
    """The metadata's error lists the registry's engines (and custom), read from the registry."""
    with pytest.raises(MetadataError) as caught:
        parse_metadata({"engine": "llamacpp"})
    assert f"must be one of {', '.join(PRESETS)} or custom" in str(caught.value)
    with registered(throwaway("llamacpp")):
        assert parse_metadata({"engine": "llamacpp"}).engine == "llamacpp"


def test_a_router_with_a_pool_label_requires_its_pool() -> None:
    """inferencePool is required by the routers that read per pool (llm-d), refused with the others."""
    with pytest.raises(MetadataError, match="inferencePool: required with router: llm-d"):
        parse_metadata({"router": "llm-d"})
    with pytest.raises(MetadataError, match=r"inferencePool=.*only used with router: llm-d"):
        parse_metadata({"router": "dynamo", "inferencePool": "p"})
    matchers = parse_metadata({"router": "llm-d", "inferencePool": "p"}).router_matchers
    assert [str(m) for m in matchers] == ['inference_pool="p"']


@pytest.mark.parametrize(
    ("query", "preset", "matchers"),
    [
        ('sum(vllm:num_requests_waiting{model_name="m"})', "vllm", ['model_name="m"']),
        ('sum(llm_d_epp_flow_control_queue_size{inference_pool="p"})', "llm-d", ['inference_pool="p"']),
        ("sum(inference_extension_flow_control_queue_size)", "llm-d", []),
        ("sum(dynamo_frontend_queued_requests)", "dynamo", []),
        ("sum(dynamo_frontend_router_queue_pending_requests)", "dynamo", []),
    ],
)
def test_a_query_on_a_queue_is_read_as_its_preset(query: str, preset: str, matchers: list[str]) -> None:
    """The queue metrics come from the registry: each preset's queue family, every generation."""
    read = queue_read(query)
    assert read is not None
    assert (read.preset.name, [str(m) for m in read.matchers]) == (preset, matchers)


def test_llm_d_routers_names_removed_after_v0_10_are_named_with_their_replacement() -> None:
    """A KEDA query on a name llm-d-router removed after v0.10.0 is found, with the llm_d_epp_* name
    v0.9.0 and later write beside it, and the change that removed it (unverified ones said so)."""
    query = "sum(inference_pool_average_queue_size) + inference_extension_flow_control_pool_saturation"
    found = dict(removed_in(query))
    assert found["inference_pool_average_queue_size"].instead == "llm_d_epp_average_queue_size"
    assert "unverified" in found["inference_pool_average_queue_size"].by
    assert found["inference_extension_flow_control_pool_saturation"].by.startswith("llm-d-router PR #2826")
    assert removed_in("sum(inference_extension_flow_control_queue_size)") == []  # still written on main


def test_a_familys_current_names_are_those_before_its_first_or() -> None:
    """A template's names before its first `or` are the current ones, each once, those after it
    older; a share of a pool must read its parts as the current names."""
    current, older = Family(
        "kv_cache_usage", "avg by ({by}) (u / (u + a + e)) or avg by ({by}) (old_usage)", share=True
    ).generations()
    assert [s.metric for s in current] == ["u", "a", "e"]
    assert [s.metric for s in older] == ["old_usage"]
    lone = Family("kv_cache_usage", "avg by ({by}) (old_usage) or avg by ({by}) (u / (u + a))", share=True)
    assert "a share reads its pool's parts" in "; ".join(lone.problems())


def test_removed_names_are_found_whole() -> None:
    """A removed name is found as a whole metric name (or its histogram's series), not inside another."""
    assert removed_in('sum(vllm:time_per_output_token_seconds_total{a="b"})') == []
    assert removed_in("vllm:gpu_cache_usage_perc_max") == []
    found = removed_in(
        "histogram_quantile(0.9, rate(vllm:time_per_output_token_seconds_bucket[1m]))"
        " + sum(vllm:gpu_cache_usage_perc)"
    )
    assert [name for name, _ in found] == ["vllm:time_per_output_token_seconds", "vllm:gpu_cache_usage_perc"]
    assert "PR #32661" in found[0][1].by
    assert found[0][1].instead == "vllm:inter_token_latency_seconds"
