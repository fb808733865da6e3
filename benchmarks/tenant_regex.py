"""One tenant's regex: 1,000 ScaledObjects, ten of them with pathological labelSelector regexes.

    python -m benchmarks.tenant_regex [--scaledobjects 1000] [--load-seconds 60] [--rounds 2]

Runs of the scaler as its own process, each polled as KEDA polls (``benchmarks.harness``) for
``--load-seconds``, in ABBA order over ``--rounds`` (without, with, with, without: a machine whose
other load drifts weighs on both alike), the latencies of each kind pooled: 1,000 ScaledObjects
with plain selectors, and the same 1,000 where ten carry
regexes that backtrack catastrophically in Python's ``re`` (``(a|aa)+b`` and its kin) or compile
to a large RE2 program, over a fleet whose model is named forty ``a``s. The target: every other
ScaledObject's GetMetrics p99 within 2x of the run without them. It also prints each run's refresh
wall time, what RE2 costs per step here (the unit ``scaler.matchers``' budget counts in), and, in
this process, what Python's ``re`` spent on ``(a|aa)+b`` before (30 to 34 characters; 40 takes
minutes). Writes benchmarks/results/tenant_regex.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import re
import time
from typing import Any

from benchmarks.harness import (
    ALL_CPUS,
    ROOT,
    KedaClient,
    Recorder,
    Stack,
    layout,
    scaledobjects,
    start_scaler,
)
from benchmarks.service_speed import scrape_value
from scaler.matchers import MATCH_CALL_STEPS, parse_selector

RESULTS = ROOT / "benchmarks" / "results"
LONG = "a" * 40  # a model name the patterns below backtrack on
# Ten selectors: backtracking traps for a backtracking engine, and large RE2 programs.
PATHOLOGICAL = (
    'model_name=~"(a|aa)+b"',
    'model_name=~"(a|a?)+b"',
    'model_name=~"(a*)*b"',
    'model_name=~"((a+)+)+b"',
    'model_name=~"(.*a){20}b"',
    'model_name=~"(\\\\w+\\\\s?)+b"',
    'model_name=~"(?:a|b|c|aa|ab|ac|[a-z]+x)+y"',
    'model_name=~"(?:a?){300}a{300}"',
    'model_name=~".*(a|b){200}.*c"',
    'pod=~"(.*-){10}x"',
)
TARGET_RATIO = 2.0  # the others' GetMetrics p99 with the ten, over without: at most this


def run(
    stack: Stack,
    count: int,
    pathological: bool,
    load_s: float,
    refresh_s: float,
    models: int,
    recorders: tuple[Recorder, Recorder],
) -> float:
    """One scaler process polled for ``load_s``, the others' and the ten's latencies recorded into
    ``recorders``; returns its last refresh's wall time."""
    name = "with" if pathological else "without"
    scaler, port, metrics_port = start_scaler(
        stack.prometheus.url, refresh_s, RESULTS / f"tenant_regex.{name}.scaler.log"
    )
    try:
        refs = scaledobjects(count, models, f"127.0.0.1:{port}")
        bad = []
        if pathological:
            step = count // len(PATHOLOGICAL)
            for n, selector in enumerate(PATHOLOGICAL):
                refs[n * step].scalerMetadata["labelSelector"] = selector
                bad.append(refs[n * step])
        others = [r for r in refs if r not in bad]
        rest, ten = recorders
        asyncio.run(KedaClient(f"127.0.0.1:{port}", refs, Recorder()).register())
        time.sleep(refresh_s + 1)  # one full refresh with every target registered

        async def load() -> None:
            clients = [KedaClient(f"127.0.0.1:{port}", others, rest)]
            if bad:
                clients.append(KedaClient(f"127.0.0.1:{port}", bad, ten))
            await asyncio.gather(*(c.run(load_s, refresh_s) for c in clients))

        asyncio.run(load())
        return scrape_value(metrics_port, "llm_scaler_refresh_duration_seconds")
    finally:
        scaler.terminate()
        scaler.wait(30)


def summary(recorders: tuple[Recorder, Recorder], walls: list[float], pathological: bool) -> dict[str, Any]:
    """One kind of run's pooled figures: the others', the ten's, the refresh walls, failed RPCs."""
    rest, ten = recorders
    return {
        "others": rest.summary(),
        "pathological": ten.summary() if pathological else None,
        "refresh_wall_seconds": max(walls),
        "refresh_walls": walls,
        "failed_rpcs_of_others": {f"{m}/{c}": n for (m, c), n in rest.codes.items() if c != "OK"},
    }


