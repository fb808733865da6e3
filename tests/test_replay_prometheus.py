"""scaler replay --prometheus against a real Prometheus holding a known week of a vLLM fleet.

The week (``tests/vllm_history.py``: a daily cycle, a burst that queues, pods that come and
go, a 20-minute outage, a second model the selector must leave out) is written as OpenMetrics
and loaded with ``promtool tsdb create-blocks-from openmetrics``, a sample a minute, at fixed
dates (retention long enough to keep them). It is read in windows of two minutes (two scrapes).
"""

from __future__ import annotations

import csv
import itertools
import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scaler.cli import main
from scaler.config import parse_metadata
from scaler.replay.history import Measured, from_prometheus
from scaler.replay.span import span
from scaler.sim.prometheus import LocalPrometheus, free_port
from scaler.sources import history as history_source
from scaler.sources.history import read_history
from scaler.sources.prometheus import router_queues
from tests.conftest import require_prometheus
from tests.helpers import plain_scaledobject
from tests.vllm_history import (
    BURST,
    DECODE_TOKENS_S,
    MODEL,
    OUTAGE,
    POOL,
    PREFILL_TOKENS_S,
    SLOTS,
    START,
    STARTUP_S,
    Truth,
    week,
)

pytestmark = pytest.mark.prometheus

SCRAPE_S, WINDOW_S = 60, 120
END = START + timedelta(days=7)
PLAIN = plain_scaledobject(
    "http://prometheus.monitoring.svc:9090",
    f'sum(vllm:num_requests_waiting{{model_name="{MODEL}"}})',
    threshold=5,
    min_replicas=2,
    max_replicas=8,
)
# Six hours around Tuesday's burst, whose queue the arrivals must count.
AROUND_BURST = ("6h", (BURST[0] + timedelta(hours=3)).isoformat())


@pytest.fixture(scope="module")
def history() -> Iterator[tuple[LocalPrometheus, Truth]]:
    """A local Prometheus holding the week, and what the week was, for the whole module."""
    require_prometheus()
    text, truth = week(scrape_s=SCRAPE_S, window_s=WINDOW_S)
    prom = LocalPrometheus(retention="100y")
    try:
        prom.import_openmetrics(text)
        prom.start()
        yield prom, truth
    finally:
        prom.close()


ROUTED = {
    "engine": "vllm",
    "labelSelector": f'model_name="{MODEL}"',
    "router": "llm-d",
    "inferencePool": POOL,
}
SERVERS_ONLY = {k: v for k, v in ROUTED.items() if k not in ("router", "inferencePool")}


@pytest.fixture(scope="module")
def measured(history: tuple[LocalPrometheus, Truth]) -> Measured:
    """The week read back for the llama model's selector and llm-d pool, in windows of two minutes."""
    prom, _ = history
    policy = parse_metadata(ROUTED)
    return from_prometheus(read_history, prom.url, policy, span("7d", END.isoformat(), "2m", START))


def _largest_errors(measured: Measured, truth: Truth) -> dict[str, tuple[int, float]]:
    """Per series (arrivals, prompt and output tokens per request): the window read furthest from
    the week as written, and how far, over the windows with samples."""
    seen = np.ones(len(truth.arrivals), dtype=bool)
    seen[list(truth.outage_windows())] = False  # no sample there: interpolated, checked below
    out = {}
    for name, got, want in (
        ("arrivals", measured.rates.rates, truth.arrivals),
        ("prompt", measured.rates.prompt_tokens, truth.prompt),
        ("output", measured.rates.output_tokens, truth.output),
    ):
        assert got is not None
        error = np.where(seen, np.abs(np.asarray(got) / np.asarray(want) - 1), 0.0)
        out[name] = (int(np.argmax(error)), float(error.max()))
    return out


