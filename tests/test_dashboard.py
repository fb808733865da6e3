"""Every Grafana panel works: a real Prometheus scrapes the in-process scaler deciding for two
ScaledObjects, and each panel's query, with its template variables filled in, returns data."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.model import Decision, Inert, InertReason
from scaler.outputs.endpoint import SERIES_BY_NAME
from scaler.sim.prometheus import LocalPrometheus
from scaler.targets.registry import Target, TargetKey
from tests.conftest import require_prometheus
from tests.helpers import ScriptedSource
from tests.observability import LLAMA, QWEN, TracedServer, full_source

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "manifests" / "grafana" / "dashboard.json"
# What Grafana would put in place of its built-in variables at this scrape interval.
BUILTINS = {"$__rate_interval": "4s", "$__range": "1m", "$__interval": "1s"}


def load_dashboard() -> dict[str, Any]:
    """The committed Grafana dashboard JSON."""
    dashboard: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return dashboard


def panel_targets(dashboard: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every query target with its panel's title, including panels nested in rows."""
    out = []
    for panel in dashboard["panels"]:
        for inner in [panel, *panel.get("panels", [])]:
            for target in inner.get("targets", []):
                out.append((inner["title"], target))
    return out


def substitute(expr: str, namespace: str, scaledobject: str) -> str:
    """A panel query with Grafana's built-in and template variables filled in."""
    for name, value in BUILTINS.items():
        expr = expr.replace(name, value)
    expr = expr.replace("$namespace", namespace).replace("$scaledobject", scaledobject)
    assert "$" not in expr, f"a template variable the test does not know: {expr}"
    return expr


class Stand:
    """The scaler under test, the Prometheus scraping it, and the source it reads."""

    def __init__(
        self,
        server: TracedServer,
        prometheus: LocalPrometheus,
        source: ScriptedSource,
        first_binding: dict[TargetKey, str],
    ) -> None:
        self.server = server
        self.prometheus = prometheus
        self.source = source
        # Each target's binding signal at its first decision: what the stand was built to show.
        # Later decisions may differ (the engine keeps learning at every refresh, and how many ran
        # before the series existed depends on the machine's load), and tests run in random order.
        self.first_binding = first_binding

    def instant(self, expr: str, scrapes: int = 6) -> list[dict[str, Any]]:
        """The series an instant query returns, asked again over the next ``scrapes`` scrapes while
        it returns none: a scrape that fails (its 0.5 s timeout, on a loaded machine) marks every
        series stale at once, and they are back at the next one that succeeds."""
        for _ in range(scrapes):
            found = self.prometheus.query(expr)
            if found:
                return found
            time.sleep(self.prometheus.scrape_interval_s)
        return self.prometheus.query(expr)

    def query_range(self, expr: str, seconds: float = 10.0) -> list[dict[str, Any]]:
        """The series a range query over the last ``seconds`` returns."""
        end = time.time()  # noqa: TID251 - a real Prometheus holds samples near now
        params = {"query": expr, "start": f"{end - seconds:.3f}", "end": f"{end:.3f}", "step": "1"}
        url = f"{self.prometheus.url}/api/v1/query_range?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as reply:  # loopback
            body = json.loads(reply.read())
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def latest(self, key: TargetKey) -> Any:
        """The scaler's latest decision for one ScaledObject."""
        target = self.server.thread.runtime.registry.get(key)
        assert target is not None
        assert target.latest is not None
        return target.latest


@pytest.fixture(scope="module")
def stand() -> Iterator[Stand]:
    """The traced scaler deciding for two ScaledObjects, scraped by Prometheus until series exist."""
    require_prometheus()
    source = full_source()
    # Wall-clock decisions four times a second, scraped twice a second.
    with TracedServer(source, refresh_interval_s=0.25) as server:
        first: dict[TargetKey, str] = {}

        def keep_first(target: Target, decision: Decision) -> None:
            first.setdefault(target.key, decision.binding.value)

        server.thread.runtime.sinks.append(keep_first)
        server.register(LLAMA, QWEN)
        prometheus = LocalPrometheus(scrape_interval_s=0.5)
        try:
            prometheus.start([server.address])
            for key in (LLAMA, QWEN):
                selector = f'namespace="{key.namespace}", scaledobject="{key.name}"'
                assert prometheus.wait_for(
                    f"count_over_time(llm_scaler_pending_pod_seconds_avoided_total{{{selector}}}[1m]) > 3"
                ), prometheus.log_tail()
            yield Stand(server, prometheus, source, first)
        finally:
            prometheus.close()


