"""docs/engines.md's "Adding an engine", walked: its example preset, registered as it says, reaches the
metadata, scaler convert, scaler doctor and the simulated exporter (read back by a real
Prometheus), and is gone from all four once unregistered."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.cli import main
from scaler.config import MetadataError, parse_metadata
from scaler.presets import PRESETS, Preset, unregister
from scaler.sim.fleet import PodLoad, SimulatedFleet
from scaler.sim.prometheus import LocalPrometheus
from scaler.sources.prometheus import PrometheusReader, TargetQuery
from tests import k8s_double as k8s
from tests.conftest import require_prometheus
from tests.helpers import eventually

pytestmark = pytest.mark.prometheus  # a real Prometheus scrapes the new engine's simulated fleet

GUIDE = (Path(__file__).resolve().parents[1] / "docs" / "engines.md").read_text()
NS = "inference"


def guide_example() -> str:
    """The Python block of docs/engines.md's "Adding an engine" section."""
    section = GUIDE.split("\n## Adding an engine\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "the section has no Python example"
    return found[1]


def register_the_example() -> Preset:
    """Run the guide's example as written; the preset it registered."""
    before = set(PRESETS)
    exec(guide_example(), {})  # the guide's own example, run as a user would
    (name,) = set(PRESETS) - before
    return PRESETS[name]


def convert(tmp_path: Path, query: str, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, str], str]:
    """``scaler convert`` on a KEDA ScaledObject whose one trigger reads ``query``: the external
    trigger's metadata, and the report."""
    source = tmp_path / "so.yaml"
    trigger = {"serverAddress": "http://prometheus:9090", "query": query, "threshold": "4"}
    so = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "llm", "namespace": NS},
        "spec": {
            "scaleTargetRef": {"name": "server"},
            "minReplicaCount": 1,
            "maxReplicaCount": 8,
            "triggers": [{"type": "prometheus", "metadata": trigger}],
        },
    }
    source.write_text(yaml.safe_dump(so))
    assert main(["convert", str(source)]) == 0
    out, report = capsys.readouterr()
    doc = yaml.safe_load(out)
    return doc["spec"]["triggers"][0]["metadata"], report


def doctor(tmp_path: Path, image: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """``scaler doctor`` on a cluster of one GPU-less Deployment running ``image``: its findings."""
    deployment = k8s.deployment("server", NS, gpus=0)
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = image
    with k8s.KubeDouble(token="t") as double:
        double.apply(deployment)
        config = k8s.kubeconfig(tmp_path / "kubeconfig", double.url, "t")
        main(["doctor", "--kubeconfig", str(config), "--output", "json"])
    findings: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return findings


def test_the_guide_s_engine_reaches_config_convert_doctor_and_the_simulator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Step 2 of the guide, each claim checked; then, unregistered, none of it holds."""
    require_prometheus()
    preset = register_the_example()
    name = preset.name
    queue = preset.families[0].selectors()[0].metric
    image = f"registry.example/{name}:1.4"
    try:
        # the metadata accepts it
        assert parse_metadata({"engine": name, "labelSelector": 'model="m"'}).engine == name
        # scaler convert turns a KEDA trigger on its queue into it, and says so
        metadata, report = convert(tmp_path, f'sum({queue}{{model="m"}})', capsys)
        assert (metadata["engine"], metadata["labelSelector"]) == (name, 'model="m"')
        assert f'became engine: {name}, labelSelector: model="m"' in report
        # scaler doctor counts a Deployment running its image as an inference workload
        checks = {(f["check"], f["object"]) for f in doctor(tmp_path, image, capsys)}
        assert ("no-prestop", f"Deployment {NS}/server") in checks
        # the simulated fleet serves its families, and the scaler reads them through Prometheus
        fleet = SimulatedFleet(namespace=NS, model="m", engine=name)
        fleet.set_pods(["server-0", "server-1"])
        fleet.set_fleet_load(PodLoad(waiting=14, running=6, prompt_tokens_per_s=900, requests_per_s=3))
        fleet.start()
        prometheus = LocalPrometheus(scrape_interval_s=0.5)
        try:
            prometheus.start([fleet.address])
            reader = PrometheusReader(prometheus.url, rate_window="5s")
            policy = parse_metadata({"engine": name, "labelSelector": 'model="m"'})
            target = TargetQuery("t", policy, prometheus.url)

            def read() -> dict[str, float] | None:
                values = reader.read([target])["t"].values
                rate = values.get("prompt_tokens_per_s", 0.0)
                return values if values.get("queue_waiting") == 14 and abs(rate - 900) < 135 else None

            values = eventually(read, timeout=25, every=0.25)
        finally:
            prometheus.close()
            fleet.stop()
        assert values is not None
        assert values["requests_running"] == 6
        assert values["replicas_reporting"] == 2
    finally:
        unregister(preset)
    # unregistered: gone from the metadata, convert, doctor and the simulator
    with pytest.raises(MetadataError, match="engine"):
        parse_metadata({"engine": name})
    metadata, _ = convert(tmp_path, f'sum({queue}{{model="m"}})', capsys)
    assert metadata["engine"] == "custom"
    assert doctor(tmp_path, image, capsys) == []
    with pytest.raises(ValueError, match=f"not '{name}'"):
        SimulatedFleet(engine=name)
