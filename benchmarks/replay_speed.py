"""How long a week of a 30-pod fleet takes to replay, and how the time grows (issue 36, item 3).

    python -m benchmarks.replay_speed [--days 7] [--rate 15] [--without-numba]

Writes a rate trace of ``--days`` days (one-minute windows, a daily cycle from 0.4x to 1.6x of a
mean ``--rate`` requests/s, 500 prompt and 150 output tokens per request: about 9 M requests a
week at 15/s) and a fleet that needs about 30 replicas at the peak (prefill 3,000 tokens/s, 8
slots decoding 14 tokens/s each, a 4-minute cold start), then times, in a subprocess, the command a
user runs on it:

    scaler replay --trace week.csv --scaledobject plain.yaml --cluster cluster.yaml --no-plot

with plain.yaml a plain KEDA ScaledObject on the queue (converted by the command, and its
baseline): three replays (this scaler, KEDA, the clairvoyant), one process each on a long trace.
``--without-numba`` hides numba from the command (a ``numba`` that fails to import, first on its
PYTHONPATH), as a user without the ``fast`` extra runs it: the replay's Python classes then serve
every request. Printed: the command's wall and CPU seconds, its peak memory, the requests; target
(issue 36): a week in under 2 minutes on 2 cores, a month in under 10. Writes
``benchmarks/results/replay_speed[-without-numba]-<days>d.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, run_timed, target_lines
from tests.helpers import plain_scaledobject

RESULTS = ROOT / "benchmarks" / "results"
WINDOW_S = 60
PROMPT, OUTPUT = 500, 150
CLUSTER = """\
prefill_tokens_per_s: 3000
decode_slots: 8
decode_tokens_per_s_per_seq: 14
cold_start_s: 240
gpus_per_replica: 1
gpus_free: 64
"""
TARGET_S_PER_DAY = 120.0 / 7  # a week in 2 minutes, a month in 10 (about 17 and 20 s a day)


def rates(days: float, rate: float) -> str:
    """The rate trace's CSV: a daily cycle around ``rate`` requests/s, lowest at 04:00."""
    lines = ["window_start_s,req_per_s,prompt_tokens_per_req,output_tokens_per_req"]
    for k in range(int(days * 86400 // WINDOW_S)):
        t = k * WINDOW_S
        r = rate * (1 + 0.6 * math.sin(2 * math.pi * (t / 86400 - 10 / 24)))
        lines.append(f"{t},{r:.4f},{PROMPT},{OUTPUT}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--rate", type=float, default=15.0, help="mean requests/s (default 15)")
    parser.add_argument("--without-numba", action="store_true", help="as without the fast extra")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "week.csv").write_text(rates(args.days, args.rate))
        (work / "cluster.yaml").write_text(CLUSTER)
        query = "sum(vllm:num_requests_waiting)"
        (work / "plain.yaml").write_text(plain_scaledobject("http://prometheus:9090", query, 10, 2, 48))
        env = dict(os.environ)
        if args.without_numba:
            (work / "hide" / "numba").mkdir(parents=True)
            (work / "hide" / "numba" / "__init__.py").write_text(
                'raise ImportError("hidden by benchmarks/replay_speed.py --without-numba")\n'
            )
            env["PYTHONPATH"] = os.pathsep.join([str(work / "hide"), env.get("PYTHONPATH", "")])
        command = [
            str(Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin" / "scaler"),
            "replay", "--trace", str(work / "week.csv"), "--scaledobject", str(work / "plain.yaml"),
            "--cluster", str(work / "cluster.yaml"), "--out", str(work / "out"), "--no-plot",
        ]  # fmt: skip
        timed = run_timed(command, env)
    done, wall_s, cpu_s, peak_mb = timed.done, timed.wall_s, timed.cpu_s, timed.peak_rss_mb
    if done.returncode != 0:
        print(done.stdout, done.stderr)
        return done.returncode
    table = timed.table()
    found = re.search(r"([\d,]+) requests", done.stdout + done.stderr)
    requests = int(found.group(1).replace(",", "")) if found else -1
    how = "without numba (the Python classes)" if args.without_numba else "with numba (the compiled loop)"
    print("\n".join(table))
    print(
        f"scaler replay, {args.days:g} days at {args.rate:g} requests/s ({requests:,} requests), {how}: "
        f"{wall_s:.1f}s wall, {cpu_s:.1f}s CPU over its processes, peak RSS {peak_mb:.0f} MB, "
        f"{os.cpu_count()} cores"
    )
    target_s = TARGET_S_PER_DAY * args.days
    print(
        "\n".join(target_lines("Targets", [(wall_s <= target_s, f"wall {wall_s:.1f}s (<= {target_s:.0f}s)")]))
    )
    result: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "days": args.days,
        "rate": args.rate,
        "requests": requests,
        "numba": not args.without_numba,
        "wall_s": round(wall_s, 1),
        "cpu_s": round(cpu_s, 1),
        "peak_rss_mb": round(peak_mb),
        "table": table,
    }
    RESULTS.mkdir(exist_ok=True)
    suffix = "-without-numba" if args.without_numba else ""
    (RESULTS / f"replay_speed{suffix}-{args.days:g}d.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0 if wall_s <= target_s else 1


if __name__ == "__main__":
    raise SystemExit(main())