def test_the_dashboard_covers_what_it_must_show() -> None:
    """The dashboard has its variables, shows every key series, and queries only exported ones."""
    dashboard = load_dashboard()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == {"datasource", "namespace", "scaledobject"}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    exprs = " ".join(t["expr"] for _, t in panel_targets(dashboard))
    for series in (
        "llm_scaler_desired_replicas",
        "llm_scaler_input_current_replicas",
        "llm_scaler_input_ready_replicas",
        "llm_scaler_signal_proposed_replicas",
        "llm_scaler_binding_signal_info",
        "llm_scaler_gpu_held_back_replicas",
        "llm_scaler_pending_pod_seconds_avoided_total",
        "llm_scaler_input_waiting_requests",
        "llm_scaler_input_ttft_p95_seconds",
        "llm_scaler_input_ttft_p99_seconds",
        "llm_scaler_input_prompt_tokens_per_second",
        "llm_scaler_forecast_prompt_tokens_per_second",
        "llm_scaler_input_running_requests",
        "llm_scaler_forecast_concurrency",
        "llm_scaler_capacity_slots",
        "llm_scaler_prewarm_active",
        "llm_scaler_inert",
    ):
        assert series in exprs, f"no panel shows {series}"
    for name in set(re.findall(r"llm_scaler_[a-z0-9_]+", exprs)):
        assert name in SERIES_BY_NAME, f"a panel queries {name}, which the scaler does not export"
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            for target in panel["targets"]:
                assert 'namespace="$namespace"' in target["expr"] or "$namespace" not in target["expr"]


def test_every_panel_query_returns_series_for_each_scaledobject(stand: Stand) -> None:
    """Every panel query parses and returns series for single, all and multi-value selections."""
    targets = panel_targets(load_dashboard())
    assert len(targets) >= 15
    cases = [
        (LLAMA.namespace, LLAMA.name),
        (QWEN.namespace, QWEN.name),
        (QWEN.namespace, ".*"),  # "All", as Grafana's allValue
        (LLAMA.namespace, f"({LLAMA.name}|absent)"),  # a multi-value selection
    ]
    failures = []
    for title, target in targets:
        for namespace, scaledobject in cases:
            expr = substitute(target["expr"], namespace, scaledobject)
            where = f"{title} [{target['refId']}] {namespace}/{scaledobject}: {expr}"
            try:
                instant = stand.instant(expr)
                ranged = stand.query_range(expr) if target.get("range", True) else instant
            except urllib.error.HTTPError as exc:  # 400: the expression does not parse
                failures.append(f"{where}: {exc.read().decode(errors='replace')}")
                continue
            if not instant or not ranged:
                failures.append(f"{where}: no series")
    assert not failures, "panels without data:\n" + "\n".join(failures)


def test_variable_queries_list_both_scaledobjects(stand: Stand) -> None:
    """The namespace and scaledobject variable queries list both ScaledObjects."""
    variables = {v["name"]: v for v in load_dashboard()["templating"]["list"]}
    found: dict[str, set[str]] = {}
    for name in ("namespace", "scaledobject"):
        match = re.fullmatch(r"label_values\((.+), *([a-z_]+)\)", variables[name]["query"])
        assert match, variables[name]["query"]
        selector, label = match.groups()
        values = set()
        for namespace in (LLAMA.namespace, QWEN.namespace):
            for series in stand.prometheus.query(selector.replace("$namespace", namespace)):
                values.add(series["metric"][label])
        found[name] = values
    assert found["namespace"] == {LLAMA.namespace, QWEN.namespace}
    assert found["scaledobject"] == {LLAMA.name, QWEN.name}


