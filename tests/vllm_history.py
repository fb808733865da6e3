"""A known week of a vLLM fleet's metrics, as OpenMetrics for ``promtool tsdb create-blocks-from``.

Written every ``scrape_s`` from per-interval quantities known by construction, so a reader's
result can be checked against them:

* **arrivals** (requests/s): a daytime hump on weekdays (0.4 to 1.8/s, peak at 14:00 UTC), a
  lower one at weekends, and on Tuesday 12:00-12:20 a burst 2.5/s above it, more than the
  fleet serves: a queue builds and drains after it;
* **pods**: each hour, enough for the hour's peak at 0.45 requests/s a pod (2 to 6); each pod
  serves 0.5/s at most. A pod that starts writes a first sample of zeros (its first scrape,
  before traffic); one that stops writes no more samples. A new pod has a new name, as a
  ReplicaSet's do (``vllm-llama-<hash>-<n>``), and kube-state-metrics' series for it (a sample
  every ``KSM_SCRAPE_S``): created, scheduled ``PENDING_S`` later and Ready ``STARTUP_S`` after
  that, owned by the ReplicaSet ``RS`` of the Deployment ``DEPLOYMENT``;
* the **replica** each pod is (``PREFILL_TOKENS_S``, ``SLOTS``, ``DECODE_TOKENS_S``, below): a
  first token takes the prompt's prefill time when nobody waits, a sequence holds its batch slot
  for its prefill and decode, ``vllm:num_requests_running`` is what the slots hold by Little's
  law (all of them while requests wait) and ``vllm:kv_cache_usage_perc`` that over the slots;
* **served** first tokens: the arrivals plus what waited, up to what the pods serve; the
  queue holds the rest, half of it in llm-d's router (``llm_d_epp_flow_control_queue_size``
  of the pool ``POOL``, for the model, as the EPP labels it), half in the servers'
  (``vllm:num_requests_waiting``);
* **tokens per request**: prompt ``900 + 300 sin(2 pi h / 24)``, output ``220 + 60 cos(2 pi h / 24)``
  (h the hour of the day, UTC), counted when the request is served;
* the **TTFT histogram**: the prefill time on average (0.2 to 0.4 s), 3 s while requests wait;
* a 20-minute **outage** on Thursday from 03:00 UTC, with no sample at all (the fleet served on);
* a second model, ``mistral-7b``, on a pod of its own at 5 requests/s, which a ``labelSelector``
  on ``model_name="llama-70b"`` must leave out.

``Truth`` holds, per window of ``window_s``, what happened: arrivals/s, and tokens per request
served.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

START = datetime(2026, 11, 23, tzinfo=UTC)  # a Monday
DAYS = 7
LEAD_S = 600  # samples from 10 minutes before START, so the first window has a rate
MODEL = "llama-70b"
POOL = "llama-pool"  # llm-d's InferencePool in front of the llama pods
ROUTER_SHARE = 0.5  # of the requests waiting, the share the router holds
OTHER = "mistral-7b"
PER_POD = 0.5  # requests/s a pod serves at most
# The replica, as `scaler replay --prometheus` must measure it: it computes PREFILL_TOKENS_S prompt
# tokens a second, runs SLOTS sequences at once, and each decodes DECODE_TOKENS_S tokens a second
# whatever prefill does (no slowdown). At the week's mean sizes (900 prompt and 220 output tokens) a
# sequence holds its slot for 900 / 3000 + 219 / 14 = 15.9 s: 8 slots serve 0.50 requests/s, PER_POD.
PREFILL_TOKENS_S = 3000.0
SLOTS = 8
DECODE_TOKENS_S = 14.0
# kube-state-metrics: the pods' Deployment and ReplicaSet, and each pod's start.
NAMESPACE = "inference"
DEPLOYMENT = "vllm-llama"
RS = f"{DEPLOYMENT}-5d8f7c9b4"
PENDING_S = 4.0  # created -> scheduled
STARTUP_S = 240.0  # scheduled -> Ready: what the replay's cold start is, measured from these pods
KSM_SCRAPE_S = 1800  # kube-state-metrics' samples, every 30 minutes: a pod's times do not change
OUTAGE = (START + timedelta(days=3, hours=3), timedelta(minutes=20))
BURST = (START + timedelta(days=1, hours=12), timedelta(minutes=20), 2.5)
# A subset of vLLM's time_to_first_token_seconds buckets, with the share of first tokens within each.
BUCKETS = ("0.5", "1.0", "2.5", "+Inf")
FAST = (0.9, 0.99, 1.0, 1.0)  # mean 0.2-0.4 s: the prefill time
SLOW = (0.05, 0.2, 0.5, 1.0)  # mean 3 s
FAST_MEAN_S, SLOW_MEAN_S = 0.3, 3.0  # the other model's first tokens; this one's while requests wait


def arrivals(t: float) -> float:
    """Requests/s at ``t`` seconds after START."""
    day, hour = int(t // 86400), (t % 86400) / 3600
    hump = math.sin(math.pi * (hour - 7) / 14) ** 2 if 7 <= hour <= 21 else 0.0
    rate = 0.4 + 1.4 * hump if day % 7 < 5 else 0.3 + 0.5 * hump
    burst_start = (BURST[0] - START).total_seconds()
    if burst_start <= t < burst_start + BURST[1].total_seconds():
        rate += BURST[2]
    return rate


def prompt_tokens(t: float) -> float:
    """Mean prompt tokens of the requests served at ``t``."""
    return 900 + 300 * math.sin(2 * math.pi * (t % 86400) / 86400)


def output_tokens(t: float) -> float:
    """Mean output tokens of the requests served at ``t``."""
    return 220 + 60 * math.cos(2 * math.pi * (t % 86400) / 86400)


def pods_for_hour(hour_start: float) -> int:
    """Pods in the hour from ``hour_start``: the hour's peak at 0.45/s a pod, 2 to 6."""
    peak = max(arrivals(hour_start + s) for s in range(0, 3600, 60))
    return max(2, min(6, math.ceil(peak / 0.45)))


