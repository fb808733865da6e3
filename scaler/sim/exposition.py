"""The simulated exporters' /metrics: a preset's families, named and labelled as its servers write them.

``write_preset`` writes, for each family of a preset (``scaler.presets``), the series it reads:
its metric name (the current one, the older one, or both: ``generations``), the labels its
select needs (the pod's, the model's, the router's pool) and those the template writes
(Triton's ``request_type="waiting"``), with the value the simulation gives the family's
input (``Simulated``). So every engine and router in the registry is served, a throwaway
one registered in a test included, and the tests check the served names against the
preset's (``tests/test_sim.py``). The text is Prometheus' format 0.0.4, written by hand.

*Example*: vLLM's ``queue_waiting`` family and a pod holding 3 give
``vllm:num_requests_waiting{namespace="inference",pod="vllm-0",model_name="llama",engine="0"} 3``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from scaler.presets import Family, Preset, Select, Selector

# The two generations of metric names: the current ones, and the older ones a family reads where
# the current are absent (llm-d-router v0.9-v0.10 write both; vLLM before 0.11, only the older).
GENERATIONS = ("current", "legacy")
# The pool a share family's parts are written of (SGLang's KV cache, in tokens): any size gives the
# same share; 100,000 is an 8B model's on one GPU, so the series look like a server's.
SIMULATED_POOL_TOKENS = 100_000.0


@dataclass(frozen=True, slots=True)
class Simulated:
    """What a simulation reports for one input: a gauge's value, a counter's total, or a histogram."""

    value: float  # a gauge's value, a counter's total, or a histogram's _sum (seconds)
    count: float = 0.0  # a histogram's observations (_count)
    buckets: tuple[tuple[float, float], ...] = ()  # a histogram's (upper bound in s, cumulative count)


@dataclass(slots=True)
class Observed:
    """A histogram a simulated server observes into: ``n`` observations of one value at a time,
    counted in every bucket whose upper bound (``bounds``, seconds, +Inf left out) holds it."""

    bounds: tuple[float, ...]
    count: float = 0.0  # _count
    total: float = 0.0  # _sum
    buckets: list[float] = field(init=False)  # cumulative, one per bound

    def __post_init__(self) -> None:
        self.buckets = [0.0] * len(self.bounds)

    def observe(self, value: float, n: float) -> None:
        """``n`` observations (a rate times a span: fractional) of ``value``."""
        self.count += n
        self.total += n * value
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.buckets[i] += n

    def simulated(self) -> Simulated:
        """The histogram as the exposition writes it."""
        return Simulated(self.total, self.count, tuple(zip(self.bounds, self.buckets, strict=True)))


def default_generations(preset: Preset) -> tuple[str, ...]:
    """The names the upstream writes: both generations where it writes both, else the current."""
    return GENERATIONS if preset.both_generations else GENERATIONS[:1]


def written(family: Family, generations: tuple[str, ...]) -> tuple[Selector, ...]:
    """The selectors of ``family`` served in ``generations``: the current names, the older ones
    (or, for a family with no older name, the current in either generation)."""
    current, older = family.generations()
    out = list(current) if "current" in generations else []
    if "legacy" in generations:
        out += older or current
    return tuple(dict.fromkeys(out))


def share_parts(family: Family, share: float) -> dict[str, float]:
    """A share family's current series for ``share`` of a pool of ``SIMULATED_POOL_TOKENS``: the
    first (used) the share, the others the rest in equal parts (``Family.share``), so a reading that
    left one of them out would be seen to be wrong.

    *Example*: SGLang at 0.3: kv_used_tokens 30,000, kv_available_tokens and kv_evictable_tokens
    35,000 each."""
    metrics = list(dict.fromkeys(s.metric for s in family.generations()[0]))
    rest = (1.0 - share) * SIMULATED_POOL_TOKENS / (len(metrics) - 1)
    return {metric: share * SIMULATED_POOL_TOKENS if i == 0 else rest for i, metric in enumerate(metrics)}


def _select_labels(preset: Preset, family: Family, model: str, pool: str | None) -> dict[str, str]:
    model_value = model.lower() if preset.lowercases_model else model
    if family.select in (Select.ANY, Select.NAMESPACE):
        return {}  # the source's own labels name the namespace
    if family.select is Select.MODEL:
        return {family.model_label: model_value}
    out = {**preset.labels}
    if preset.model_label is not None:
        out[preset.model_label] = model_value
    if family.select is Select.POOL and preset.pool_label is not None and pool is not None:
        out[preset.pool_label] = pool
    return out


def write_preset(
    out: Exposition,
    preset: Preset,
    values: Mapping[str, Simulated],
    labels: Mapping[str, str],
    *,
    model: str,
    pool: str | None = None,
    generations: tuple[str, ...] = GENERATIONS[:1],
) -> None:
    """Each family of ``preset`` with a value in ``values`` (by input), as the preset reads it.

    ``labels`` are the source's own (a pod's namespace and name, and any label its scrape copies
    from the pod, such as its prefill/decode role), over the preset's; a series two families read
    (vLLM's running gauge, also counted for the replicas) is written once.
    """
    done: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for family in preset.families:
        value = values.get(family.field)
        if value is None:
            continue
        parts = share_parts(family, value.value) if family.share else {}
        for selector in written(family, generations):
            series = {**_select_labels(preset, family, model, pool), **labels}  # the source's own win
            series |= {m.name: m.value for m in selector.matchers}
            key = (selector.base, tuple(sorted(series.items())))
            if key in done:
                continue
            done.add(key)
            if selector.type == "histogram":
                scale = 1.0 / family.le_scale  # back to the unit the server writes (ms for Triton)
                buckets = [(bound * scale, count) for bound, count in value.buckets]
                out.histogram(selector.base, series, buckets, value.value * scale, value.count, preset.source)
            elif family.value_label is not None:  # an info gauge: 1, its figure a label (Family.value_of)
                figure = value.value
                series[family.value_label] = f"{figure:.0f}" if figure.is_integer() else repr(figure)
                out.family(selector.metric, "gauge", f"{selector.metric} ({preset.source})")
                out.sample(selector.metric, series, 1.0)
            else:
                out.family(selector.metric, selector.type, f"{selector.metric} ({preset.source})")
                out.sample(selector.metric, series, parts.get(selector.metric, value.value))


def _labels(pairs: dict[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in pairs.items())
    return "{" + inner + "}"


class Exposition:
    """Prometheus text format 0.0.4, written by hand so the names are exactly the server's.

    Samples are grouped by family, as the format requires, whatever order they come in.
    """

    def __init__(self) -> None:
        self._families: dict[str, tuple[str, str, list[str]]] = {}

    def family(self, name: str, kind: str, help_text: str = "") -> None:
        """Declare a family (its TYPE and HELP), once; later declarations keep the first."""
        self._families.setdefault(name, (kind, help_text or name, []))

    def _family_of(self, name: str) -> list[str]:
        if name in self._families:
            return self._families[name][2]
        for suffix in ("_bucket", "_sum", "_count"):
            base = name.removesuffix(suffix)
            if base != name and base in self._families:
                return self._families[base][2]
        self.family(name, "counter" if name.endswith("_total") else "gauge")
        return self._families[name][2]

    def sample(self, name: str, labels: dict[str, str], value: float) -> None:
        """One sample, filed under its family (a histogram's _bucket/_sum/_count under the histogram)."""
        self._family_of(name).append(f"{name}{_labels(labels)} {value:.6f}")

    def histogram(
        self,
        name: str,
        labels: dict[str, str],
        buckets: list[tuple[float, float]],
        total: float,
        count: float,
        help_text: str = "",
    ) -> None:
        """One histogram's series: each cumulative bucket, +Inf, _sum and _count."""
        self.family(name, "histogram", help_text)
        for bound, cumulative in buckets:
            self.sample(f"{name}_bucket", {**labels, "le": f"{bound:g}"}, cumulative)
        self.sample(f"{name}_bucket", {**labels, "le": "+Inf"}, count)
        self.sample(f"{name}_sum", labels, total)
        self.sample(f"{name}_count", labels, count)

    def text(self) -> str:
        """The exposition: each family's HELP and TYPE, then its samples."""
        lines: list[str] = []
        for name, (kind, help_text, samples) in self._families.items():
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(samples)
        return "\n".join(lines) + "\n"


class QuietHandler(BaseHTTPRequestHandler):
    """An HTTP handler that logs nothing (a test's or the demo's exporters would flood stderr) and
    sends a whole body with its length: what every loopback server here answers with.

    A client that leaves mid-request (a scrape or a query that timed out, a watch stopped, a
    keep-alive connection closed with a reset) ends its connection and nothing else, as a real
    server drops it: ``socketserver`` would print a traceback for it."""

    def handle(self) -> None:
        """Serve the connection's requests until it closes, or until its client goes."""
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def send_body(self, status: int, body: bytes, content_type: str) -> None:
        """Answer ``status`` with ``body`` of ``content_type``, its Content-Length set."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Nothing: the servers here are loopback doubles and simulators."""
        return


class MetricsServer:
    """``/metrics`` over HTTP from a daemon thread, with the text ``render`` returns at each scrape."""

    def __init__(self, render: Callable[[], str]) -> None:
        self.render = render
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Start serving; returns the ``host:port`` it listens on."""
        render = self.render

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                self.send_body(200, render().encode(), "text/plain; version=0.0.4; charset=utf-8")

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self.address

    @property
    def address(self) -> str:
        """The ``host:port`` the server listens on; RuntimeError before ``start``."""
        if self._server is None:
            raise RuntimeError("not started")
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def stop(self) -> None:
        """Shut the server down, if it runs."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class Exporter:
    """A simulated server or router: ``/metrics`` over HTTP (``MetricsServer``) with what ``render``
    writes, named as its ``preset`` names them, in the ``generations`` of names it writes; its
    counters advance by ``clock`` under ``_lock``, from ``_last``."""

    def __init__(
        self, preset: Preset, model: str, generations: tuple[str, ...] | None, clock: Callable[[], float]
    ) -> None:
        self.preset = preset
        self.model = model
        # Which metric names it writes: the current, the older ("legacy": vLLM before 0.11
        # wrote vllm:time_per_output_token_seconds), or both where the upstream writes both.
        self.generations = generations or default_generations(preset)
        self.clock = clock
        self._last = clock()
        self._lock = threading.Lock()
        self._http = MetricsServer(self.render)

    def render(self) -> str:
        """The Prometheus text exposition, named as the preset's upstream names it."""
        raise NotImplementedError

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve ``/metrics`` over HTTP from a daemon thread; returns the ``host:port`` it listens on."""
        return self._http.start(host, port)

    @property
    def address(self) -> str:
        """The ``host:port`` the server listens on; RuntimeError before ``start``."""
        return self._http.address

    def stop(self) -> None:
        """Shut the metrics server down, if it runs."""
        self._http.stop()