def test_arrivals_and_tokens_per_request_match_the_week(
    measured: Measured, history: tuple[LocalPrometheus, Truth]
) -> None:
    """Each window's arrivals (queue growth counted) and tokens per request are as written, within 2%."""
    _, truth = history
    assert measured.start == START
    assert len(measured.rates.starts) == len(truth.arrivals) == 7 * 86400 // WINDOW_S
    for name, (window, error) in _largest_errors(measured, truth).items():
        assert error < 0.02, f"{name}: window {window} off by {100 * error:.1f}%"
    # The burst queued: served alone would have missed the queue's growth by far more than 2%,
    # and so would the servers' queue without the router's.
    burst = int((BURST[0] - START).total_seconds() // WINDOW_S) + 5
    assert truth.served[burst] < 0.85 * truth.arrivals[burst]
    prom, _ = history
    unrouted = from_prometheus(
        read_history, prom.url, parse_metadata(SERVERS_ONLY), span("7d", END.isoformat(), "2m", START)
    )
    assert unrouted.rates.rates[burst] < 0.95 * truth.arrivals[burst]


def test_a_router_the_scaledobject_does_not_read_is_found_and_its_queue_counted(
    history: tuple[LocalPrometheus, Truth],
) -> None:
    """A ScaledObject on the servers' queue only, as a plain KEDA one is: the replay lists the router
    queues, finds llm-d's for this model, counts what waited there as arrivals (the week as written,
    within 2%) and says so; one for another model, or no lister, reads the servers alone."""
    prom, truth = history
    week_span = span("7d", END.isoformat(), "2m", START)
    found = from_prometheus(read_history, prom.url, parse_metadata(SERVERS_ONLY), week_span, router_queues)
    for name, (window, error) in _largest_errors(found, truth).items():
        assert error < 0.02, f"{name}: window {window} off by {100 * error:.1f}%"
    said = [
        line for line in found.limits if line.startswith("the llm-d router (pool llama-pool) holds requests")
    ]
    assert len(said) == 1
    assert f"router: llm-d, inferencePool: {POOL} in this scaler's trigger reads it" in said[0]
    other = {**SERVERS_ONLY, "labelSelector": 'model_name="mistral-7b"'}
    alone = from_prometheus(read_history, prom.url, parse_metadata(other), week_span, router_queues)
    assert not any("router" in line and "holds requests" in line for line in alone.limits)

    def unreachable(address: str, at: datetime) -> list[Any]:
        raise RuntimeError(f"{address} refused")

    failed = from_prometheus(read_history, prom.url, parse_metadata(SERVERS_ONLY), week_span, unreachable)
    assert any(line.startswith("the routers' queues could not be listed (") for line in failed.limits)
    burst = int((BURST[0] - START).total_seconds() // WINDOW_S) + 5
    assert failed.rates.rates[burst] < 0.95 * truth.arrivals[burst]


def test_the_outage_is_a_gap_that_is_said(measured: Measured) -> None:
    """The 20 minutes without samples are reported as a gap, with when and how long."""
    assert len(measured.gaps) == 1
    start_s, length_s = measured.gaps[0]
    assert start_s == pytest.approx((OUTAGE[0] - START).total_seconds(), abs=WINDOW_S)
    assert length_s == pytest.approx(OUTAGE[1].total_seconds(), abs=2 * WINDOW_S)
    assert any("1 gap(s) without data" in line and "from 2026-11-26T03:0" in line for line in measured.limits)


def test_the_served_count_and_the_outage_s_requests_add_up_to_the_week(
    measured: Measured, history: tuple[LocalPrometheus, Truth]
) -> None:
    """The served count leaves the outage out and says so: with the gap's requests it is the week's."""
    _, truth = history
    served = sum(truth.served) * WINDOW_S
    assert measured.served < served - 0.9 * 0.4 * OUTAGE[1].total_seconds()  # the outage's are not in it
    assert measured.served + measured.gap_arrivals == pytest.approx(served, rel=0.005)
    line = measured.line(1)
    assert f"{measured.served:,.0f} requests served (not counted: the " in line
    assert f"about {measured.gap_arrivals:,.0f} requests at the rates either side" in line


def test_the_replayed_requests_and_pods_match_the_week(
    measured: Measured, history: tuple[LocalPrometheus, Truth]
) -> None:
    """The requests the replay runs, their mean sizes and the pods reporting add up to the week's."""
    _, truth = history
    trace = measured.trace(seed=0)
    written = sum(truth.arrivals) * WINDOW_S
    assert len(trace) == pytest.approx(written, rel=0.02)
    weights = np.asarray(truth.served)
    assert trace.prompt_tokens.mean() == pytest.approx(np.average(truth.prompt, weights=weights), rel=0.02)
    assert trace.output_tokens.mean() == pytest.approx(np.average(truth.output, weights=weights), rel=0.02)
    assert measured.replica_seconds == pytest.approx(sum(truth.pods) * WINDOW_S, rel=0.02)
    assert measured.peak_pods == max(truth.pods)


def test_a_long_span_is_read_in_chunks(
    history: tuple[LocalPrometheus, Truth], measured: Measured, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read in chunks of 700 points (Prometheus refuses over 11,000), the week is the same."""
    prom, _ = history
    monkeypatch.setattr(history_source, "MAX_RANGE_POINTS", 700)
    policy = parse_metadata(ROUTED)
    chunked = from_prometheus(read_history, prom.url, policy, span("7d", END.isoformat(), "2m", START))
    for name in ("starts", "rates", "prompt_tokens", "output_tokens"):
        assert np.array_equal(getattr(chunked.rates, name), getattr(measured.rates, name)), name
    assert chunked.gaps == measured.gaps


def _around_burst(prom: LocalPrometheus) -> tuple[str, ...]:
    """``--prometheus`` on the module's Prometheus, over the six hours around the burst, 2m a window."""
    since, until = AROUND_BURST
    return ("--prometheus", prom.url, "--since", since, "--until", until, "--step", "2m")


def _replay(prom: LocalPrometheus, tmp_path: Path, *args: str) -> int:
    so = tmp_path / "plain.yaml"
    so.write_text(PLAIN)
    return main(["replay", "--scaledobject", str(so), "--no-plot", *args])


def test_a_plain_keda_object_is_replayed_against_its_conversion(
    history: tuple[LocalPrometheus, Truth], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The object run today is the baseline; its conversion is this scaler; the limits go to stderr."""
    prom, _ = history
    assert (
        _replay(
            prom,
            tmp_path,
            *_around_burst(prom),
            "--out",
            str(tmp_path / "a"),
        )
        == 0
    )
    out, err = capsys.readouterr()
    lines = out.splitlines()
    # Before any what-if, the fleet as it ran, replayed: a figure of the replica is the default here
    # (the six hours do not show it) and the model replays the fleet more than a point off what the
    # history measured, so that comes first, naming the default, and every row is marked as the model's.
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    own = summary["own_fleet"]
    assert own["off"] is True
    assert own["defaults"], "a latency figure of the replica is the default in these six hours"
    assert lines[0].startswith(
        "WARNING: the replica model does not reproduce your fleet: replayed as it ran,"
    )
    assert f"the replica's {', '.join(own['defaults'])} " in lines[0]
    assert "the cluster model's default, not measured from your fleet" in lines[0]
    assert lines[1].startswith("own fleet: the replicas the history holds replayed through the replica model")
    assert [line.split()[0] for line in lines[3:7]] == ["within", "TTFT", "TTFT", "served"]
    rows = [line.split("  ")[0] for line in lines if line.endswith(tuple("0123456789")) and "%  " in line]
    assert rows == ["this scaler *", "keda baseline *", "clairvoyant *", "static at peak *"]
    assert any(
        line.startswith("measured (what ran): ") and "within 2s (TTFT histogram)" in line for line in lines
    )
    assert f"keda baseline: {tmp_path / 'plain.yaml'} (as written)" in lines
    assert f'Prometheus history (engine vllm, labelSelector model_name="{MODEL}")' in out
    assert "scaler replay: converted" in err
    assert "threshold 5 became targetQueuePerReplica" in err
    assert "scaler replay: limit: requests a router, gateway or client dropped" in err
    # No --kubeconfig: the pods kube-state-metrics recorded in the history give the cold start.
    assert f"  cold start {STARTUP_S:g}s: measured from the history, the median of" in "\n".join(lines)
    assert f"scaler replay: limit: every replayed pod starts in {STARTUP_S:g}s" in err
    assert summary["cold_start"]["source"] == "history"
    assert summary["baseline"].endswith("(as written)")
    assert summary["prometheus"]["windows"] == 180
    assert summary["start"] == (BURST[0] - timedelta(hours=3)).isoformat()
    labels = {"prefill": "prefill_tokens_per_s", "batch slots": "decode_slots"}
    labels |= {"decode": "decode_tokens_per_s_per_seq", "physics": "physics"}
    assert all(summary["replica"][labels[name]]["source"] == "default" for name in own["defaults"])
    assert own["measured"]["within_objective"] == summary["prometheus"]["within_objective"]
    assert own["measured"]["served"] == summary["prometheus"]["served"]


def test_the_replay_checks_the_replica_against_the_fleet_as_it_ran(
    history: tuple[LocalPrometheus, Truth], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36's acceptance, item 1: the generator's own replica (--cluster) replays the fleet as it
    ran near what the history measured; one that decodes a third as fast is flagged before any
    what-if, far off. (The generator writes its TTFT histogram from two fixed shapes, waiting or not,
    not from a replica's physics: its own replica comes within a few points, not within one. The
    week served by a replica in each physics, within one: tests/test_replay_ownfleet_week.py.)"""
    prom, _ = history
    off = {}
    for name, model in (
        ("true", f"prefill_tokens_per_s: {PREFILL_TOKENS_S:g}\ndecode_slots: {SLOTS}\n"
         f"decode_tokens_per_s_per_seq: {DECODE_TOKENS_S:g}\nphysics: separate\n"),
        ("wrong", f"prefill_tokens_per_s: {PREFILL_TOKENS_S:g}\ndecode_slots: {SLOTS}\n"
         f"decode_tokens_per_s_per_seq: {DECODE_TOKENS_S / 3:g}\nphysics: separate\n"),
    ):  # fmt: skip
        (tmp_path / f"{name}.yaml").write_text(model)
        out_dir = tmp_path / name
        code = _replay(prom, tmp_path, *_around_burst(prom), "--cluster", str(tmp_path / f"{name}.yaml"),
                       "--out", str(out_dir))  # fmt: skip
        out, err = capsys.readouterr()
        assert code == 0, err
        own = json.loads((out_dir / "summary.json").read_text())["own_fleet"]
        assert own["defaults"] == [], name  # every figure that sets the latency is written
        off[name] = own["off_by_points"]
        if name == "wrong":
            first = out.splitlines()[0]
            assert first.startswith("WARNING: the replica model does not reproduce your fleet"), first
            assert "every figure of the replica is measured or written" in first
    assert abs(off["true"]) < 3
    assert off["wrong"] < -50


CRON = """\
    - type: cron
      metadata:
        timezone: UTC
        start: 0 13 * * 1-5
        end: 0 17 * * 1-5
        desiredReplicas: "6"
"""


# A week is 40,320 decisions of this scaler whatever the rates: about 45 s alone on 2 cores, several
# times that beside the suite's other workers. The bound is for a stuck replay, not a slow one.
@pytest.mark.timeout(900)
def test_the_week_s_replica_is_measured_and_the_user_s_windows_split_out(
    history: tuple[LocalPrometheus, Truth], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 31's acceptance: replayed from the week (no --cluster), the replica is measured from the
    history within 15% of the generator's (prefill, slots, decode) and the cold start from the pods
    kube-state-metrics recorded; the GPU-hours the cron window held are split out for both policies,
    with the ratio without them. (Rates scaled to a tenth: the replica comes from the history, not
    from the trace replayed, and a full week's replay takes minutes.)"""
    prom, _ = history
    so = tmp_path / "cron.yaml"
    so.write_text(PLAIN + CRON)
    code = main(
        [
            "replay",
            *("--prometheus", prom.url, "--scaledobject", str(so), "--since", "7d"),
            *("--until", END.isoformat(), "--step", "2m", "--rate-scale", "0.1"),
            *("--no-plot", "--out", str(tmp_path / "out")),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    figures = summary["replica"]
    for name, truth in (
        ("prefill_tokens_per_s", PREFILL_TOKENS_S),
        ("decode_slots", SLOTS),
        ("decode_tokens_per_s_per_seq", DECODE_TOKENS_S),
    ):
        assert figures[name]["source"] == "measured", name
        assert figures[name]["value"] == pytest.approx(truth, rel=0.15), name
        assert figures[name]["samples"] > 1000, name
    assert summary["cluster"]["prefill_tokens_per_s"] == figures["prefill_tokens_per_s"]["value"]
    assert summary["cold_start"]["seconds"] == STARTUP_S
    lines = out.splitlines()
    block = lines[
        lines.index("replica: what one replayed pod is, each figure from where (docs/replay-report.md)") :
    ]
    assert block[1].startswith(
        f"  prefill:          {figures['prefill_tokens_per_s']['value']:,.0f} prompt tokens/s, measured"
    )
    assert block[2].startswith(f"  batch slots:      {SLOTS} sequences at once, measured from the history")
    rows = {p["policy"]: p for p in summary["policies"]}
    cv = rows["clairvoyant"]
    for name in ("this scaler", "keda baseline"):
        row = rows[name]
        assert row["prewarm_gpu_hours"] > 0, name
        assert row["floor_above_gpu_hours"] == 0, name  # minReplicaCount 2, the clairvoyant's too
        without = (row["gpu_hours"] - row["prewarm_gpu_hours"]) / cv["gpu_hours"]
        assert row["vs_clairvoyant_without_own"] == pytest.approx(without), name
        assert without < row["vs_clairvoyant"], name
        said = next(line for line in lines if line.startswith(f"  {name} "))
        assert f"{row['prewarm_gpu_hours']:,.2f} held for pre-warm windows" in said
        assert f"without them {row['vs_clairvoyant_without_own']:.2f}x" in said
    assert rows["static at peak"]["vs_static"] == pytest.approx(1.0)
    assert any(line.startswith("static at peak: ") for line in lines)


def test_export_round_trips_through_trace(
    history: tuple[LocalPrometheus, Truth], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--export writes the trace read; replayed with --trace and --start, it gives the same figures."""
    prom, _ = history
    exported = tmp_path / "week.csv"
    common = ("--seed", "3", "--rate-scale", "1.5")
    assert (
        _replay(
            prom,
            tmp_path,
            *_around_burst(prom),
            "--export",
            str(exported),
            "--out",
            str(tmp_path / "a"),
            *common,
        )
        == 0
    )
    out, _ = capsys.readouterr()
    start = (BURST[0] - timedelta(hours=3)).isoformat()
    model = exported.with_suffix(".cluster.yaml")
    assert (
        f"wrote {exported}: 180 windows of 120s, and {model}; replay it with --trace {exported} --start"
        f" {start} --cluster {model}"
    ) in out
    assert (
        exported.read_text().splitlines()[0]
        == "window_start_s,req_per_s,prompt_tokens_per_req,output_tokens_per_req"
    )
    assert (
        _replay(
            prom,
            tmp_path,
            *("--trace", str(exported), "--start", start, "--cluster", str(model)),
            *("--out", str(tmp_path / "b"), *common),
        )
        == 0
    )

    def figures(folder: str) -> list[dict[str, Any]]:
        policies = json.loads((tmp_path / folder / "summary.json").read_text())["policies"]
        return [{k: v for k, v in p.items() if k != "wall_seconds"} for p in policies]

    assert figures("a") == figures("b")
    assert figures("a")[0]["requests"] > 0


def test_convert_replays_on_prometheus_history(
    history: tuple[LocalPrometheus, Truth], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """scaler convert --replay --prometheus replays the old and the new object on the history read."""
    prom, _ = history
    old = tmp_path / "plain.yaml"
    old.write_text(PLAIN)
    new = tmp_path / "new.yaml"
    code = main(
        [
            "convert",
            str(old),
            "--out",
            str(new),
            "--replay",
            *_around_burst(prom),
            "--keda-version",
            "2.20",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "new (this scaler)" in out
    assert "old (as written)" in out
    assert "measured (what ran): " in out
    # KEDA's calls of the new object under the version asked (the six hours hold no outage): an HPA
    # sync every 15 s over the six hours and the warm-up, and KEDA 2.20's scale loop every 30 s (the
    # KEDA's default pollingInterval: the plain object sets none).
    (keda,) = [line for line in out.splitlines() if line.startswith("KEDA ")]
    found = re.fullmatch(
        r"KEDA 2\.20: new \(this scaler\): ([\d,]+) GetMetrics calls from HPA syncs, ([\d,]+) from the"
        r" scale loop, 0 failed; fallback active 0 min \(failureThreshold 4\)",
        keda,
    )
    assert found, keda
    syncs, polls = (int(g.replace(",", "")) for g in found.groups())
    assert 6 * 240 <= syncs <= 6 * 240 * 1.05
    assert abs(polls - syncs / 2) <= 2
    # The replica model checked against the fleet as it ran first (physics the default here), every
    # row marked as the model's.
    lines = out.splitlines()
    warning = next(i for i, line in enumerate(lines) if line.startswith("WARNING: the replica model"))
    assert lines[warning + 1].startswith("own fleet: the replicas the history holds replayed")
    assert warning < next(i for i, line in enumerate(lines) if line.startswith("replay of "))
    assert any(line.startswith("new (this scaler) *") for line in lines)
    assert any(line.startswith("old (as written) *") for line in lines)
    assert "scaler convert: limit: requests a router, gateway or client dropped" in err


@pytest.mark.parametrize(
    ("selector_or_url", "says"),
    [
        ("nope", 'no request rate in the history for engine vllm, labelSelector model_name="nope"'),
        ("unreachable", ": connection failed: connection refused (nothing listens at that host and port)"),
        ("/graph", "/graph: HTTP 404 Not Found: no Prometheus API at this URL"),
    ],
)
def test_what_cannot_be_read_is_one_line(
    history: tuple[LocalPrometheus, Truth],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    selector_or_url: str,
    says: str,
) -> None:
    """A selector matching nothing, a Prometheus that does not answer, a URL with no Prometheus API:
    exit 2, one line naming the URL, none of urllib3's text, no traceback."""
    prom, _ = history
    url = {"nope": prom.url, "/graph": prom.url + "/graph"}.get(
        selector_or_url, f"http://127.0.0.1:{free_port()}"
    )
    so = tmp_path / "so.yaml"
    so.write_text(
        PLAIN.replace(f'model_name="{MODEL}"', 'model_name="nope"') if selector_or_url == "nope" else PLAIN
    )
    code = main(
        [
            "replay",
            "--prometheus",
            url,
            "--scaledobject",
            str(so),
            "--since",
            "1h",
            "--until",
            END.isoformat(),
            "--step",
            "2m",
            "--no-plot",
            "--out",
            str(tmp_path),
        ]
    )
    _, err = capsys.readouterr()
    assert code == 2
    errors = [line for line in err.splitlines() if line.startswith("scaler replay: error: ")]
    assert len(errors) == 1
    assert says in errors[0]
    assert f"prometheus {url}" in errors[0] or selector_or_url == "nope"
    assert "Traceback" not in err
    for leak in ("HTTPConnectionPool", "Max retries", "%28", "HTTP Status Code", "b''"):
        assert leak not in err


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (("--trace", "x.csv", "--since", "2d"), "--since: only with --prometheus"),
        (("--trace", "x.csv", "--export", "y.csv"), "--export writes the trace read with --prometheus"),
        (("--sizes-from", "x.csv"), "--sizes-from is for --trace"),
        (("--hours", "0:2"), "--hours is for --trace"),
        (("--start", "2026-12-07T00:00:00Z"), "--start is for --trace"),
    ],
)
def test_trace_options_are_refused_with_prometheus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: tuple[str, str], says: str
) -> None:
    """Options of one source given with the other are refused, by name, before anything is read."""
    so = tmp_path / "so.yaml"
    so.write_text(PLAIN)
    (tmp_path / "x.csv").write_text("timestamp_s,prompt_tokens,output_tokens\n0,10,20\n")
    given = [str(tmp_path / a) if a == "x.csv" else a for a in extra]  # a file that is there
    source = () if "--trace" in extra else ("--prometheus", "http://127.0.0.1:9")
    code = main(["replay", *source, "--scaledobject", str(so), *given])
    assert code == 2
    assert says in capsys.readouterr().err


# Run 3 against a real control plane (tests/data/real-cluster/run3-gpu-gate-off.csv, copied
# from the shared folder, sampled every 5 s; the file has times of day, the day is ours).
RUN3 = Path(__file__).resolve().parent / "data" / "real-cluster" / "run3-gpu-gate-off.csv"
RUN3_DAY = "2026-11-25"
EPOCH_0836 = datetime.fromisoformat(f"{RUN3_DAY}T08:10:36+00:00").timestamp()


def _pods_of_run3() -> list[tuple[str, str, str | None, str | None]]:
    """(name, created, scheduled, Ready) of each pod the Deployment created during run 3, as its
    timeline shows them: pods are created when ``deploy_spec`` rises, scheduled at once unless
    ``pods_pending`` rose with them, and Ready, oldest first, when ``pods_ready`` rises. The pod
    Ready before the recording began is left out: its times were not recorded.

    *Result*: one pod created 08:10:36 and Ready 08:10:56; six created 08:11:06, four of them
    Ready 08:11:26 and two Pending to the end (no GPU left).
    """
    rows = list(csv.DictReader(RUN3.read_text().splitlines()))
    pods: list[list[str | None]] = []  # name, created, scheduled, ready
    for before, row in itertools.pairwise(rows):
        at = f"{RUN3_DAY}T{row['time']}Z"
        created = int(row["deploy_spec"]) - int(before["deploy_spec"])
        pending = int(row["pods_pending"]) - int(before["pods_pending"])
        for i in range(max(0, created)):
            pods.append([f"vllm-llama-{len(pods) + 1}", at, at if i < created - pending else None, None])
        waiting = [p for p in pods if p[2] is not None and p[3] is None]
        for pod in waiting[: max(0, int(row["pods_ready"]) - int(before["pods_ready"]))]:
            pod[3] = at
    return [(str(name), str(created), scheduled, ready) for name, created, scheduled, ready in pods]


def _cluster_of_run3() -> list[dict[str, Any]]:
    """The Deployment, its pods from run 3, and another Deployment's slow pod the selector leaves out."""
    from tests import k8s_double as k8s

    labels = {"app": "vllm-llama"}
    objects = [k8s.deployment("vllm-llama", "inference", replicas=8, match_labels=labels)]
    for name, created, scheduled, ready in _pods_of_run3():
        objects.append(
            k8s.pod(
                name,
                "inference",
                labels=labels,
                node="gpu-a" if scheduled else None,
                ready=ready is not None,
                created=created,
                scheduled_at=scheduled,
                ready_at=ready,
            )
        )
    objects.append(
        k8s.pod(
            "other-0",
            "inference",
            labels={"app": "other"},
            node="gpu-b",
            ready=True,
            created=f"{RUN3_DAY}T08:00:00Z",
            scheduled_at=f"{RUN3_DAY}T08:00:00Z",
            ready_at=f"{RUN3_DAY}T08:10:00Z",
        )
    )
    return objects


def test_the_cold_start_is_measured_from_the_deployment_s_pods(
    history: tuple[LocalPrometheus, Truth], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --kubeconfig the pods of the ScaledObject's Deployment give the cold start, read through
    the real client: run 3's five Ready pods took 20 s each; Pending pods and others' pods do not count."""
    from tests import k8s_double as k8s

    prom, _ = history
    with k8s.KubeDouble(token="t") as double:
        for obj in _cluster_of_run3():
            double.apply(obj)
        config = k8s.kubeconfig(tmp_path / "kubeconfig", double.url, "t")
        code = _replay(
            prom,
            tmp_path,
            *_around_burst(prom),
            *("--kubeconfig", str(config), "--out", str(tmp_path / "a")),
        )
    out, err = capsys.readouterr()
    assert code == 0, err
    # The trace's line, after the own-fleet check's (scaler.replay.ownfleet).
    assert next(line for line in out.splitlines() if line.startswith("Prometheus history")).endswith(
        "cold start 20s"
    )
    assert (
        "  cold start 20s: measured, the median of 5 pod(s) of Deployment inference/vllm-llama from scheduled"
        " to Ready (p90 20s, 20-20s)"
    ) in out.splitlines()
    assert "scaler replay: limit: every replayed pod starts in 20s, the median of the pods" in err
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["cluster"]["cold_start_s"] == 20
    assert summary["cold_start"] == {
        "seconds": 20.0,
        "source": "measured",
        "deployment": "inference/vllm-llama",
        "pods_measured": 5,
        "median_s": 20.0,
        "p90_s": 20.0,
        "range_s": [20.0, 20.0],
    }


def test_a_missing_deployment_is_named_and_a_missing_kubeconfig_stops_the_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reader returns the Deployment's pods and names a Deployment that is not there (the replay
    then runs on the default and says why); a kubeconfig that is not there is one error line, exit 2."""
    from scaler.sources.kubernetes import KubernetesReadError, read_pod_times
    from tests import k8s_double as k8s

    with k8s.KubeDouble(token="t") as double:
        for obj in _cluster_of_run3():
            double.apply(obj)
        config = k8s.kubeconfig(tmp_path / "kubeconfig", double.url, "t")
        where, pods = read_pod_times(str(config), "inference", "vllm-llama")
        assert where == "inference/vllm-llama"
        assert sorted(p.name for p in pods) == [f"vllm-llama-{i}" for i in range(1, 8)]
        assert [
            (p.name, p.created_at, p.ready_at) for p in pods if p.name in ("vllm-llama-1", "vllm-llama-7")
        ] == [
            ("vllm-llama-1", EPOCH_0836, EPOCH_0836 + 20),  # the docstring's result, read back
            ("vllm-llama-7", EPOCH_0836 + 30, None),
        ]
        with pytest.raises(
            KubernetesReadError, match=r'^Deployment inference/gone: HTTP 404 Not Found: .*"gone"'
        ):
            read_pod_times(str(config), "inference", "gone")
    so = tmp_path / "plain.yaml"
    so.write_text(PLAIN)
    missing = tmp_path / "missing"
    code = main(
        [
            "replay",
            "--prometheus",
            "http://127.0.0.1:9",
            "--scaledobject",
            str(so),
            "--kubeconfig",
            str(missing),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"scaler replay: error: --kubeconfig {missing}: no such file"
    assert "Traceback" not in err


@pytest.mark.parametrize(("version", "polls"), [("2.21", False), ("2.20", True)])
def test_the_outage_fails_this_scalers_calls_and_keda_serves_its_fallback(
    history: tuple[LocalPrometheus, Truth],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    version: str,
    polls: bool,
) -> None:
    """Over the week's 20-minute outage the converted object's inputs go stale past
    maxStalenessSeconds (300 s), so this scaler's GetMetrics fails at each HPA sync (and, up to
    KEDA 2.20, at each poll of the scale loop), and KEDA serves its fallback (failureThreshold 4)
    for most of the rest of the outage: the report says how many calls failed and for how long."""
    prom, _ = history
    until = (OUTAGE[0] + timedelta(hours=1)).isoformat()
    args = ("--prometheus", prom.url, "--since", "2h", "--until", until, "--step", "2m")
    out_dir = tmp_path / "o"
    assert _replay(prom, tmp_path, *args, "--keda-version", version, "--out", str(out_dir)) == 0
    out, _ = capsys.readouterr()
    keda = json.loads((out_dir / "summary.json").read_text())["keda"]
    assert keda["version"] == version
    calls = keda["calls"]["this scaler"]
    outage_s, stale_s, sync_s = OUTAGE[1].total_seconds(), 300.0, 15.0
    hpa_failed = (outage_s - stale_s) / sync_s  # the HPA's syncs inside the outage once inputs are stale
    if polls:  # up to 2.20 the scale loop polls all along, and its failed polls count too
        assert calls["loop_calls"] > calls["hpa_calls"] / 3
        assert calls["failed_calls"] > hpa_failed + 0.5 * hpa_failed * sync_s / 30.0
    else:  # 2.21: only while ScalingActive is False, between the first failure and the fallback
        assert 0 < calls["loop_calls"] <= 4
        assert hpa_failed <= calls["failed_calls"] <= hpa_failed + 1 + calls["loop_calls"]
    # Served from the fifth failed call to the outage's end: at most its stale part, at least that
    # less the four calls the threshold lets fail first and a sync either side.
    served = calls["fallback_active_s"]
    assert outage_s - stale_s - 6 * sync_s <= served <= outage_s - stale_s
    line = next(line for line in out.splitlines() if line.startswith(f"KEDA {version}: this scaler: "))
    assert f"fallback active {served / 60:,.0f} min (failureThreshold 4)" in line
