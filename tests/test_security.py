"""TLS, mutual TLS and hostile input on the gRPC port."""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.fuzz_metadata import ABSURD
from scaler.config import ALIASES
from scaler.outputs.grpc_server import METRIC_NAME, TlsFiles
from scaler.proto import externalscaler_pb2 as pb
from scaler.proto import externalscaler_pb2_grpc as pb_grpc
from tests.helpers import ServerThread, ref

pytestmark = pytest.mark.e2e  # every test serves gRPC over TLS on a loopback socket


@dataclass
class Pki:
    """A test CA with a server certificate, a client it signed, and a rogue client from another CA."""

    ca: bytes
    server_cert: Path
    server_key: Path
    ca_file: Path
    client_cert: bytes
    client_key: bytes
    rogue_cert: bytes
    rogue_key: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[str, ec.EllipticCurvePrivateKey] | None,
    ca: bool = False,
    server: bool = False,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)  # noqa: TID251 - certificates are valid from now
    issuer_name, issuer_key = issuer if issuer else (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """Certificates and keys for the module, written where the server can read them."""
    folder = tmp_path_factory.mktemp("pki")
    ca_key, rogue_ca_key = _key(), _key()
    ca = _cert("test-ca", ca_key, None, ca=True)
    rogue_ca = _cert("rogue-ca", rogue_ca_key, None, ca=True)
    server_key, client_key, rogue_key = _key(), _key(), _key()
    server = _cert("scaler", server_key, ("test-ca", ca_key), server=True)
    client = _cert("keda-operator", client_key, ("test-ca", ca_key))
    rogue = _cert("intruder", rogue_key, ("rogue-ca", rogue_ca_key))
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    (folder / "server.pem").write_bytes(server.public_bytes(pem))
    (folder / "server.key").write_bytes(_pem_key(server_key))
    return Pki(
        ca=ca.public_bytes(pem),
        server_cert=folder / "server.pem",
        server_key=folder / "server.key",
        ca_file=folder / "ca.pem",
        client_cert=client.public_bytes(pem),
        client_key=_pem_key(client_key),
        rogue_cert=rogue.public_bytes(pem) + rogue_ca.public_bytes(pem),
        rogue_key=_pem_key(rogue_key),
    )


def secure_stub(
    port: int, pki: Pki, cert: bytes | None = None, key: bytes | None = None
) -> pb_grpc.ExternalScalerStub:
    """A TLS stub that trusts the test CA, presenting ``cert`` and ``key`` when given."""
    creds = grpc.ssl_channel_credentials(root_certificates=pki.ca, private_key=key, certificate_chain=cert)
    return pb_grpc.ExternalScalerStub(  # type: ignore[no-untyped-call]
        grpc.secure_channel(f"localhost:{port}", creds)
    )


def test_tls_serves_clients_that_trust_the_ca_and_refuses_plaintext(pki: Pki) -> None:
    """With TLS on, clients trusting the CA get answers and plaintext clients are refused."""
    with ServerThread(tls=TlsFiles(str(pki.server_cert), str(pki.server_key))) as server:
        assert secure_stub(server.port, pki).IsActive(ref(), timeout=5).result is True
        with pytest.raises(grpc.RpcError) as caught:
            server.stub().IsActive(ref(), timeout=3)
        assert caught.value.code() is grpc.StatusCode.UNAVAILABLE


def test_mutual_tls_refuses_clients_without_a_valid_certificate(pki: Pki) -> None:
    """Mutual TLS serves a CA-signed client and refuses no certificate or a rogue CA's."""
    tls = TlsFiles(str(pki.server_cert), str(pki.server_key), str(pki.ca_file))
    with ServerThread(tls=tls) as server:
        ok = secure_stub(server.port, pki, pki.client_cert, pki.client_key)
        reply = ok.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref(minReplicas="2")), timeout=5)
        assert reply.metricValues[0].metricValue == 2
        for cert, key in ((None, None), (pki.rogue_cert, pki.rogue_key)):
            with pytest.raises(grpc.RpcError) as caught:
                secure_stub(server.port, pki, cert, key).IsActive(ref(), timeout=3)
            assert caught.value.code() is grpc.StatusCode.UNAVAILABLE


@pytest.fixture(scope="module")
def plain_server() -> Iterator[ServerThread]:
    """One plaintext scaler server shared by the module's hostile-input tests."""
    with ServerThread() as server:
        yield server


def test_invalid_utf8_is_invalid_argument_not_internal(plain_server: ServerThread) -> None:
    """Invalid UTF-8 in metadata is INVALID_ARGUMENT on every RPC, never INTERNAL."""
    body = pb.ScaledObjectRef(
        name="a", namespace="b", scalerMetadata={"minReplicas": "Z"}
    ).SerializeToString()
    bad = body.replace(b"Z", b"\xff")
    channel = plain_server.channel()
    for method in ("IsActive", "GetMetricSpec", "GetMetrics"):
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
            f"/externalscaler.ExternalScaler/{method}"
        )
        payload = bad
        if method == "GetMetrics":
            payload = b"\x0a" + bytes([len(bad)]) + bad  # GetMetricsRequest{scaledObjectRef: <bad>}
        with pytest.raises(grpc.RpcError) as caught:
            call(payload, timeout=5)
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT, method
        assert "UTF-8" in (caught.value.details() or "")


def test_oversized_requests_are_refused_and_the_server_lives_on(plain_server: ServerThread) -> None:
    """Oversized or over-long metadata is refused, and the server keeps answering."""
    huge = ref(**{"minReplicas": "1", "labelSelector": "x" * 2_000_000})
    with pytest.raises(grpc.RpcError) as caught:
        plain_server.stub().IsActive(huge, timeout=5)
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    many = ref(**{f"k{i}": "1" for i in range(500)})
    with pytest.raises(grpc.RpcError) as caught:
        plain_server.stub().IsActive(many, timeout=5)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert plain_server.stub().IsActive(ref(), timeout=5).result is True


KNOWN = sorted(ALIASES)
values = st.one_of(st.sampled_from(ABSURD), st.text(max_size=40))
keys = st.one_of(
    st.sampled_from(KNOWN), st.sampled_from([f"{k}FromEnv" for k in KNOWN]), st.text(max_size=20)
)
metadata_maps = st.dictionaries(keys, values, max_size=12)


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(metadata=metadata_maps, name=st.text(min_size=0, max_size=30))
def test_fuzzed_metadata_is_a_decision_or_invalid_argument(
    plain_server: ServerThread, metadata: dict[str, str], name: str
) -> None:
    """Any metadata yields a decision of at least one replica or INVALID_ARGUMENT, nothing else."""
    stub = plain_server.stub()
    request = pb.GetMetricsRequest(
        scaledObjectRef=pb.ScaledObjectRef(name=name, namespace="fuzz", scalerMetadata=metadata),
        metricName=METRIC_NAME,
    )
    error: grpc.RpcError | None = None
    try:
        reply = stub.GetMetrics(request, timeout=5)
    except grpc.RpcError as exc:
        error = exc
    if error is not None:
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, (error.code(), error.details())
        details = error.details() or ""
        assert "invalid" in details
        return
    value = reply.metricValues[0]
    assert value.metricValue >= 1
    assert value.metricValueFloat == value.metricValue
