"""The decider's internal constants, in one typed object. Pure.

Every constant the demand, forecast, capacity and sizing steps use is a field here, with its
unit and why it has the value it has; those steps hold no other tuned number (a test reads
their source for one). The cold-start window (``scaler.decider.coldstart``) and the landing monitor
(``scaler.decider.landing``) keep theirs: they describe Kubernetes, not the traffic. Which
mechanisms run is not a constant: ``scaler.decider.stages`` (all of them, but in an ablation).

What a caller sets is metadata (``scaler.config``): the TTFT objective and its percentile, the
capacities if known, the bounds. These thirteen are the scaler's own; the last two only say
how exactly a formula is computed, not what it decides.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DeciderParams:
    """The decider's constants (module docstring); ``Engine(spec, params)`` takes others for experiments."""

    rate_window_s: float = 60.0
    """Seconds: the window the engine's rates are read over (Prometheus' ``rate(...[1m])``). The
    forecast's level moves with that time constant, the queue's growth is read over it, the
    Ready replicas must be steady that long before rates per replica measure capacity, and a
    window of n requests measures their rate within 1/sqrt(n)."""
    trend_time_constant_s: float = 300.0
    """Seconds: the forecast's trend averages slopes over five rate windows, long enough that one
    noisy window does not tilt it, short enough to follow a ramp one cold start (180 s) ahead."""
    error_window_s: float = 3600.0
    """Seconds of forecast errors the load signal sizes against: an hour holds 240 checks at 15 s
    refreshes, enough for a 99.5% quantile, and forgets a different traffic regime within the hour."""
    learning_time_constant_s: float = 1800.0
    """Seconds the slow learners average over: how prefill slows decoding and the batch the ITL
    objective allows (``scaler.decider.capacity``). Half an hour of refreshes: slow enough that a
    burst does not move them, fast enough to learn an engine the configuration did not describe."""
    calibration_time_constant_s: float = 300.0
    """Seconds: how fast the measured objective moves the scale of the model's capacities
    (``scaler.decider.calibration``): five minutes of refreshes that all say the model is off by a
    factor move it most of the way; one refresh's handful of late first tokens, little."""
    capacity_time_constant_s: float = 150.0
    """Seconds a replica's measured capacities (and the dispatch's spread) are averaged over: ten
    15 s refreshes, so one noisy rate window moves them by a tenth, and a changed replica is learned
    within minutes. Every average of the decider follows one rule, ``w = 1 - exp(-dt / tau)``."""
    kv_min_usage: float = 0.25
    """Least mean KV-cache usage from which running sequences over usage measure the batch slots:
    below, a few sequences' share of the cache is mostly noise (sequence lengths vary)."""
    fit_min_spread: float = 0.05
    """Standard deviation a fitted line's regressor needs, as a share of its range (a replica's
    prefill busy share for the decode slowdown, its share of slots in use for the inter-token
    latency): a fleet whose load never moved cannot show how a replica responds to it."""
    pooled_spread: float = 0.5
    """How unevenly the replicas may be loaded, in units of what a random dispatch gives (the
    busiest replica's running count above the mean, over the Poisson scatter of the largest of N),
    below which the fleet is read as one pooled queue (``scaler.decider.capacity.dispatch``): halfway
    between a least-loaded router (0) and a Kubernetes Service's random spread (1)."""
    prefill_bound_share: float = 0.8
    """Share of its time the busiest replica's prefill is busy (its mean requests in prefill,
    ``scaler.decider.capacity.slots``) from which the sequences it runs are not read as the engine's
    cap on the batch: a replica that computes prompts nearly all the time runs what its prefill lets
    in, not what its slots hold. 0.8, not 1: the share is a mean over the rate window, and a replica
    whose prompt queue emptied in it reads below 1 while it still queued prompts most of it."""
    kv_full_usage: float = 0.9
    """Mean KV-cache usage below which a batch that has requests waiting for a slot is read as held
    by the engine's cap (``max_num_seqs``) rather than by its cache, so the cap is measured
    (``scaler.decider.capacity.slots``). vLLM admits a request while free blocks stay above a 1% watermark,
    so a cache that holds the batch runs nearly full; a tenth below leaves room for the replicas a
    dispatch left less full."""
    expectation_tolerance: float = 0.01
    """Numerics: the late-share expectation over past errors stops once what is left of it is
    below this share of the budget (the errors are sorted largest first, the share falls with
    them): a hundredth of the budget moves the sizing only where it sits on a replica's edge."""
    exact_servers: int = 2000
    """Numerics: above this many servers Erlang C is the Halfin-Whitt approximation (within a few
    percent there, O(1)) instead of the recurrence (one step per server): thousands of slots for
    each of 1,000 ScaledObjects would otherwise cost seconds per refresh."""


DEFAULT = DeciderParams()
