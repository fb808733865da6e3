"""The committed generated code matches the proto, and the proto matches KEDA's wire contract."""

from __future__ import annotations

from pathlib import Path

from scaler.proto import externalscaler_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent


def test_generated_code_is_reproducible(tmp_path: Path) -> None:
    """Regenerating from protos/externalscaler.proto reproduces the committed code exactly."""
    import importlib.util

    import grpc_tools  # noqa: F401 - the dev extra brings it; its absence is a failure, not a skip

    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "scripts" / "gen_proto.py")
    assert spec
    assert spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for fresh in gen.generate(tmp_path):
        committed = ROOT / "scaler" / "proto" / fresh.name
        assert committed.read_text() == fresh.read_text(), (
            f"{committed} differs from what protos/externalscaler.proto generates;"
            " run python scripts/gen_proto.py"
        )


EXPECTED_FIELDS = {
    "ScaledObjectRef": {"name": (1, "string"), "namespace": (2, "string"), "scalerMetadata": (3, "map")},
    "IsActiveResponse": {"result": (1, "bool")},
    "GetMetricSpecResponse": {"metricSpecs": (1, "repeated")},
    "MetricSpec": {"metricName": (1, "string"), "targetSize": (2, "int64"), "targetSizeFloat": (3, "double")},
    "GetMetricsRequest": {"scaledObjectRef": (1, "message"), "metricName": (2, "string")},
    "GetMetricsResponse": {"metricValues": (1, "repeated")},
    "MetricValue": {
        "metricName": (1, "string"),
        "metricValue": (2, "int64"),
        "metricValueFloat": (3, "double"),
    },
}

_TYPES = {9: "string", 8: "bool", 3: "int64", 1: "double", 11: "message"}


def _kind(field: object) -> str:
    if getattr(field, "message_type", None) is not None and field.message_type.GetOptions().map_entry:  # type: ignore[attr-defined]
        return "map"
    if field.is_repeated:  # type: ignore[attr-defined]
        return "repeated"
    return _TYPES[field.type]  # type: ignore[attr-defined]


def test_messages_match_kedas_contract() -> None:
    """Every message has KEDA's field names, numbers and kinds."""
    assert pb.DESCRIPTOR.package == "externalscaler"
    for message, fields in EXPECTED_FIELDS.items():
        descriptor = pb.DESCRIPTOR.message_types_by_name[message]
        actual = {f.name: (f.number, _kind(f)) for f in descriptor.fields}
        assert actual == fields, message


def test_service_matches_kedas_contract() -> None:
    """The ExternalScaler service has KEDA's methods with their request, response and streaming."""
    service = pb.DESCRIPTOR.services_by_name["ExternalScaler"]
    methods = {m.name: (m.input_type.name, m.output_type.name, m.server_streaming) for m in service.methods}
    assert methods == {
        "IsActive": ("ScaledObjectRef", "IsActiveResponse", False),
        "StreamIsActive": ("ScaledObjectRef", "IsActiveResponse", True),
        "GetMetricSpec": ("ScaledObjectRef", "GetMetricSpecResponse", False),
        "GetMetrics": ("GetMetricsRequest", "GetMetricsResponse", False),
        "StreamMetricSpec": ("ScaledObjectRef", "GetMetricSpecResponse", True),
    }
