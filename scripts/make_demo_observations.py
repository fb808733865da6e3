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


def main() -> None:
    """Write scaler/examples/observations.jsonl."""
    replicas = 2
    rows = []
    for minute in range(0, 91):
        now = START + timedelta(minutes=minute)
        # request rate per second: idle, ramp from 09:05, burst 09:30-09:40, decay after 09:50
        if minute < 25:
            rate = 0.5
        elif minute < 50:
            rate = 0.5 + (minute - 25) * 0.6
        elif minute < 60:
            rate = 15.5 + 10 * math.sin((minute - 50) / 10 * math.pi)
        else:
            rate = max(1.0, 15.5 * math.exp(-(minute - 60) / 12))
        prompt = rate * 1100
        generation = rate * 210
        capacity_per_replica = 0.75 * 1 / (1100 / 9000 + 210 / 1800)
        waiting = max(0.0, (rate - replicas * capacity_per_replica) * 20)
        schedulable = 0 if 50 <= minute < 60 else 6
        rows.append(
            {
                "now": now.isoformat(),
                "queue_waiting": round(waiting, 1),
                "requests_running": round(min(rate, replicas * capacity_per_replica) * 8, 1),
                "prompt_tokens_per_s": round(prompt, 1),
                "generation_tokens_per_s": round(generation, 1),
                "current_replicas": replicas,
                "ready_replicas": replicas,
                "gpu_schedulable_replicas": schedulable,
            }
        )
        # a crude stand-in for the HPA and the pods following the last target after 3 minutes
        replicas = max(2, min(replicas + 2, 8 + schedulable)) if waiting > 0 else max(2, replicas)
    OUT.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {len(rows)} observations to {OUT}")


if __name__ == "__main__":
    main()
