"""Regenerate scaler/proto/ from protos/externalscaler.proto.

The generated modules are committed so that `pip install -e .` needs no build
step; tests/test_proto.py regenerates into a temporary folder and
fails if the committed files differ. Run with the pinned grpcio-tools from the
`dev` extra: `python scripts/gen_proto.py [OUT_DIR]`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "protos"
DEFAULT_OUT = ROOT / "scaler" / "proto"
MODULES = ("externalscaler_pb2.py", "externalscaler_pb2.pyi", "externalscaler_pb2_grpc.py")


def generate(out: Path) -> list[Path]:
    """Generate the gRPC modules from protos/externalscaler.proto into ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        str(PROTO_DIR / "externalscaler.proto"),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    grpc_module = out / "externalscaler_pb2_grpc.py"
    # protoc writes a top-level import; the package needs a relative one.
    text = grpc_module.read_text()
    text = text.replace(
        "import externalscaler_pb2 as externalscaler__pb2",
        "from . import externalscaler_pb2 as externalscaler__pb2",
    )
    grpc_module.write_text(text)
    return [out / name for name in MODULES]


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    for path in generate(target):
        print(path)
