"""Memory of the decision state: 1,000 engines fed two hours of 15-second refreshes.

    python -m benchmarks.engine_memory [--scaledobjects 1000] [--hours 2]

Each engine learns its forecast margin from its own misses over an hour
(``error_window_s``), so its state grows until an hour of checks is held and must then
stay flat. Measured with tracemalloc (Python allocations only, not the interpreter):
the state after 10 minutes, after one hour and at the end. Targets: under 25 KB per
ScaledObject, and growth of at most 5% between the first hour and the end.
Writes benchmarks/results/engine_memory.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import time
import tracemalloc
from datetime import UTC, datetime, timedelta

from benchmarks.harness import ROOT
from scaler.config import engine_for
from scaler.decider.engine import Observation
from scaler.model import Decision

RESULTS = ROOT / "benchmarks" / "results"
STEP_S = 15.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scaledobjects", type=int, default=1000)
    parser.add_argument("--hours", type=float, default=2.0)
    args = parser.parse_args()
    metadata = {
        "minReplicas": "1",
        "maxReplicas": "50",
        "promptTokensPerSecondPerReplica": "9000",
        "generationTokensPerSecondPerReplica": "1800",
        "coldStartSeconds": "180",
    }
    start = datetime(2026, 12, 1, tzinfo=UTC)
    steps = int(args.hours * 3600 / STEP_S)
    marks = {int(600 / STEP_S): "10 min", int(3600 / STEP_S): "1 h", steps: f"{args.hours:g} h"}

    tracemalloc.start()
    engines = [engine_for(metadata) for _ in range(args.scaledobjects)]
    last: list[Decision | None] = [None] * len(engines)  # the registry keeps each last decision
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    figures: dict[str, float] = {}
    started = time.perf_counter()
    for step in range(1, steps + 1):
        now = start + timedelta(seconds=step * STEP_S)
        for i, engine in enumerate(engines):
            # a daily-shaped load with per-target phase and noise, so margins are learned
            wave = 1 + 0.5 * math.sin(2 * math.pi * (step * STEP_S / 86_400 + i / 97))
            noise = 1 + 0.2 * math.sin(step * 1.7 + i)
            prompt = 20_000 * wave * noise
            last[i] = engine.decide(
                Observation(
                    now=now,
                    queue_waiting=5 * noise,
                    requests_running=40 * wave,
                    prompt_tokens_per_s=prompt,
                    generation_tokens_per_s=prompt / 5,
                    current_replicas=4,
                    ready_replicas=4,
                    gpu_schedulable_replicas=20,
                )
            )
        if step in marks:
            gc.collect()
            figures[marks[step]] = (tracemalloc.get_traced_memory()[0] - base) / 2**20
    elapsed = time.perf_counter() - started
    tracemalloc.stop()

    end = figures[marks[steps]]
    hour = figures["1 h"]
    per_target_kb = end * 1024 / len(engines)
    growth = (end - hour) / hour if hour else math.inf
    decisions = steps * len(engines)
    result = {
        "scaledobjects": len(engines),
        "hours": args.hours,
        "state_mb": figures,
        "kb_per_scaledobject": per_target_kb,
        "growth_after_first_hour": growth,
        "decisions": decisions,
        "microseconds_per_decision_traced": 1e6 * elapsed / decisions,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "engine_memory.json").write_text(json.dumps(result, indent=2))
    print(
        f"{len(engines)} engines, {steps} refreshes of {STEP_S:g} s: decision state "
        + ", ".join(f"{mb:.1f} MB after {label}" for label, mb in figures.items())
    )
    print(
        f"per ScaledObject: {per_target_kb:.1f} KB (target < 25 KB: {'met' if per_target_kb < 25 else 'MISSED'})"
    )
    print(
        f"growth after the first hour: {growth:+.1%} (target <= 5%: {'met' if growth <= 0.05 else 'MISSED'})"
    )
    print(f"({decisions} decisions, {1e6 * elapsed / decisions:.0f} µs each under tracemalloc)")
    return 0 if per_target_kb < 25 and growth <= 0.05 else 1


if __name__ == "__main__":
    raise SystemExit(main())
