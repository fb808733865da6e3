"""The batch slots ``S``: the sequences one Ready replica runs at once, measured. Pure.

Two things bound a replica's batch, and each is read where it shows:

* **the KV cache**, at the traffic's sequence lengths: the cache's mean usage ``k`` says how much
  of it the running sequences fill, so it holds

      S_cache = running / ready / k x gate           read while k >= kv_min_usage

  at every refresh (no saturation needed). ``gate`` is 0.8 behind llm-d's flow control
  (``router: llm-d``): its endpoint picker sends a replica nothing more once its cache is 80%
  used (``scaler.flowcontrol``), so a replica is given that share of what its cache holds; 1
  otherwise.
* **the engine's cap** (vLLM's ``max_num_seqs``) where it binds before the cache fills (a small
  model on a large cache): a full batch then leaves the cache partly empty and ``S_cache``
  counts slots the engine never opens. The cap shows as what a replica runs while requests
  wait on every replica for a slot and the cache has room:

      S_cap = running / ready    at SLOTS-bound refreshes (scaler.capacity.saturation) with
                                 k < kv_full_usage (or no KV gauge), or while llm-d's router
                                 reads its pool saturated (it stops dispatching: each replica
                                 holds all it will be given)

  A replica never runs more than its cap, so a reading is the cap or, where some replicas'
  queues emptied within the window, less: a higher reading is taken at once (``Ceiling``).
  Prefill-bound refreshes teach it nothing: their batches are not full.
* **an exported cap** (Dynamo's ``max_num_seqs``) is the cap itself.

    S = min(S_cache, S_cap, exported)

Without a measurement, a configured ``generationTokensPerSecondPerReplica`` (``G``, tokens/s of a
full batch) over what one sequence decodes now starts ``S_cache``: ``G x running / generated
tokens/s``, read again each refresh until the first reading.

*Example*: 12 sequences a replica with the cache half used: 24 slots. Where 24 a replica were
seen running with every replica waiting and the cache 60% used, the cap is 24: 12 a replica at
30% later read 40 from the cache, and ``S`` stays 24.
"""

from __future__ import annotations

from scaler.capacity.estimate import Ceiling, Estimate
from scaler.capacity.saturation import Bound, Saturation
from scaler.flowcontrol import KV_CACHE_UTIL_THRESHOLD
from scaler.model import Observation
from scaler.params import DeciderParams

KV_CACHE = "KV cache usage"
FULL_BATCH = "running while every slot was busy"
ROUTER_GATED = "running while the router held requests"
EXPORTED = "exported max_num_seqs"
FROM_DECODE_RATE = "generationTokensPerSecondPerReplica over what a sequence decodes now"


class BatchSlots:
    """``S`` of the module docstring: the cache's reading, the cap's, and an exported cap."""

    def __init__(self, generation_per_replica: float | None, gated: bool, params: DeciderParams) -> None:
        self.params = params
        self.generation = generation_per_replica
        self.gate = KV_CACHE_UTIL_THRESHOLD if gated else 1.0  # router: llm-d (module docstring)
        self.cache = Estimate(None)
        self.cap = Ceiling()
        self.exported: float | None = None
        self.cap_method = FULL_BATCH

    @property
    def samples(self) -> int:
        """Refreshes that measured the slots (the cache's readings and the cap's)."""
        return self.cache.samples + self.cap.samples

    def figure(self) -> tuple[float | None, str]:
        """``S`` and which reading binds it: the smallest of the cache's, the cap's and an exported one."""
        found = [
            (value, method)
            for value, method in (
                (self.cache.value, KV_CACHE),
                (self.cap.value, self.cap_method),
                (self.exported, EXPORTED),
            )
            if value is not None
        ]
        if not found:
            return None, ""
        value, method = min(found)
        if method == KV_CACHE and not self.cache.measured:
            method = FROM_DECODE_RATE
        return value, method

    def observe(self, obs: Observation, saturation: Saturation) -> None:
        """Learn from one refresh (in time order)."""
        if obs.slots_per_replica:
            self.exported = obs.slots_per_replica
        ready, running, kv = obs.ready_replicas, obs.requests_running, obs.kv_cache_usage
        if not ready or not running or not saturation.drained:
            return
        weight = self.params.capacity_weight
        measure = self.params.measure_capacity
        per_replica = running / ready
        if measure and kv is not None and kv >= self.params.kv_min_usage:
            self.cache.measure(per_replica / kv * self.gate, weight)
        gated = obs.router_saturation is not None and obs.router_saturation >= 1.0
        full = saturation.bound is Bound.SLOTS and (kv is None or kv < self.params.kv_full_usage)
        if measure and (gated or (full and self.params.slot_cap)):
            self.cap_method = ROUTER_GATED if gated else FULL_BATCH
            self.cap.measure(per_replica, weight)
        if not self.cache.measured and self.generation and obs.generation_tokens_per_s:
            self.cache.begin(self.generation * running / obs.generation_tokens_per_s)
