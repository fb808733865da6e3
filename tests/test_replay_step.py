"""``scaler replay --prometheus``'s ``--step`` against the scrape interval, on a real Prometheus.

Every rate is taken over one step and needs two samples of a series inside it. Two fleets of 20
vLLM pods serve a known 10 requests/s each, their pods scraped at staggered offsets as a real
Prometheus spreads its targets: ``fast`` every 30 s, ``slow`` every 60 s (two hours, loaded with
``promtool tsdb create-blocks-from openmetrics``). A step of one scrape interval sees two samples
of one pod in twenty and read a twentieth of the traffic, exit 0: it is refused now, by name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scaler.cli import main
from scaler.sim.prometheus import LocalPrometheus
from tests.conftest import require_prometheus

pytestmark = pytest.mark.prometheus

START = datetime(2026, 11, 23, 6, 0, tzinfo=UTC)
HOURS = 2
PODS, PER_POD_S = 20, 0.5  # 10 requests/s in all
PROMPT, OUTPUT = 1000.0, 200.0
SCRAPES = {"fast": 30, "slow": 60}
END = START + timedelta(hours=HOURS)


def staggered(model: str, scrape_s: int) -> dict[str, list[str]]:
    """``model``'s series, each pod scraped every ``scrape_s`` at an offset of its own, per family."""
    out: dict[str, list[str]] = {"counter": [], "gauge": [], "histogram": []}
    first = START.timestamp() - 600  # ten minutes before, so that the first window has a rate
    for pod in range(PODS):
        labels = f'model_name="{model}",pod="{model}-{pod}"'
        t = first + (pod * 1.5) % scrape_s
        while t < END.timestamp() + scrape_s:
            served = (t - first) * PER_POD_S
            out["counter"].append(f"vllm:prompt_tokens_total{{{labels}}} {served * PROMPT:.3f} {t:.3f}")
            out["counter"].append(f"vllm:generation_tokens_total{{{labels}}} {served * OUTPUT:.3f} {t:.3f}")
            out["gauge"].append(f"vllm:num_requests_waiting{{{labels}}} 0 {t:.3f}")
            for le in ("0.5", "+Inf"):
                out["histogram"].append(
                    f'vllm:time_to_first_token_seconds_bucket{{{labels},le="{le}"}} {served:.3f} {t:.3f}'
                )
            out["histogram"].append(
                f"vllm:time_to_first_token_seconds_count{{{labels}}} {served:.3f} {t:.3f}"
            )
            out["histogram"].append(
                f"vllm:time_to_first_token_seconds_sum{{{labels}}} {served * 0.3:.3f} {t:.3f}"
            )
            t += scrape_s
    return out


def openmetrics() -> str:
    """Both fleets as OpenMetrics: each family's series grouped, each series' samples in time order."""
    families = {
        "vllm:prompt_tokens": "counter",
        "vllm:generation_tokens": "counter",
        "vllm:num_requests_waiting": "gauge",
        "vllm:time_to_first_token_seconds": "histogram",
    }
    lines: list[str] = []
    written = [staggered(model, scrape_s) for model, scrape_s in SCRAPES.items()]
    for family, kind in families.items():
        lines.append(f"# TYPE {family} {kind}")
        rows = [row for fleet in written for row in fleet[kind] if row.startswith(family)]
        rows.sort(key=lambda row: (row.rsplit(" ", 2)[0], float(row.rsplit(" ", 1)[1])))
        lines.extend(rows)
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def prometheus() -> Iterator[LocalPrometheus]:
    """A local Prometheus holding both fleets' two hours."""
    require_prometheus()
    prom = LocalPrometheus(retention="100y")
    try:
        prom.import_openmetrics(openmetrics())
        prom.start()
        yield prom
    finally:
        prom.close()


def scaledobject(tmp_path: Path, model: str) -> Path:
    """This scaler's ScaledObject on ``model``'s pods."""
    path = tmp_path / f"{model}.yaml"
    path.write_text(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: llama, namespace: inference}\n"
        "spec:\n  scaleTargetRef: {name: vllm}\n  minReplicaCount: 2\n  maxReplicaCount: 30\n"
        "  triggers:\n    - type: external\n      metadata:\n        scalerAddress: x:9090\n"
        f"        engine: vllm\n        labelSelector: 'model_name=\"{model}\"'\n"
        '        minReplicas: "2"\n        maxReplicas: "30"\n'
    )
    return path


def replay(prom: LocalPrometheus, tmp_path: Path, model: str, *step: str) -> int:
    """``scaler replay --prometheus`` over the last hour of ``model``'s fleet; its exit status."""
    return main(
        [
            "replay",
            *("--prometheus", prom.url, "--scaledobject", str(scaledobject(tmp_path, model))),
            *("--since", "1h", "--until", END.isoformat(), *step),
            *("--no-plot", "--out", str(tmp_path / "out")),
        ]
    )


def arrivals(tmp_path: Path) -> float:
    """The requests the replay read from the history (summary.json)."""
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    return float(summary["prometheus"]["arrivals"])


@pytest.mark.parametrize(("model", "step", "need"), [("fast", "30s", "1m"), ("slow", "1m", "2m")])
def test_a_step_of_one_scrape_is_refused_naming_the_flag(
    prometheus: LocalPrometheus,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    model: str,
    step: str,
    need: str,
) -> None:
    """A --step shorter than two scrapes is one error line naming --step, the interval and the step to use."""
    code = replay(prometheus, tmp_path, model, "--step", step)
    err = capsys.readouterr().err
    assert code == 2
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1
    assert errors[0].startswith(f"scaler replay: error: --step '{step}': at least two scrape intervals")
    assert f"scraped every {step}" in errors[0]
    assert f"use --step {need} or longer" in errors[0]
    assert "Traceback" not in err


def test_a_step_of_two_scrapes_reads_every_request(prometheus: LocalPrometheus, tmp_path: Path) -> None:
    """--step 1m on series scraped every 30 s reads the hour's 36,000 requests, within 1%."""
    assert replay(prometheus, tmp_path, "fast", "--step", "1m") == 0
    assert arrivals(tmp_path) == pytest.approx(PODS * PER_POD_S * 3600, rel=0.01)


def test_the_default_step_is_lengthened_to_two_scrapes_and_said(
    prometheus: LocalPrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --step, on series scraped every minute, the step is 2m, said, and every request read."""
    assert replay(prometheus, tmp_path, "slow") == 0
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("scaler replay: --step")]
    assert len(said) == 1
    assert said[0].startswith("scaler replay: --step 2m: the history's series are scraped every 1m")
    assert arrivals(tmp_path) == pytest.approx(PODS * PER_POD_S * 3600, rel=0.01)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["prometheus"]["step_s"] == 120
