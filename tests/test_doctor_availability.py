"""Where ScaledObjects reach the scaler: the Service a scalerAddress names (scaler doctor's
availability checks, scaler/adoption/doctor/availability.py)."""

from __future__ import annotations

import pytest

from scaler.adoption.doctor.availability import service_of
from scaler.manifest import DEFAULT_SCALER_ADDRESS


@pytest.mark.parametrize(
    ("address", "service"),
    [
        (DEFAULT_SCALER_ADDRESS, ("llm-gpu-scaler", "llm-gpu-scaler")),
        ("llm-gpu-scaler.keda.svc:9090", ("keda", "llm-gpu-scaler")),
        ("llm-gpu-scaler.keda:9090", ("keda", "llm-gpu-scaler")),
        ("llm-gpu-scaler:9090", ("inference", "llm-gpu-scaler")),  # the ScaledObject's namespace
        ("dns:///llm-gpu-scaler.keda.svc.cluster.local:9090", ("keda", "llm-gpu-scaler")),
        ("10.0.0.7:9090", None),  # an address: no Service to look at
        ("[fd00::7]:9090", None),
        ("scaler.example.com:443", None),  # outside the cluster's svc domain
    ],
)
def test_a_scaler_address_names_the_service_it_reaches(address: str, service: tuple[str, str] | None) -> None:
    """SERVICE.NAMESPACE[.svc...]:PORT names a Service; a bare name is in the ScaledObject's namespace;
    an IP address or an outside name names none."""
    assert service_of(address, "inference") == service