@dataclass
class Truth:
    """Per window of ``window_s`` from START: arrivals/s, tokens per request served, pods, served."""

    window_s: float
    arrivals: list[float] = field(default_factory=list)
    prompt: list[float] = field(default_factory=list)
    output: list[float] = field(default_factory=list)
    served: list[float] = field(default_factory=list)
    pods: list[int] = field(default_factory=list)

    def outage_windows(self) -> range:
        """The windows a rate over one window cannot see, for the outage (no samples in them)."""
        first = int((OUTAGE[0] - START).total_seconds() // self.window_s)
        return range(first, first + int(OUTAGE[1].total_seconds() // self.window_s) + 1)


def in_service_s(t: float) -> float:
    """Seconds a request served at ``t`` holds its batch slot: its prefill, then its decode."""
    return prompt_tokens(t) / PREFILL_TOKENS_S + (output_tokens(t) - 1) / DECODE_TOKENS_S


@dataclass
class _Pod:
    name: str
    counters: list[float]  # prompt, generation, count, sum, then one per bucket
    created: float = 0.0  # unix seconds (kube_pod_created)
    running: float = 0.0  # sequences in its batch slots now


def week(days: int = DAYS, scrape_s: int = 30, window_s: int = 60) -> tuple[str, Truth]:
    """``days`` of the fleet's series, a sample every ``scrape_s``, as OpenMetrics text; and the
    truth per window of ``window_s`` (a multiple of ``scrape_s``)."""
    families: dict[str, list[str]] = {
        "vllm:prompt_tokens": ["# TYPE vllm:prompt_tokens counter"],
        "vllm:generation_tokens": ["# TYPE vllm:generation_tokens counter"],
        "vllm:num_requests_waiting": ["# TYPE vllm:num_requests_waiting gauge"],
        "vllm:num_requests_running": ["# TYPE vllm:num_requests_running gauge"],
        "vllm:time_to_first_token_seconds": ["# TYPE vllm:time_to_first_token_seconds histogram"],
        "vllm:kv_cache_usage_perc": ["# TYPE vllm:kv_cache_usage_perc gauge"],
        "llm_d_epp_flow_control_queue_size": ["# TYPE llm_d_epp_flow_control_queue_size gauge"],
        "kube_pod_created": ["# TYPE kube_pod_created gauge"],
        "kube_pod_status_scheduled_time": ["# TYPE kube_pod_status_scheduled_time gauge"],
        "kube_pod_status_ready_time": ["# TYPE kube_pod_status_ready_time gauge"],
        "kube_pod_owner": ["# TYPE kube_pod_owner gauge"],
        "kube_replicaset_owner": ["# TYPE kube_replicaset_owner gauge"],
    }
    t0 = int(START.timestamp())
    outage_from = (OUTAGE[0] - START).total_seconds()
    outage_to = outage_from + OUTAGE[1].total_seconds()
    truth = Truth(window_s)
    windows = days * 86400 // window_s
    per_window = window_s // scrape_s
    acc = [0.0, 0.0, 0.0, 0.0]  # arrivals, served, prompt tokens, output tokens in this window
    pods: list[_Pod] = []
    born = 0
    queue = 0.0
    other = _Pod(f"{OTHER}-0", [0.0] * (4 + len(BUCKETS)))

    def write(pod: _Pod, model: str, t: int, waiting: float, running: float, kv: float) -> None:
        labels = f'model_name="{model}",pod="{pod.name}"'
        c = pod.counters
        families["vllm:prompt_tokens"].append(f"vllm:prompt_tokens_total{{{labels}}} {c[0]:.3f} {t}")
        families["vllm:generation_tokens"].append(f"vllm:generation_tokens_total{{{labels}}} {c[1]:.3f} {t}")
        families["vllm:num_requests_waiting"].append(
            f"vllm:num_requests_waiting{{{labels}}} {waiting:.6f} {t}"
        )
        families["vllm:num_requests_running"].append(
            f"vllm:num_requests_running{{{labels}}} {running:.3f} {t}"
        )
        families["vllm:kv_cache_usage_perc"].append(f"vllm:kv_cache_usage_perc{{{labels}}} {kv:.6f} {t}")
        ttft = families["vllm:time_to_first_token_seconds"]
        for le, value in zip(BUCKETS, c[4:], strict=True):
            ttft.append(f'vllm:time_to_first_token_seconds_bucket{{{labels},le="{le}"}} {value:.3f} {t}')
        ttft.append(f"vllm:time_to_first_token_seconds_count{{{labels}}} {c[2]:.3f} {t}")
        ttft.append(f"vllm:time_to_first_token_seconds_sum{{{labels}}} {c[3]:.3f} {t}")

    def kube_state(pods: list[_Pod], t: int) -> None:
        """kube-state-metrics' series at ``t``: the Deployment's ReplicaSet, and each of its pods."""
        families["kube_replicaset_owner"].append(
            f'kube_replicaset_owner{{namespace="{NAMESPACE}",replicaset="{RS}",owner_kind="Deployment",'
            f'owner_name="{DEPLOYMENT}",owner_is_controller="true"}} 1 {t}'
        )
        for pod in pods:
            labels = f'namespace="{NAMESPACE}",pod="{pod.name}"'
            families["kube_pod_created"].append(f"kube_pod_created{{{labels}}} {pod.created:.0f} {t}")
            scheduled = pod.created + PENDING_S
            families["kube_pod_status_scheduled_time"].append(
                f"kube_pod_status_scheduled_time{{{labels}}} {scheduled:.0f} {t}"
            )
            families["kube_pod_status_ready_time"].append(
                f"kube_pod_status_ready_time{{{labels}}} {scheduled + STARTUP_S:.0f} {t}"
            )
            owner = f'owner_kind="ReplicaSet",owner_name="{RS}",owner_is_controller="true"'
            families["kube_pod_owner"].append(f"kube_pod_owner{{{labels},{owner}}} 1 {t}")

    for i in range(-LEAD_S // scrape_s, days * 86400 // scrape_s + 1):
        t = i * scrape_s  # seconds after START; the interval [t, t + scrape_s) follows the sample
        wanted = pods_for_hour(t - t % 3600)
        stopping = pods[wanted:]
        pods = pods[:wanted]
        while len(pods) < wanted:
            # Ready as it joins: created one cold start before.
            created = t0 + t - STARTUP_S - PENDING_S
            pods.append(_Pod(f"{RS}-{born:05d}", [0.0] * (4 + len(BUCKETS)), created))
            born += 1
        # The sample at t: counters through the last interval (a stopping pod's last one, a new
        # pod's zeros), the queue now, split over the pods that serve next, the sequences in their
        # slots (none in a new pod's).
        if not outage_from < t < outage_to:
            for pod in stopping:
                write(pod, MODEL, t0 + t, 0.0, 0.0, 0.0)
            for pod in pods:
                waiting = (1 - ROUTER_SHARE) * queue / len(pods)
                write(pod, MODEL, t0 + t, waiting, pod.running, pod.running / SLOTS)
            write(other, OTHER, t0 + t, 0.0, 20.0, 0.5)
            if t % KSM_SCRAPE_S == 0:
                kube_state(pods, t0 + t)
            router = f'llm_d_epp_flow_control_queue_size{{inference_pool="{POOL}",model_name="{MODEL}"}}'
            families["llm_d_epp_flow_control_queue_size"].append(
                f"{router} {ROUTER_SHARE * queue:.6f} {t0 + t}"
            )
        if t >= days * 86400:
            break
        mid = t + scrape_s / 2
        arrived = arrivals(mid) * scrape_s
        served = min(len(pods) * PER_POD * scrape_s, queue + arrived)
        p, o = prompt_tokens(mid), output_tokens(mid)
        waits = queue + arrived - served > 1e-9
        shares, mean_s = (SLOW, SLOW_MEAN_S) if waits else (FAST, p / PREFILL_TOKENS_S)
        queue = queue + arrived - served
        for pod in pods:
            n = served / len(pods)
            # Little's law: the sequences its slots hold; all of them while requests wait.
            pod.running = SLOTS if waits else min(SLOTS, n / scrape_s * in_service_s(mid))
            c = pod.counters
            c[0] += n * p
            c[1] += n * o
            c[2] += n
            c[3] += n * mean_s
            for k, share in enumerate(shares):
                c[4 + k] += n * share
        n = 5.0 * scrape_s
        c = other.counters
        for k, v in enumerate((n * 3000, n * 50, n, n * FAST_MEAN_S, *(n * s for s in FAST))):
            c[k] += v
        if t >= 0:
            acc = [acc[0] + arrived, acc[1] + served, acc[2] + served * p, acc[3] + served * o]
            if (i + 1) % per_window == 0 and len(truth.arrivals) < windows:
                truth.arrivals.append(acc[0] / window_s)
                truth.served.append(acc[1] / window_s)
                truth.prompt.append(acc[2] / acc[1])
                truth.output.append(acc[3] / acc[1])
                truth.pods.append(len(pods))
                acc = [0.0, 0.0, 0.0, 0.0]
    lines = [line for family in families.values() for line in family]
    return "\n".join(lines) + "\n", truth