def re2_per_step() -> list[dict[str, Any]]:
    """RE2's cost here per step of the budget's unit, for each pathological regex on ``LONG``."""
    out = []
    for selector in PATHOLOGICAL:
        (matcher,) = parse_selector(selector)
        value = LONG if matcher.name == "model_name" else f"{LONG}-0"
        calls = 2000
        started = time.perf_counter()
        for _ in range(calls):
            matcher.regex.fullmatch(value)
        seconds = (time.perf_counter() - started) / calls
        steps = MATCH_CALL_STEPS + matcher.regex.programsize * (len(value) + 1)
        out.append(
            {
                "selector": selector,
                "program_size": matcher.regex.programsize,
                "us_per_call": seconds * 1e6,
                "steps_charged": steps,
                "ns_per_step": seconds * 1e9 / steps,
            }
        )
    return out


def python_re_seconds() -> dict[int, float]:
    """What Python's backtracking ``re`` spends on ``(a|aa)+b`` over n ``a``s (the engine before)."""
    out = {}
    for n in (26, 30, 32, 34):
        started = time.perf_counter()
        re.fullmatch("(a|aa)+b", "a" * n)
        out[n] = time.perf_counter() - started
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scaledobjects", type=int, default=1000)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--refresh", type=float, default=15.0)
    parser.add_argument("--load-seconds", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds: each runs both kinds once")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)

    stack = Stack(models=args.models, extra_models=(LONG,))
    kinds = {False: (Recorder(), Recorder()), True: (Recorder(), Recorder())}
    walls: dict[bool, list[float]] = {False: [], True: []}
    try:
        for r in range(args.rounds):
            for pathological in (False, True) if r % 2 == 0 else (True, False):
                wall = run(
                    stack,
                    args.scaledobjects,
                    pathological,
                    args.load_seconds,
                    args.refresh,
                    args.models,
                    kinds[pathological],
                )
                walls[pathological].append(wall)
                name = "with" if pathological else "without"
                print(f"round {r + 1} {name}: refresh wall {wall:.3f}s", flush=True)
    finally:
        stack.close()
    without, with_ten = summary(kinds[False], walls[False], False), summary(kinds[True], walls[True], True)
    steps = re2_per_step()
    backtracking = python_re_seconds()

    n_others = args.scaledobjects - len(PATHOLOGICAL)
    p99_without = without["others"]["GetMetrics"]["p99_ms"]
    p99_with = with_ten["others"]["GetMetrics"]["p99_ms"]
    ratio = p99_with / p99_without
    result = {
        "machine": f"{platform.machine()}, {len(ALL_CPUS)} CPUs,"
        f" Python {platform.python_version()}; {layout()}",
        "scaledobjects": args.scaledobjects,
        "load_seconds": args.load_seconds,
        "rounds": args.rounds,
        "pathological": list(PATHOLOGICAL),
        "without": without,
        "with": with_ten,
        "others_getmetrics_p99_ratio": ratio,
        "re2_per_step": steps,
        "python_re_seconds_for_(a|aa)+b": backtracking,
    }
    (RESULTS / "tenant_regex.json").write_text(json.dumps(result, indent=2))

    print(
        f"\n{args.scaledobjects} ScaledObjects, {args.rounds} ABBA rounds of {args.load_seconds:g} s polled"
        f" as KEDA polls ({result['machine']})"
    )
    print(f"{'run':<34}{'GetMetrics p50':>15}{'p99':>9}{'max':>9}{'refresh wall (max)':>20}")
    for label, one, part in (
        (f"without the ten: the {n_others} others", without, "others"),
        (f"with the ten: the {n_others} others", with_ten, "others"),
        ("with the ten: the ten", with_ten, "pathological"),
    ):
        s = one[part]["GetMetrics"]
        print(
            f"{label:<34}{s['p50_ms']:>13.2f}ms{s['p99_ms']:>7.2f}ms{s['max_ms']:>7.1f}ms"
            f"{one['refresh_wall_seconds']:>19.3f}s"
        )
    verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
    print(f"others' GetMetrics p99 with / without: {ratio:.2f}   target <= {TARGET_RATIO:g}: {verdict}")
    print("RE2 on the 40-a value, per pathological selector (the budget's unit is the step):")
    for row in steps:
        print(
            f"  {row['selector']:<48} program {row['program_size']:>5}  {row['us_per_call']:>7.2f} us a call"
            f"  {row['ns_per_step']:.3f} ns a charged step"
        )
    print(
        "Python's re on (a|aa)+b (the engine before), one value: "
        + ", ".join(f"{n} chars {s:.3f} s" for n, s in backtracking.items())
    )
    failed = with_ten["failed_rpcs_of_others"] or without["failed_rpcs_of_others"]
    print(f"failed RPCs of the others: {failed or 'none'}")
    return 0 if ratio <= TARGET_RATIO and not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
