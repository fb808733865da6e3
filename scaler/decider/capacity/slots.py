"""The batch slots ``S``: the sequences one Ready replica runs at once, measured. Pure.

Two things bound a replica's batch, and each is read where it shows:

* **the KV cache**, at the traffic's sequence lengths: the cache's mean usage ``k`` says how much
  of it the running sequences fill, so it holds

      S_cache = running / ready / k x gate           read while k >= kv_min_usage

  at every refresh (no saturation needed). ``gate`` is 0.8 behind llm-d's flow control
  (``router: llm-d``): its endpoint picker sends a replica nothing more once its cache is 80%
  used (``scaler.decider.flowcontrol``), so a replica is given that share of what its cache holds; 1
  otherwise.
* **the engine's cap** (vLLM's ``max_num_seqs``) where it binds before the cache fills (a small
  model on a large cache): a full batch then leaves the cache partly empty and ``S_cache``
  counts slots the engine never opens. A request waits for a slot, for room in the cache or for
  the prefill (vLLM V1 schedules nothing else); so where requests wait on every replica for a
  slot (``scaler.decider.capacity.saturation``: SLOTS, at this refresh and the previous), no replica's
  cache is full and no replica's prefill is busy, the replicas hold their cap, and the busiest
  runs exactly that, at both refreshes:

      S_cap = running on the busiest replica     slot-bound, the fullest cache below
                                                 kv_full_usage, the busiest prefill below
                                                 prefill_bound_share (the ``max`` over the pods),
                                                 the same at the previous refresh, and the mean
                                                 within one sequence of it (every replica at it)

  Where the engines' series are read as sums only, a mean cannot tell a fleet whose every batch
  is at its cap from one whose dispatch left a few replicas full and the rest half empty; the cap
  is then read only as a plateau: requests wait on every replica of a settled fleet, slot-bound
  (``scaler.decider.capacity.saturation``), the cache below ``kv_full_usage``, and the running count the
  same to within one sequence as at the previous refresh (a hard cap holds every replica at
  exactly it; a half-full fleet's count moves with its traffic): ``S_cap = running / ready``.
  While llm-d's router holds requests it has stopped dispatching (its pool reads saturated), and
  each replica holds all it will be given: ``running / ready`` too.

  A replica never runs more than its cap, so a higher reading is taken at once (``Ceiling``), and
  so is any refresh's busiest replica (or, from sums, the mean) running more than the cap read
  so far, whatever the saturation: a cap read too low (a prefill-bound moment that passed the
  guards) rises the first time a replica is seen above it. Prefill-bound refreshes teach it
  nothing else: their batches are not full.
* **an exported cap** (Dynamo's ``max_num_seqs``) is the cap itself.

    S = min(S_cache, S_cap, exported)

Without a measurement, ``S_cache`` starts from what is known of the cache, read again each refresh
until the first reading: where the engines export their caches' size in tokens (vLLM's
``cache_config_info`` label ``kv_cache_size_tokens``, summed over the engines: ``K``), a Ready
replica's share over the tokens a running sequence holds on average, its prompt and half its output
(each output token joins the cache as it is decoded; ``p`` prompt and ``c`` output tokens per
request over the rate window):

    S_cache = K / ready / (p + c / 2) x gate

A share short of one such sequence is not read: vLLM refuses to start an engine whose cache
cannot hold one request of ``max_model_len`` tokens (``check_enough_kv_cache_memory``), so such a
figure is not a running cache's size.

Else a configured ``generationTokensPerSecondPerReplica`` (``G``, tokens/s of a full batch) over
what one sequence decodes now: ``G x running / generated tokens/s``. That is a full batch's slots
only where the sequences decode at a full batch's speed: a batch with room steps faster (an
engine step's time grows with the sequences it decodes, so vLLM's inter-token latency rises with
the batch), and reads fewer. Read afresh each refresh it moved with the load (in the step world of
``BENCHMARKS.md``, 23-104 slots within an hour of steady traffic, and the fleet with it), so the
largest reading of a settled fleet stands (``scaler.decider.capacity.saturation``: its Ready
replicas unchanged for a rate window and a time in service, so its rates describe them; a first
rate window that still holds idle seconds reads a sequence's speed too low), and a lighter refresh
does not lower it. It is a bound from below only where the running sequences decode alone: a
prompt in prefill counts as running and decodes nothing yet, and prefill sharing the GPU slows the
decodes, so where prompts are long it reads high, and the largest with it (long prompts, capacities
configured right: 1.4-3.5 times the slots in the fluid worlds, where prefill is the resource that
binds). The cache's reading replaces it once a quarter of the cache is used.
The exported size is the engine's own figure, so it comes first; the cache's use, once read,
replaces both (it holds the traffic's real lengths, prefix sharing included).

*Example*: 12 sequences a replica with the cache half used: 24 slots. Before the use is read, 4
engines of 290,925 tokens on 4 Ready replicas, with 1,155-token prompts and 250-token outputs:
290,925 / 1,280 = 227 slots. Without the size, ``G`` = 1,165 tokens/s: 44 sequences decoding 1,452
tokens/s read 35 slots, 104 decoding 1,143 read 106, and a lighter refresh's 35 after it leaves 106.
Where the busiest of the replicas ran 24 while requests waited, the fullest cache 60% used and no
prefill busy, the cap is 24: 12 a replica at 30% later read 40 from the cache, and ``S`` stays 24.
A random dispatch that left one replica's cache full with a queue, and the rest half empty,
teaches the cap nothing.
"""

from __future__ import annotations

