"""Write scaler/examples/observations.jsonl: the scripted morning the offline demo replays.

Monday 2026-12-07 in Asia/Shanghai, one observation a minute from 08:40 to 10:10:
idle before the 09:00 pre-warm window, a ramp, a burst with a queue that needs more
GPUs than the cluster has, and the decay after it. Deterministic: no randomness.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

OUT = Path(__file__).resolve().parent.parent / "scaler" / "examples" / "observations.jsonl"
START = datetime(2026, 12, 7, 8, 40, tzinfo=ZoneInfo("Asia/Shanghai"))


PROMPT, OUTPUT = 1100, 210  # tokens per request, as in the Azure conversation trace
PREFILL, SLOTS, DECODE = 9000.0, 60, 30.0  # one replica: prompt tokens/s, sequences, tokens/s each


def main() -> None:
    """Write scaler/examples/observations.jsonl."""
    replicas = 2
    waiting = 0.0
    in_service = PROMPT / PREFILL + OUTPUT / DECODE  # seconds a request holds a slot
    per_replica = min(PREFILL / PROMPT, SLOTS / in_service)  # requests/s one replica completes
    rows = []
    for minute in range(0, 91):
        now = START + timedelta(minutes=minute)
        # request rate per second: idle, ramp from 09:05, burst 09:30-09:40, decay after 09:50
        if minute < 25:
            rate = 1.0
        elif minute < 50:
            rate = 1.0 + (minute - 25) * 1.2
        elif minute < 60:
            rate = 31.0 + 20 * math.sin((minute - 50) / 10 * math.pi)
        else:
            rate = max(2.0, 31.0 * math.exp(-(minute - 60) / 12))
        served = min(rate + waiting / 60, replicas * per_replica)
        waiting = max(0.0, waiting + (rate - served) * 60)
        running = served * in_service
        rho = min(0.95, served * PROMPT / PREFILL / replicas)
        schedulable = 0 if 50 <= minute < 60 else 6
        rows.append(
            {
                "now": now.isoformat(),
                "queue_waiting": round(waiting, 1),
                "requests_running": round(running, 1),
                "requests_per_s": round(served, 3),
                "prompt_tokens_per_s": round(served * PROMPT, 1),
                "generation_tokens_per_s": round(served * OUTPUT, 1),
                "ttft_mean_seconds": round(PROMPT / PREFILL / (1 - rho), 4),
                # vLLM's phase times: the prompt's prefill, and the wait before it (the rest of the TTFT)
                "prefill_time_mean_seconds": round(PROMPT / PREFILL, 4),
                "queue_time_mean_seconds": round(PROMPT / PREFILL / (1 - rho) - PROMPT / PREFILL, 4),
                "kv_cache_usage": round(running / (replicas * SLOTS), 4),
                "current_replicas": replicas,
                "ready_replicas": replicas,
                "gpu_schedulable_replicas": schedulable,
            }
        )
        # a crude stand-in for the HPA and the pods following the demand a few minutes late
        wanted = math.ceil(rate / (0.7 * per_replica))
        replicas = max(2, min(wanted, replicas + 2, replicas + schedulable))
    OUT.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {len(rows)} observations to {OUT}")


if __name__ == "__main__":
    main()
