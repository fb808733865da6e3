"""One input table (``scaler.inputs.Input``): the Observation's fields follow it, and every layer reads it."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from scaler.config import CUSTOM_QUERY_KEYS, TargetPolicy
from scaler.inputs import Input, InputSource, InputSpec, Reading
from scaler.model import INPUTS, Observation
from scaler.outputs.series import INPUT_SERIES, REPLICA_STATE_SERIES, SERIES_BY_NAME
from scaler.presets import PRESETS, ROUTERS, Combine, Family
from scaler.sources.files import OBSERVATION_FIELDS
from scaler.sources.live import PROMETHEUS_FIELDS
from scaler.sources.prometheus import CUSTOM_FIELDS
from tests.helpers import script

ROOT = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 12, 1, tzinfo=UTC)
NOT_INPUTS = {
    "now",
    "missing",
    "hpa",
    "hpa_read",
    "scaledobject_fallback",
    "kueue_quota_reason",
    "inert",
}  # the time, notes, landing state, a clamp's words, inert reasons


def test_every_observation_value_is_a_row_of_the_table() -> None:
    """The table and the dataclass cannot drift: each value field but the landing state has a row."""
    names = {f.name for f in dataclasses.fields(Observation)}
    assert set(INPUTS) == names - NOT_INPUTS
    assert set(INPUTS) <= OBSERVATION_FIELDS  # an observation file may give each of them


def test_exported_series_are_the_table_rows_with_a_series() -> None:
    """/metrics exports one llm_scaler_input_* gauge per row that names one, with the row's help."""
    exported = {**INPUT_SERIES, **REPLICA_STATE_SERIES}
    assert set(exported) == {name for name, spec in INPUTS.items() if spec.series}
    for name, (series, help_) in exported.items():
        assert series.startswith("llm_scaler_input_")
        assert SERIES_BY_NAME[series].help == help_ == INPUTS[name].help
    assert set(REPLICA_STATE_SERIES) == {"pending_replicas", "starting_replicas"}
    assert len({series for series, _ in exported.values()}) == len(exported)


def test_custom_queries_and_prometheus_inputs_come_from_the_table() -> None:
    """engine: custom's query keys are TargetPolicy fields named by the rows; Prometheus rows go together."""
    assert set(CUSTOM_FIELDS.values()) <= set(TargetPolicy.model_fields)
    assert CUSTOM_FIELDS["queue_waiting"] == "queue_query"
    assert all(INPUTS[name].source is InputSource.PROMETHEUS for name in CUSTOM_FIELDS)
    assert set(PROMETHEUS_FIELDS) == {n for n, s in INPUTS.items() if s.source is InputSource.PROMETHEUS}


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_each_input_refuses_a_negative_value(name: str) -> None:
    """Validation follows the row: counts must be >= 0, rates and shares finite and >= 0."""
    negative: dict[str, Any] = {name: -1}
    with pytest.raises(ValueError, match=f"Observation.{name} must be"):
        Observation(now=NOW, **negative)
    if not INPUTS[name].count:
        nan: dict[str, Any] = {name: float("nan")}
        with pytest.raises(ValueError, match="finite"):
            Observation(now=NOW, **nan)


def _gen_docs() -> Any:
    return script("gen_docs")


def test_the_docs_input_table_is_generated_from_the_table() -> None:
    """docs/metrics.md's input series are the table's rows, so a new input needs no hand-written doc."""
    gen = _gen_docs()
    text = (ROOT / "docs" / "metrics.md").read_text()
    assert gen.render(text) == text, "docs/metrics.md's input table is out of date: run ./dev docs"
    generated = text.split(gen.BEGIN)[1].split(gen.END)[0]
    for spec in INPUTS.values():
        if spec.series:
            assert f"| `{spec.series}` | gauge |" in generated
            assert spec.help in generated


def test_a_new_row_appears_in_the_rendered_docs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rendering follows the table: a row added to it is written into the docs' table."""
    gen = _gen_docs()
    row = InputSpec(
        "llm_scaler_input_prefix_cache_hit_ratio", "Prefix cache hits, 0 to 1.", InputSource.PROMETHEUS
    )
    monkeypatch.setattr(gen, "INPUTS", {**INPUTS, "prefix_cache_hit": row})
    rendered = gen.render((ROOT / "docs" / "metrics.md").read_text())
    assert (
        "| `llm_scaler_input_prefix_cache_hit_ratio` | gauge | namespace, scaledobject | Prefix cache hits"
        in rendered
    )


def _input_names() -> Any:
    return script("input_names")


def test_no_other_list_of_input_names() -> None:
    """No string in scaler/ outside the input table equals an input's name: every layer keys inputs by
    the enum (``scripts/input_names.py`` scans each module's string literals)."""
    scan = _input_names()
    assert scan.input_names() == {str(i) for i in Input}
    assert scan.quoted(scan.input_names()) == []


def test_the_scan_finds_a_quoted_input_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module that spells an input as a string is found, with its line."""
    scan = _input_names()
    (tmp_path / "scaler").mkdir()
    (tmp_path / "scaler" / "stray.py").write_text('WATCHED = ("queue_waiting", "not_an_input")\n')
    monkeypatch.setattr(scan, "ROOT", tmp_path)
    assert scan.quoted({str(i) for i in Input}) == [("scaler/stray.py", 1, "queue_waiting")]


def test_custom_query_keys_are_the_rows_custom_queries() -> None:
    """engine: custom's metadata keys are the aliases of the TargetPolicy fields the rows name, and
    every *_query field of TargetPolicy is named by a row."""
    named = {i.spec.custom_query for i in Input if i.spec.custom_query}
    assert named == {name for name in TargetPolicy.model_fields if name.endswith("_query")}
    assert set(CUSTOM_QUERY_KEYS) == {TargetPolicy.model_fields[name].alias for name in named}
    assert "queueQuery" in CUSTOM_QUERY_KEYS


def test_presets_read_inputs_and_readings_only() -> None:
    """Every preset family reads an input or a reading the Observation builder derives inputs from."""
    for preset in (*PRESETS.values(), *ROUTERS.values()):
        for family in preset.families:
            assert isinstance(family.field, Input | Reading), (preset.name, family.field)
            assert (family.combine is Combine.HISTOGRAM) == (
                family.field in (Reading.TTFT, Reading.ITL, Reading.ROUTER_TTFT)
            )


def test_a_family_written_with_plain_strings_reads_the_members() -> None:
    """A preset written as docs/engines.md's example does (``Family("ttft", ...)``) keys its families by
    the enum all the same, so the Observation builder finds its histogram."""
    assert Family("ttft", "sum by ({by}) (rate(x_bucket[{window}]))", Combine.HISTOGRAM).field is Reading.TTFT
    assert Family("queue_waiting", "sum by ({by}) (x)").field is Input.QUEUE_WAITING
    assert Family("no_such_input", "sum by ({by}) (x)").problems()[0].startswith("field 'no_such_input'")
