"""The cheapest constant fleet within reach of the clairvoyant: what knowing a trace's peak, and none of
its times, buys.

    nice .venv/bin/python benchmarks/constant_fleet.py            # bursty, 2 h, 3 seeds, every physics
    nice .venv/bin/python benchmarks/constant_fleet.py --quick    # seed 0 only

Bursts shorter than a cold start (the bursty trace's are 60-150 s against 180 s) cannot be met by
a replica ordered when one begins: a policy that does not know when they come meets them only
with replicas that stand through the calm between. The cheapest such fleet is a constant one
sized for the bursts, and it needs to know their size. Per cell of ``decision_quality.py`` (the
same fleet, GPU limit, clairvoyant and frontier), this replays ``N`` replicas held all along for
``N`` from 2 up, and stops at the first within ``WITHIN`` of the clairvoyant's attainment (the
bursty target's 2 points), printing its attainment and its GPU-hours over the clairvoyant's
frontier at equal attainment (``x``, as the decision benchmark's; ``<``/``>`` past an end of the
frontier). Where that ``x`` is above the target's 1.5x, no policy without the clairvoyant's
timing meets the target at constant size; the decider's figures for the same cells are the
acceptance run's (``BENCHMARKS.md``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks import decision_quality as dq  # noqa: E402
from benchmarks.harness import run_cells, trace_parser  # noqa: E402
from scaler.replay.compare import held_at  # noqa: E402
from scaler.replay.fleet.cluster import ClusterConfig  # noqa: E402
from scaler.replay.trace import Trace  # noqa: E402

WITHIN = 0.02  # the bursty target: within 2 points of the clairvoyant's attainment
HOURS = 2.0  # the acceptance run's bursty length (--hours bursty=2)


def held(trace: Trace, cfg: ClusterConfig, n: int, objective_s: float) -> tuple[float, float]:
    """``n`` replicas Ready all along: the share of first tokens within the objective, and GPU-hours."""
    result = held_at(trace, cfg, dq.START, n, "constant")
    return float(np.mean(result.ttft <= objective_s)), result.gpu_seconds / 3600.0


def constant_cell(cell: dq.Cell) -> dict[str, Any]:
    """The cell's clairvoyant, and constant fleets from 2 replicas up to the first within WITHIN of it."""
    began = time.perf_counter()
    trace = dq.cell_trace(cell)
    objective_s = cell.objective_s
    cfg, clairvoyant, search, _ = dq.reference(trace, dq.fleet(cell), objective_s)
    points = dq.frontier(trace, cfg, search, objective_s, 1)
    reached = float(np.mean(clairvoyant.ttft <= objective_s))
    rows = []
    for n in range(2, cfg.max_replicas_on_gpus + 1):
        attainment, hours = held(trace, cfg, n, objective_s)
        at, edge = dq.at_equal_attainment(points, attainment)
        rows.append(
            {"replicas": n, "within_objective": attainment, "gpu_hours": hours, "x": hours / at, "edge": edge}
        )
        if attainment >= reached - WITHIN:
            break
    return {
        "cell": cell.describe(),
        "physics": cell.physics,
        "clairvoyant": reached,
        "gpu_limit": cfg.max_replicas_on_gpus,
        "constant": rows[-1],
        "seconds": time.perf_counter() - began,
    }


def show(one: dict[str, Any]) -> None:
    c = one["constant"]
    print(
        f"  {one['cell']:<40} clairvoyant {100 * one['clairvoyant']:6.2f} %; {c['replicas']:2d} replicas"
        f" (of {one['gpu_limit']}): {100 * c['within_objective']:6.2f} % at {c['x']:.2f}x{c['edge']}"
    )


def main() -> int:
    parser = trace_parser(__doc__, dq.TRACES)
    parser.set_defaults(traces=["bursty"])
    parser.add_argument("--physics", nargs="+", default=list(dq.PHYSICS_RUN), choices=list(dq.PHYSICS_RUN))
    parser.add_argument("--serving", nargs="+", default=list(dq.SERVING_RUN), choices=list(dq.SERVING))
    parser.add_argument(
        "--hours", type=float, default=HOURS, help=f"each trace's first H hours (default {HOURS:g})"
    )
    parser.add_argument("--workers", type=int, default=2, help="cells run in parallel (default 2)")
    parser.add_argument("--json", default=None, help="where the figures go (default benchmarks/results/...)")
    args = parser.parse_args()
    seeds = [0] if args.quick else args.seeds
    jobs = [
        dq.Cell(name, seed, physics, serving, hours=min(args.hours, dq.HOURS[name]))
        for name in args.traces
        for seed in (seeds if name != "azure" else [0])
        for physics in args.physics
        for serving in args.serving
    ]
    cells = run_cells("constant fleet", jobs, seeds, args.traces, constant_cell, show, args.workers)
    print(
        "\nMeans per physics (the constant fleet within 2 points: attainment, x; the clairvoyant's attainment)"
    )
    for physics in args.physics:
        mine = [c for c in cells if c["physics"] == physics]
        if mine:
            att = 100 * np.mean([c["constant"]["within_objective"] for c in mine])
            x = np.mean([c["constant"]["x"] for c in mine])
            met = sum(c["constant"]["x"] <= 1.5 for c in mine)
            ref = 100 * np.mean([c["clairvoyant"] for c in mine])
            print(
                f"  {physics:<9} {att:6.2f} % at {x:.2f}x ({met} of {len(mine)} at <= 1.5x); clairvoyant {ref:6.2f} %"
            )
    path = Path(args.json or HERE / "results" / "constant_fleet.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cells": cells}, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