from scaler.decider.capacity.estimate import Ceiling, Estimate
from scaler.decider.capacity.saturation import Bound, Saturation
from scaler.decider.demand import Demand
from scaler.decider.flowcontrol import KV_CACHE_UTIL_THRESHOLD
from scaler.decider.params import DeciderParams
from scaler.decider.stages import Stages
from scaler.model import Observation

# The share of its output a running sequence holds in the cache on average: each output token joins
# it as it is decoded, at an even pace over the sequence's decode, so half by its middle.
OUTPUT_HELD = 0.5

KV_CACHE = "KV cache usage"
FULL_BATCH = "running while every slot was busy"
ROUTER_GATED = "running while the router held requests"
EXPORTED = "exported max_num_seqs"
FROM_DECODE_RATE = "generationTokensPerSecondPerReplica over what a sequence decodes now"
FROM_KV_SIZE = "the engines' KV cache size over the tokens a sequence holds"


class BatchSlots:
    """``S`` of the module docstring: the cache's reading, the cap's, and an exported cap."""

    def __init__(
        self, generation_per_replica: float | None, gated: bool, params: DeciderParams, stages: Stages
    ) -> None:
        self.params = params
        self.stages = stages
        self.generation = generation_per_replica
        self.gate = KV_CACHE_UTIL_THRESHOLD if gated else 1.0  # router: llm-d (module docstring)
        self.cache = Estimate(None)
        self.cap = Ceiling()
        self.exported: float | None = None
        self.cap_method = FULL_BATCH
        self.start_method = FROM_DECODE_RATE  # where S_cache started, until it is measured
        self._previous: tuple[int, float] | None = None  # (Ready, running) at the previous refresh
        self._busiest: float | None = None  # the busiest replica's running at the previous refresh
        self._decode_bound: float | None = None  # the largest G-over-decode reading of a settled fleet

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
            method = self.start_method
        return value, method

    def start(self, obs: Observation, demand: Demand) -> tuple[float, str] | None:
        """Where ``S_cache`` starts before the cache's use is read (module docstring), or None."""
        ready, size, generated = obs.ready_replicas, obs.kv_cache_tokens, obs.generation_tokens_per_s
        prompt, served = demand.prompt_tokens_per_request, demand.served_per_s
        if ready and size and prompt and served and generated is not None:
            held = prompt + OUTPUT_HELD * generated / served
            if size / ready >= held:  # a cache short of one sequence is no engine's (module docstring)
                return size / ready / held * self.gate, FROM_KV_SIZE
        running = obs.requests_running
        if self.generation and running and generated:
            return self.generation * running / generated, FROM_DECODE_RATE
        return None

    def cap_reading(self, obs: Observation, saturation: Saturation) -> float | None:
        """This refresh's reading of the engine's cap (module docstring), or None."""
        ready, running, kv = obs.ready_replicas, obs.requests_running, obs.kv_cache_usage
        busiest, fullest = obs.requests_running_max, obs.kv_cache_usage_max
        # What the next refresh compares with, remembered whatever this one reads.
        previous, self._previous = self._previous, (ready or 0, running or 0.0)
        busiest_before, self._busiest = self._busiest, busiest
        if not (ready and running and saturation.settled and self.stages.slot_cap):
            return None
        share, full = self.params.prefill_bound_share, self.params.kv_full_usage
        slot_bound = saturation.bound is Bound.SLOTS
        if busiest is not None and fullest is not None:
            prefill = saturation.busiest_prefill
            held = (prefill is None or prefill < share) and fullest < full and busiest == busiest_before
            # Requests wait on every replica, so a cap that binds holds every replica at it: the mean
            # is within one sequence of the busiest. A mean well below says the queues are not for
            # slots (a prompt queue, a heavy prompt ahead) and the busiest shows no cap.
            everyone = running / ready >= busiest - 1
            return busiest if slot_bound and held and everyone else None
        plateau = previous is not None and previous[0] == ready and abs(running - previous[1]) <= 1
        return running / ready if slot_bound and (kv is None or kv < full) and plateau else None

    def observe(self, obs: Observation, demand: Demand, saturation: Saturation, weight: float) -> None:
        """Learn from one refresh (in time order); ``weight`` is its share of the capacity's time
        constant (``scaler.decider.capacity.estimate``)."""
        if obs.slots_per_replica:
            self.exported = obs.slots_per_replica
        ready, running, kv = obs.ready_replicas, obs.requests_running, obs.kv_cache_usage
        cap = self.cap_reading(obs, saturation)
        if not ready or not running or not saturation.drained:
            return
        measure = self.stages.measure_capacity
        per_replica = running / ready
        if measure and kv is not None and kv >= self.params.kv_min_usage:
            self.cache.measure(per_replica / kv * self.gate, weight)
        # The router holds requests: it stopped dispatching because its pool reads saturated. Its queue
        # is read whatever its endpoints' freshness (the saturation gauge is dropped while one is stale).
        gated = bool(obs.router_queue_waiting)
        if measure and gated:
            self.cap_method = ROUTER_GATED
            self.cap.measure(per_replica, weight)
        elif measure and cap is not None:
            self.cap_method = FULL_BATCH
            self.cap.measure(cap, weight)
        seen = obs.requests_running_max if obs.requests_running_max is not None else per_replica
        if measure and self.cap.value is not None and seen > self.cap.value:
            self.cap.measure(seen, weight)  # a replica ran more: the cap is at least that (Ceiling)
        started = None if self.cache.measured else self.start(obs, demand)
        if started is not None:
            value, method = started
            if method == FROM_DECODE_RATE:  # a bound from below: a settled fleet's largest stands
                if saturation.settled:
                    self._decode_bound = max(value, self._decode_bound or 0.0)
                value = max(value, self._decode_bound or 0.0)
            self.cache.begin(value)
            self.start_method = method
