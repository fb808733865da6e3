"""The server image's Python tree, measured without a Docker engine.

    .venv/bin/python benchmarks/image_size.py   # about a minute with a warm pip cache

Builds the wheel, installs it into a fresh venv as the Dockerfile does (the dependencies
pinned by constraints.txt, no extras), and prints the venv's size on disk: the layer the
image adds to python:3.11-slim-bookworm. Then adds the replay's extra (numpy, matplotlib,
tqdm) and prints the size again: what the image carried before the extra existed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "image_size.json"


def size_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 2**20


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        dist = Path(tmp) / "dist"
        subprocess.run(
            [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(ROOT)],
            check=True,
            capture_output=True,
        )
        (wheel,) = dist.glob("*.whl")
        wheel_kib = wheel.stat().st_size / 1024
        env = Path(tmp) / "venv"
        venv.EnvBuilder(with_pip=True).create(env)
        pip = [str(env / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        empty = size_mib(env)
        subprocess.run([*pip, "-r", str(ROOT / "constraints.txt")], check=True)
        subprocess.run([*pip, "--no-deps", str(wheel)], check=True)
        server = size_mib(env)
        subprocess.run([*pip, "numpy", "matplotlib", "tqdm"], check=True)
        with_replay = size_mib(env)
    figures = {
        "wheel_kib": wheel_kib,
        "empty_venv_mib": empty,
        "server_venv_mib": server,
        "with_replay_extra_mib": with_replay,
    }
    print(f"wheel:                                       {wheel_kib:7.0f} KiB")
    print(f"empty venv (pip, setuptools):                {empty:7.1f} MiB")
    print(f"server: the wheel + constraints.txt          {server:7.1f} MiB   <- the image's /opt/venv")
    print(
        f"with the replay extra (numpy, matplotlib)    {with_replay:7.1f} MiB   (+{with_replay - server:.1f} MiB)"
    )
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
