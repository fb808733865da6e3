"""A fleet in steady state per refresh, for scenario tests that step ``now``: what the sources would read.

Each replica prefills ``prefill`` prompt tokens/s and runs ``slots`` sequences, each decoding
``decode`` tokens/s; a request of ``prompt`` + ``output`` tokens holds a slot for
``prompt / prefill + output / decode`` seconds. At each refresh the fleet serves what its Ready
replicas can (the tighter of prefill and slots) and the rest waits; the queue carries over
from one refresh to the next. TTFT is the prefill time stretched by the prefill's utilisation
(``s / (1 - rho)``, M/M/1), or longer than any objective once requests wait.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scaler.model import Observation


@dataclass
class FleetModel:
    """A fleet of identical replicas (defaults: the benchmark's 70B replica, Azure-like requests)."""

    prompt: float = 1200.0
    output: float = 200.0
    prefill: float = 5000.0
    slots: int = 24
    decode: float = 18.0
    waiting: float = field(default=0.0)
    last: datetime | None = field(default=None)

    @property
    def in_service_s(self) -> float:
        """Seconds a request holds a slot."""
        return self.prompt / self.prefill + self.output / self.decode

    def capacity(self, ready: int) -> float:
        """Requests per second ``ready`` replicas complete at their limit."""
        return ready * min(self.prefill / self.prompt, self.slots / self.in_service_s)

    def observe(
        self, now: datetime, rate: float, ready: int, current: int | None = None, **extra: Any
    ) -> Observation:
        """What the sources read at ``now`` with ``rate`` requests/s arriving and ``ready`` replicas."""
        dt = (now - self.last).total_seconds() if self.last is not None else 15.0
        self.last = now
        capacity = self.capacity(ready)
        backlog_rate = self.waiting / dt if self.waiting else 0.0
        served = min(rate + backlog_rate, capacity)
        self.waiting = max(0.0, self.waiting + (rate - served) * dt)
        running = min(served * self.in_service_s, ready * self.slots)
        service = self.prompt / self.prefill
        rho = min(0.95, served * service / max(ready, 1))
        ttft = 60.0 if self.waiting > ready else service / (1.0 - rho)
        values: dict[str, Any] = {
            "queue_waiting": round(self.waiting),
            "requests_running": running,
            "prompt_tokens_per_s": served * self.prompt,
            "generation_tokens_per_s": served * self.output,
            "requests_per_s": served,
            "ttft_mean_seconds": ttft if served else None,
            "ttft_over_objective": 1.0 if ttft > 2.0 else 0.0,
            "kv_cache_usage": running / (ready * self.slots) if ready else None,
            "current_replicas": ready if current is None else current,
            "ready_replicas": ready,
            "gpu_schedulable_replicas": 40,
        }
        values.update(extra)
        return Observation(now=now, **values)