def test_panels_show_what_the_scaler_decided(stand: Stand) -> None:
    """The binding signal and proposals in Prometheus match each ScaledObject's latest decision."""
    for key in (LLAMA, QWEN):
        decision = stand.latest(key)
        selector = f'namespace="{key.namespace}", scaledobject="{key.name}"'
        binding = stand.prometheus.query(f"llm_scaler_binding_signal_info{{{selector}}}")
        assert [b["metric"]["signal"] for b in binding] == [decision.binding.value]
        proposals = {
            s["metric"]["signal"]: float(s["value"][1])
            for s in stand.prometheus.query(f"llm_scaler_signal_proposed_replicas{{{selector}}}")
        }
        assert proposals == {k: float(v) for k, v in decision.proposals.items()}
    assert stand.first_binding == {LLAMA: "load", QWEN: "prewarm"}  # llama's backlog is the load's


def wait_until(predicate: Callable[[], object], timeout_s: float = 20.0) -> bool:
    """Whether ``predicate`` becomes true within ``timeout_s``, polling every 0.2 s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return bool(predicate())


def test_decision_series_follow_a_change_in_load(stand: Stand) -> None:
    """After more load and free GPUs, the decision series follow and the stale clamp series vanish."""
    selector = f'namespace="{LLAMA.namespace}", scaledobject="{LLAMA.name}"'

    def value(expr: str) -> float | None:
        result = stand.prometheus.query(expr)
        return float(result[0]["value"][1]) if result else None

    before = stand.latest(LLAMA)
    assert before.gpu_held_back > 0
    assert value(f"llm_scaler_desired_replicas{{{selector}}}") == before.replicas
    # A smaller backlog, and free GPUs appear: the load asks less and nothing is held back.
    stand.source.per_target[LLAMA].update(queue_waiting=1000.0, gpu_schedulable_replicas=12)
    assert wait_until(lambda: value(f"llm_scaler_input_waiting_requests{{{selector}}}") == 1000.0)
    assert wait_until(lambda: stand.latest(LLAMA).observation.queue_waiting == 1000.0)
    after = stand.latest(LLAMA)
    asked = after.proposals["load"]
    # The arrivals and the backlog's drain in one proposal: at least the bare drain, (2 served/s + 1000 /
    # 210 s) / 0.4 per replica = 17 (scaler/decider/signals/queue.py), the queueing model's headroom on top.
    assert asked >= 17
    assert after.replicas != before.replicas
    assert wait_until(lambda: value(f"llm_scaler_desired_replicas{{{selector}}}") == after.replicas)
    assert wait_until(
        lambda: value(f'llm_scaler_signal_proposed_replicas{{{selector}, signal="load"}}') == asked
    )
    assert wait_until(lambda: value(f"llm_scaler_gpu_held_back_replicas{{{selector}}}") == 0)
    # The gpu_inventory clamp is gone from the scrape, so Prometheus marks its series stale.
    assert wait_until(lambda: value(f'llm_scaler_clamp_active{{{selector}, kind="gpu_inventory"}}') is None)
    assert value(f'llm_scaler_clamp_active{{{selector}, kind="max"}}') == 1


def test_the_inert_panel_shows_a_reason_while_it_holds(stand: Stand) -> None:
    """A stale input makes qwen inert: its panel's series for stale goes to 1, the others stay 0,
    and back to 0 once the inputs are fresh; llama's never moves."""
    (panel,) = [p for p in load_dashboard()["panels"] if p["title"] == "Inert: why the scaler cannot act"]
    expr = substitute(panel["targets"][0]["expr"], QWEN.namespace, QWEN.name)

    def shown() -> dict[str, float]:
        return {s["metric"]["reason"]: float(s["value"][1]) for s in stand.prometheus.query(expr)}

    assert set(shown()) == {r.value for r in InertReason}
    stale = Inert(InertReason.STALE, "the last sample is 8m old", ("queue_waiting",))
    stand.source.per_target[QWEN]["inert"] = (stale,)
    try:
        assert wait_until(lambda: shown().get("stale") == 1.0)
        assert {r: v for r, v in shown().items() if r != "stale"} == dict.fromkeys(
            {r.value for r in InertReason} - {"stale"}, 0.0
        )
        llama = substitute(panel["targets"][0]["expr"], LLAMA.namespace, LLAMA.name)
        assert all(float(s["value"][1]) == 0.0 for s in stand.prometheus.query(llama))
    finally:
        del stand.source.per_target[QWEN]["inert"]
    assert wait_until(lambda: shown().get("stale") == 0.0)
