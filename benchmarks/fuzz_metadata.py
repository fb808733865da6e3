"""Fuzz ScaledObject metadata through the real gRPC server: 10,000 maps by default.

    python -m benchmarks.fuzz_metadata [--maps 10000] [--seed 7]

Every map must give a decision or INVALID_ARGUMENT naming keys; never UNKNOWN, INTERNAL,
a traceback or a dead server. The maps mix documented keys (and their FromEnv forms),
unknown keys, absurd values (negative, NaN, inf, 10^18, huge strings, control and
non-ASCII characters) and random text. Writes benchmarks/results/fuzz_metadata.json.
(The test suite runs 2,000 such maps with hypothesis on every CI run.)
"""

from __future__ import annotations

import argparse
import json
import random
import string
import time
from collections import Counter

import grpc

from benchmarks.harness import ROOT, start_scaler_offline
from scaler.config import ALIASES
from scaler.proto import externalscaler_pb2 as pb
from scaler.proto import externalscaler_pb2_grpc as pb_grpc

# The values the maps draw from, the test suite's fuzzing too (tests/test_security.py).
ABSURD = [
    "",
    " ",
    "0",
    "-1",
    "1",
    "2",
    "16",
    "1e18",
    "-1e18",
    "1e308",
    "NaN",
    "nan",
    "inf",
    "-Infinity",
    "0.0001",
    "1.5",
    "true",
    "false",
    "yes",
    "0 9 * * 1-5",
    "* * * * *",
    "61 25 * * *",
    "@daily",
    "UTC",
    "Asia/Shanghai",
    "Mars/Base",
    "../../etc/passwd",
    "9" * 400,
    "[]",
    "[{}]",
    "{",
    "null",
    '[{"start": "0 9 * * *", "end": "0 10 * * *", "replicas": 3}]',
    'model_name="x"',
    'a="b"} or vector(1',
    'a=~"("',
    "http://prom:9090",
    "http://user:pw@prom:9090",
    "ftp://x",
    "vllm",
    "custom",
    "sum(x)",
    "\u0000",
    "\x7f",
    "\U0001f680",
    "x" * 9000,
]


def random_map(rng: random.Random) -> dict[str, str]:
    keys = sorted(ALIASES)
    md: dict[str, str] = {}
    for _ in range(rng.randint(0, 12)):
        roll = rng.random()
        if roll < 0.6:
            key = rng.choice(keys)
        elif roll < 0.75:
            key = rng.choice(keys) + "FromEnv"
        elif roll < 0.85:
            key = rng.choice(["scalerAddress", "enableTLS", "unsafeSsl", "caCert"])
        else:
            key = "".join(rng.choice(string.printable) for _ in range(rng.randint(0, 12)))
        value = (
            rng.choice(ABSURD)
            if rng.random() < 0.7
            else "".join(rng.choice(string.printable + "éß中") for _ in range(rng.randint(0, 30)))
        )
        md[key] = value
    return md


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--maps", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    proc, port = start_scaler_offline(ROOT / "benchmarks" / "results" / "fuzz_metadata.scaler.log")
    codes: Counter[str] = Counter()
    bad: list[str] = []
    started = time.monotonic()
    try:
        stub = pb_grpc.ExternalScalerStub(grpc.insecure_channel(f"127.0.0.1:{port}"))  # type: ignore[no-untyped-call]
        for i in range(args.maps):
            md = random_map(rng)
            name = rng.choice(["llama", "", "x" * 300, f"so-{i}"])
            request = pb.GetMetricsRequest(
                scaledObjectRef=pb.ScaledObjectRef(name=name, namespace="fuzz", scalerMetadata=md)
            )
            try:
                reply = stub.GetMetrics(request, timeout=10)
                codes["OK"] += 1
                if reply.metricValues[0].metricValue < 1:
                    bad.append(f"target below 1 for {md!r}")
            except grpc.RpcError as exc:
                codes[exc.code().name] += 1
                if exc.code() is not grpc.StatusCode.INVALID_ARGUMENT:
                    bad.append(f"{exc.code().name}: {exc.details()} for {md!r}")
        alive = stub.IsActive(pb.ScaledObjectRef(name="after", namespace="fuzz"), timeout=10).result
    finally:
        proc.terminate()
        proc.wait(30)
    elapsed = time.monotonic() - started
    result = {
        "maps": args.maps,
        "seed": args.seed,
        "codes": dict(codes),
        "unexpected": bad[:20],
        "server_alive_after": alive,
        "seconds": elapsed,
    }
    (ROOT / "benchmarks" / "results" / "fuzz_metadata.json").write_text(json.dumps(result, indent=2))
    print(
        f"{args.maps} metadata maps in {elapsed:.0f}s: "
        + ", ".join(f"{k} {v}" for k, v in sorted(codes.items()))
    )
    print(f"unexpected answers: {len(bad)}; server alive afterwards: {alive}")
    for line in bad[:5]:
        print("  ", line[:300])
    return 0 if not bad and alive else 1


if __name__ == "__main__":
    raise SystemExit(main())
