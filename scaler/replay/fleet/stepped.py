"""A step-level model of vLLM V1's engine: the replay's ``step`` physics. Pure: time is passed in.

The ``fluid`` physics (``shared`` and ``separate``, ``scaler.replay.fleet.cluster``) computes each
request's times when it arrives, from a prefill rate and a decode speed per sequence: the very
figures the decider measures, so an estimator is exact there by construction. This one schedules
what vLLM V1's scheduler (``vllm/v1/core/sched/scheduler.py``) schedules, step by step, and the
decider's figures are only what the metrics show of it:

* **A step** serves the running requests first, one token for each that decodes, then fills the
  rest of ``max_num_batched_tokens`` with prefill chunks: the running requests' unfinished
  prompts in admission order, then the waiting requests, first come first served, while fewer
  than ``max_num_seqs`` run and the KV cache has blocks for the chunk. The step that computes a
  prompt's last chunk samples its first token; each step after it samples one more.
* **The KV cache** is ``kv_blocks`` blocks of 16 tokens; a sequence holds ``ceil(tokens / 16)``.
  When a step needs a block and none is free, the newest running request is preempted: its
  blocks freed, its computed tokens forgotten, put back at the head of the queue, and later
  recomputed (prompt and the tokens it had generated) before it decodes on.
* **A step's time** grows with what it computes and what it reads:

      step = base + token x (decode tokens + prefill tokens)
                  + context x (KV tokens the decoding sequences hold)
                  + attention x sum over prefill chunks of chunk x (computed before + chunk / 2)

  ``base`` is reading the weights once (and the step's fixed overhead), ``token`` the
  matrix-multiply time per token (2 x parameters FLOPs at the GPUs' effective rate),
  ``context`` reading one token's K and V for every layer, ``attention`` a prompt token attending
  to the prompt before it.

*Example* (``llama-3-70b-4xa100``): 30 sequences decoding 1,200-token contexts and one
1,155-token prompt in one step: ``27.0 + 0.240 x 1,185 + 6.7e-5 x 36,000 + 4.2e-6 x 1,155 x
577.5 = 27.0 + 284.4 + 2.4 + 2.8 = 316.6`` ms; the next steps, decoding 31, take 37 ms each.

**The metrics** are computed from the schedule as vLLM exports them (``vllm/v1/metrics/``): the
TTFT when the first token is sampled; the queue time (arrival to first scheduled) and the
prefill time (first scheduled to first token) observed when the request finishes; one
inter-token latency per decoded token, the step's time; KV usage as blocks used over blocks;
waiting as the V1 scheduler counts it (not yet scheduled, preempted ones included); prompt tokens
counted at the first token, generated tokens at each step.

**Pure decoding is jumped over.** While no prompt is being computed and no waiting request can be
admitted, every step decodes the same sequences, each step ``context x n`` longer than the one
before (``n`` sequences, each one token longer), so ``k`` steps take
``k x step_0 + context x n x k (k - 1) / 2``: the engine solves that quadratic for the step at
which something happens (a request finishes, one arrives, a block is missing), instead of
running the steps one by one. A day of traffic replays in a few minutes.

The replica profiles (``PROFILES``) take their coefficients from published vLLM measurements;
each profile's docstring says which and how.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scaler.sim.pods import Pod

BLOCK_TOKENS = 16  # vLLM's default KV block size (tokens per block, --block-size 16)
MS = 1e-3  # seconds per millisecond: the profiles are written in milliseconds


@dataclass(frozen=True, slots=True)
class Profile:
    """One replica of a named model on named GPUs under vLLM V1 (module docstring).

    Times in seconds: ``base_s`` per step, ``token_s`` per token computed, ``context_s`` per KV token
    a decoding sequence holds, ``attention_s`` per (prompt token x earlier prompt token)."""

    name: str
    model: str
    gpus: int
    base_s: float
    token_s: float
    context_s: float
    attention_s: float
    max_num_batched_tokens: int
    max_num_seqs: int
    kv_blocks: int
    source: str  # where the coefficients come from

    @property
    def prefill_tokens_per_s(self) -> float:
        """Prompt tokens per second one replica computes with nothing else to do, in full steps of
        ``max_num_batched_tokens`` (short prompts, their attention left out)."""
        m = self.max_num_batched_tokens
        return m / (self.base_s + self.token_s * m)

    @property
    def kv_tokens(self) -> int:
        """Tokens the KV cache holds."""
        return self.kv_blocks * BLOCK_TOKENS


# The profiles. Each coefficient is derived as its docstring says; the arithmetic is in
# docs/replay.md ("The step physics"), and tests/test_replay_stepped.py replays the published
# measurement each one is fitted to.
PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            # Llama 3 70B, bf16, tensor parallel 4 on 4 A100-SXM4-80GB, vLLM 0.6.0 (2024-09-07):
            # LambdaLabsML/vllm-benchmark, results/prompt_10/4xA100-80GB-SXM/
            # Meta-Llama-3-70B-Instruct_tp4_len2000.json: 10 prompts of 1,369 tokens in all,
            # sent at once, first tokens after 356 ms (median), then 29.5 ms per output token
            # (median TPOT) with ten sequences. base: 29.5 ms less ten tokens and their contexts;
            # token: (356 - 27.0) ms over the 1,369 prompt tokens of the one prefill step.
            # context: 327,680 bytes of K and V per token (80 layers x 8 KV heads x 128 x 2 x 2
            # bytes) read at 60% of 4 x 2.04 TB/s; attention: 4 x 80 x 8,192 FLOPs per pair at the
            # token's rate (141 GFLOPs a token). Scheduler: vLLM's defaults for an A100
            # (vllm/engine/arg_utils.py, get_batch_defaults: 2,048 tokens, 256 sequences).
            # KV: 0.9 x 4 x 80 GiB, less 131.4 GiB of weights and 12 GiB of activations: 144.6 GiB.
            name="llama-3-70b-4xa100",
            model="Llama 3 70B (bf16, TP4)",
            gpus=4,
            base_s=27.0 * MS,
            token_s=0.240 * MS,
            context_s=6.7e-5 * MS,
            attention_s=4.4e-6 * MS,
            max_num_batched_tokens=2048,
            max_num_seqs=256,
            kv_blocks=29_600,
            source="LambdaLabsML/vllm-benchmark 4xA100-80GB-SXM Meta-Llama-3-70B-Instruct tp4 (vLLM 0.6.0)",
        ),
        Profile(
            # Llama 3 70B, bf16, tensor parallel 4 on 4 H100-80GB, vLLM's own performance benchmark
            # (buildkite.com/vllm/performance-benchmark, latency_llama70B_tp4 on H100: 32 prompt and
            # 128 output tokens, batch 8, 2,444.5 ms end to end; throughput_llama70B_tp4: 8.86
            # requests/s of ShareGPT). token: 141 GFLOPs at half of 4 x 989 TFLOPs (0.071 ms);
            # base: the latency test's 2,444.5 ms less one 256-token prefill and 127 steps of 8
            # tokens, over 128 steps. context at 60% of 4 x 3.35 TB/s. Scheduler: vLLM's defaults for
            # GPUs of 70 GiB or more but A100 (8,192 tokens, 1,024 sequences). KV as above.
            name="llama-3-70b-4xh100",
            model="Llama 3 70B (bf16, TP4)",
            gpus=4,
            base_s=18.4 * MS,
            token_s=0.071 * MS,
            context_s=4.1e-5 * MS,
            attention_s=1.3e-6 * MS,
            max_num_batched_tokens=8192,
            max_num_seqs=1024,
            kv_blocks=29_600,
            source="vLLM performance benchmark, latency_llama70B_tp4 and throughput_llama70B_tp4 on H100",
        ),
        Profile(
            # Llama 3.1 8B, bf16, one H100-80GB, vLLM's performance benchmark (latency_llama8B_tp1 on
            # H100: 997.5 ms for 32 prompt and 128 output tokens at batch 8; throughput_llama8B_tp1:
            # 19.5 requests/s). token: 16.06 GFLOPs at half of 989 TFLOPs (0.0325 ms); base fitted to
            # the latency test as above; context: 131,072 bytes a token (32 layers x 8 x 128 x 2 x 2)
            # at 60% of 3.35 TB/s; attention: 4 x 32 x 4,096 FLOPs a pair. KV: 0.9 x 80 GiB, less
            # 15 GiB of weights and 3 GiB of activations: 54 GiB.
            name="llama-3.1-8b-1xh100",
            model="Llama 3.1 8B (bf16)",
            gpus=1,
            base_s=7.42 * MS,
            token_s=0.0325 * MS,
            context_s=6.5e-5 * MS,
            attention_s=1.06e-6 * MS,
            max_num_batched_tokens=8192,
            max_num_seqs=1024,
            kv_blocks=27_600,
            source="vLLM performance benchmark, latency_llama8B_tp1 and throughput_llama8B_tp1 on H100",
        ),
    )
}
DEFAULT_PROFILE = "llama-3-70b-4xa100"


WAITING, PREFILL, DECODE, DONE = 0, 1, 2, 3  # a request's state on an engine


class Request:
    """One request on one engine: its sizes, how far it got, and when it was first scheduled."""

    __slots__ = (
        "base",
        "computed",
        "finish_at",
        "first",
        "generated",
        "i",
        "live",
        "output",
        "prompt",
        "scheduled",
        "sent",
        "state",
        "target",
    )

    def __init__(self, i: int, sent: float, prompt: int, output: int) -> None:
        self.i = i
        self.sent = sent  # arrival at the engine
        self.prompt = max(1, prompt)
        self.output = max(1, output)
        self.target = self.prompt  # tokens to compute before decoding (more after a preemption)
        self.computed = 0
        self.generated = 0
        self.scheduled = math.nan  # first scheduled (vLLM's scheduled_ts)
        self.first = math.nan  # first token
        self.base = 0  # decoding: KV tokens = base + the engine's step counter
        self.finish_at = 0  # decoding: the step counter its last token is sampled at
        self.live = 0  # its current finish-heap entry (0: none; a preemption leaves a stale one)
        self.state = WAITING


class Sink:
    """Where an engine's events go (the replay's series); these defaults drop them."""

    def first_token(self, request: Request, t: float) -> None:
        """``request``'s first token was sampled at ``t``."""

    def finished(self, request: Request, t: float) -> None:
        """``request`` ended at ``t``."""

    def generated(self, start: float, end: float, tokens: int, step_s: float) -> None:
        """``tokens`` were decoded between ``start`` and ``end``, in steps of ``step_s`` on average
        (each token one inter-token latency of ``step_s``)."""


class Engine:
    """One replica's vLLM V1 engine (module docstring). Requests are added and the engine advanced in
    time order; ``advance(t)`` runs every step that starts before ``t``."""

    def __init__(self, profile: Profile, sink: Sink, start: float = 0.0, jump: bool = True) -> None:
        self.p = profile
        self.sink = sink
        self.jump = jump  # jump over pure decode runs in closed form (False: every step, for the tests)
        self.clock = start  # when the next step starts (the last one's end), or when work may start
        self.waiting: deque[Request] = deque()
        self.running: dict[Request, None] = {}  # admission order: the newest is preempted first
        self.prefilling: deque[Request] = deque()  # running, prompt not computed yet (admission order)
        self.decoding = 0
        self.phase = [0] * BLOCK_TOKENS  # decoding sequences by base mod 16: when each needs a block
        self.base_sum = 0  # the decoding sequences' KV tokens less decoding x count
        self.count = 0  # steps run; a decoding sequence holds base + count KV tokens
        self.finish: list[tuple[int, int, Request]] = []  # (count it ends at, live, request)
        self.used = 0  # KV blocks held
        self.preemptions = 0
        self.busy_s = 0.0  # seconds of steps run: the GPUs' busy time (DCGM's utilisation reads its rate)
        # Until when no request can end or start waiting again without another one arriving: the end
        # of the pure decode run under way (``advance`` recomputes it). A dispatch that reads how
        # many requests each engine holds need not run an engine to an instant before it.
        self.steady_until = -math.inf
        self._entries = 0  # finish-heap entries made: each entry's tie-break and validity mark
        # (a step's start, then waiting, running and blocks after it), kept only while ``record`` is a
        # list: a draining pod runs ahead of the replay's clock and is read back at its ticks.
        self.record: list[tuple[float, int, int, int]] | None = None

    # ---- what is read of it -------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Whether the engine has work."""
        return bool(self.running or self.waiting)

    @property
    def kv_usage(self) -> float:
        """Blocks held over blocks (vLLM's ``kv_cache_usage_perc``, 0-1)."""
        return self.used / self.p.kv_blocks

    # ---- requests -----------------------------------------------------------------------------

    def add(self, request: Request, now: float) -> None:
        """A request arrives at ``now``: it waits for the next step to start (the engine first runs the
        steps that start before ``now``)."""
        self.advance(now)
        if not self.busy:
            self.clock = max(self.clock, now)
        self.waiting.append(request)

    # ---- the steps ----------------------------------------------------------------------------

    def advance(self, until: float) -> None:
        """Run every step that starts before ``until``."""
        while (self.running or self.waiting) and self.clock < until:
            jumps = self.jump and self.decoding and not self.prefilling and not self._admissible()
            if jumps and self._decode_run(until):
                continue
            self._step()
        self.steady_until = self._steady_until() if self.jump else self.clock

    def _steady_until(self) -> float:
        """When the pure decode run from now ends (``steady_until``); now where none is under way."""
        if not self.decoding or self.prefilling or self._admissible():
            return self.clock
        steps = self._steps_to_finish()
        steps = min(steps, self._steps_with_blocks(steps))
        if steps <= 0:
            return self.clock
        p, n = self.p, self.decoding
        first = p.base_s + p.token_s * n + p.context_s * (self.base_sum + n * self.count)
        half = p.context_s * n / 2.0
        return self.clock + (steps - 1) * first + half * (steps - 1) * (steps - 2)

    def drain(self) -> float:
        """Run to the last request's end (no more will come) and say when that is."""
        self.advance(math.inf)
        return self.clock

    def _decode_blocks(self) -> int:
        """Blocks the decoding sequences take in the next step."""
        return self.phase[-self.count % BLOCK_TOKENS] if self.decoding else 0

    def _admissible(self) -> bool:
        """Whether the next step could admit the waiting head: a slot, budget and blocks for its chunk."""
        if not self.waiting or len(self.running) >= self.p.max_num_seqs:
            return False
        budget = self.p.max_num_batched_tokens - self.decoding
        if budget <= 0:
            return False
        head = self.waiting[0]
        need = _blocks(min(head.target, budget))
        return self.used + need + self._decode_blocks() <= self.p.kv_blocks

    def _decode_run(self, until: float) -> bool:
        """Jump over pure decode steps (module docstring): up to the first that ends a sequence, the
        last the free blocks allow, or the last that starts before ``until``. False when not one step
        can run so (a block is missing: ``_step`` preempts)."""
        n, p = self.decoding, self.p
        steps = self._steps_to_finish()
        steps = min(steps, self._steps_with_blocks(steps))
        if steps <= 0:
            return False
        first = p.base_s + p.token_s * n + p.context_s * (self.base_sum + n * self.count)
        half = p.context_s * n / 2.0  # each step reads one more token per sequence
        if until != math.inf:
            steps = min(steps, _steps_starting_before(until - self.clock, first, half))
        took = steps * first + half * steps * (steps - 1)
        self.used += self._blocks_over(steps)
        start = self.clock
        self.count += steps
        self.clock = start + took
        self.busy_s += took
        self.sink.generated(start, self.clock, n * steps, took / steps)
        self._finish_due()
        if self.record is not None:
            self.record.append((self.clock - took / steps, len(self.waiting), len(self.running), self.used))
        return True

    def _steps_to_finish(self) -> int:
        """Decode steps until the first decoding sequence ends."""
        heap = self.finish
        while heap and heap[0][2].live != heap[0][1]:
            heapq.heappop(heap)
        return heap[0][0] - self.count if heap else 0

    def _steps_with_blocks(self, wanted: int) -> int:
        """How many of ``wanted`` pure decode steps the free blocks last: a cycle of 16 takes a block per
        sequence."""
        n = self.decoding
        free = self.p.kv_blocks - self.used
        if free >= n * (wanted // BLOCK_TOKENS + 1):
            return wanted
        cycles = free // n
        left = free - cycles * n
        phase, count = self.phase, self.count
        for j in range(BLOCK_TOKENS):
            need = phase[-(count + j) % BLOCK_TOKENS]
            if need > left:
                return cycles * BLOCK_TOKENS + j
            left -= need
        return (cycles + 1) * BLOCK_TOKENS

    def _blocks_over(self, steps: int) -> int:
        """The blocks ``steps`` pure decode steps from now take."""
        whole, rest = divmod(steps, BLOCK_TOKENS)
        phase, count = self.phase, self.count
        return whole * self.decoding + sum(phase[-(count + j) % BLOCK_TOKENS] for j in range(rest))

    def _step(self) -> None:
        """One step (module docstring), preempting the newest request where a block is missing."""
        p = self.p
        while self.decoding and self.used + self._decode_blocks() > p.kv_blocks:
            self._preempt_newest()
        budget = p.max_num_batched_tokens - self.decoding
        chunks: list[tuple[Request, int]] = []
        budget = self._running_chunks(budget, chunks)
        self._admit(budget, chunks)
        n = self.decoding
        if not chunks and not n:
            # The head needs more blocks than the whole cache: it can never run. Not reached with
            # the profiles' caches and the traces' sizes; ended here rather than spinning.
            self.waiting.popleft().state = DONE
            return
        prefill = 0
        attention = 0.0
        for req, chunk in chunks:
            prefill += chunk
            attention += chunk * (req.computed + chunk / 2.0)
        took = (
            p.base_s
            + p.token_s * (n + prefill)
            + p.context_s * (self.base_sum + n * self.count)
            + p.attention_s * attention
        )
        self.used += self._decode_blocks()
        start = self.clock
        self.count += 1
        self.clock = end = start + took
        self.busy_s += took
        sampled = n + sum(self._computed(req, chunk, end) for req, chunk in chunks)
        if sampled:
            self.sink.generated(start, end, sampled, took)
        self._finish_due()
        if self.record is not None:
            self.record.append((start, len(self.waiting), len(self.running), self.used))

    def _running_chunks(self, budget: int, chunks: list[tuple[Request, int]]) -> int:
        """The running requests' unfinished prompts, in admission order, into ``chunks``, preempting
        the newest where a block is missing; the budget left."""
        p = self.p
        for req in list(self.prefilling):
            if budget <= 0:
                break
            if req.state != PREFILL:
                continue  # preempted to make room for an earlier one
            chunk = min(req.target - req.computed, budget)
            need = _blocks(req.computed + chunk) - _blocks(req.computed)
            while req.state == PREFILL and self.used + need + self._decode_blocks() > p.kv_blocks:
                self._preempt_newest()
            if req.state != PREFILL:
                continue
            self.used += need
            chunks.append((req, chunk))
            budget -= chunk
        return budget

    def _admit(self, budget: int, chunks: list[tuple[Request, int]]) -> None:
        """The waiting requests, first come first served, while a slot, the budget and blocks last."""
        p = self.p
        while self.waiting and budget > 0 and len(self.running) < p.max_num_seqs:
            req = self.waiting[0]
            chunk = min(req.target, budget)
            need = _blocks(chunk)
            if self.used + need + self._decode_blocks() > p.kv_blocks:
                break
            self.waiting.popleft()
            self.used += need
            self.running[req] = None
            self.prefilling.append(req)
            req.state = PREFILL
            if math.isnan(req.scheduled):
                req.scheduled = self.clock
            chunks.append((req, chunk))
            budget -= chunk

    def _computed(self, req: Request, chunk: int, end: float) -> int:
        """``req``'s ``chunk`` computed by a step ending at ``end``; the tokens it sampled past a first
        one (a recomputation's step samples the next token; a prompt's last chunk its first)."""
        req.computed += chunk
        if req.computed < req.target:
            return 0
        self.prefilling.remove(req)
        sampled = 0
        if math.isnan(req.first):
            req.first = end
            req.generated = 1
            self.sink.first_token(req, end)
        else:
            req.generated += 1
            sampled = 1
        if req.generated >= req.output:
            del self.running[req]
            self.used -= _blocks(req.computed)
            self._end(req, end)
        else:
            self._start_decoding(req)
        return sampled

    def _start_decoding(self, req: Request) -> None:
        """``req``'s prompt is computed: from the next step it decodes a token a step."""
        req.state = DECODE
        req.base = req.computed - self.count
        req.finish_at = self.count + req.output - req.generated
        self._entries += 1
        req.live = self._entries
        self.phase[req.base % BLOCK_TOKENS] += 1
        self.base_sum += req.base
        self.decoding += 1
        heapq.heappush(self.finish, (req.finish_at, req.live, req))

    def _stop_decoding(self, req: Request) -> None:
        """``req`` decodes no more: its blocks go, and its finish entry is stale."""
        self.used -= _blocks(req.base + self.count)
        self.phase[req.base % BLOCK_TOKENS] -= 1
        self.base_sum -= req.base
        self.decoding -= 1
        req.live = 0

    def _finish_due(self) -> None:
        """End the decoding sequences whose last token the step just run sampled."""
        heap, count = self.finish, self.count
        while heap and heap[0][0] <= count:
            _, live, req = heapq.heappop(heap)
            if req.live != live:
                continue
            req.generated = req.output
            self._stop_decoding(req)
            del self.running[req]
            self._end(req, self.clock)

    def _end(self, req: Request, t: float) -> None:
        req.state = DONE
        self.sink.finished(req, t)

    def _preempt_newest(self) -> None:
        """Preempt the newest running request (vLLM V1 pops the running list's last): its blocks go
        and it waits at the head of the queue to recompute its prompt and the tokens it generated."""
        req, _ = self.running.popitem()
        if req.state == DECODE:
            req.generated = req.output - (req.finish_at - self.count)
            self._stop_decoding(req)
        else:
            self.used -= _blocks(req.computed)
            self.prefilling.remove(req)
        req.target = req.prompt + req.generated
        req.computed = 0
        req.state = WAITING
        self.waiting.appendleft(req)
        self.preemptions += 1


def _steps_starting_before(span: float, first: float, half: float) -> int:
    """How many steps of a pure decode run start within ``span`` seconds: the k-th (from 0) starts at
    ``k x first + half x k (k - 1)``."""
    if span <= 0:
        return 0
    if half > 0:
        b = first - half
        k = math.floor((-b + math.sqrt(b * b + 4.0 * half * span)) / (2.0 * half))
    else:
        k = math.floor(span / first)
    k = max(0, k)
    while k > 0 and k * first + half * k * (k - 1) >= span:
        k -= 1
    while (k + 1) * first + half * (k + 1) * k < span:
        k += 1
    return k + 1


def _blocks(tokens: int) -> int:
    """Blocks a sequence of ``tokens`` holds."""
    return -(-tokens // BLOCK_TOKENS)


# ---- the fleet: pods that run an engine each ---------------------------------------------------


class StepPod(Pod):
    """One pod whose requests a vLLM V1 engine serves (``Engine``), with what its metrics read."""

    __slots__ = ("drained", "engine", "prefill_s")

    def __init__(self, index: int, now: float, profile: Profile, sink: Sink) -> None:
        super().__init__(index, now)
        self.engine = Engine(profile, _PodSink(self, sink), now)
        self.prefill_s = 0.0  # prefill seconds observed (at each request's end): its histogram's _sum
        self.drained: list[tuple[float, int, int, int]] | None = None  # the record once draining

    def add(self, request: Request, now: float) -> None:
        """``request`` arrives at ``now``; a pod not Ready yet starts it when it is."""
        engine = self.engine
        if not engine.busy:
            engine.clock = max(engine.clock, self.ready_at if self.ready_at > now else now)
        engine.add(request, now)

    def holds_requests(self) -> bool:
        """Whether requests were given to the pod that it has not finished."""
        return self.engine.busy

    def last_request_end(self, now: float) -> float:
        """Run the pod's engine to its last request's end (it takes no new one: it drains), keeping
        what each step leaves so that it reads as it would have at each later instant."""
        engine = self.engine
        engine.advance(now)
        engine.record = self.drained = [(now, len(engine.waiting), len(engine.running), engine.used)]
        end = engine.drain()
        engine.record = None
        return max(now, end)

    def _at(self, now: float) -> tuple[int, int, int]:
        """Waiting, running and blocks at ``now``: the engine's own, or the drain's record."""
        if self.drained is None:
            engine = self.engine
            return len(engine.waiting), len(engine.running), engine.used
        record = self.drained
        index = bisect_right(record, (now, math.inf, math.inf, math.inf)) - 1
        _, waiting, running, used = record[max(0, index)]
        return waiting, running, used

    def waiting(self, now: float) -> int:
        """Requests not scheduled yet (vLLM V1's ``num_requests_waiting``)."""
        return self._at(now)[0]

    def running(self, now: float) -> int:
        """Requests scheduled and not finished (``num_requests_running``)."""
        return self._at(now)[1]

    def outstanding(self, now: float) -> int:
        """Requests given to the pod and not finished."""
        waiting, running, _ = self._at(now)
        return waiting + running

    def kv_usage(self, now: float) -> float:
        """The KV cache's usage (0-1)."""
        return self._at(now)[2] / self.engine.p.kv_blocks


class _PodSink(Sink):
    """A pod's events: the prefill seconds its own histogram sums, then the fleet's sink."""

    __slots__ = ("pod", "sink")

    def __init__(self, pod: StepPod, sink: Sink) -> None:
        self.pod = pod
        self.sink = sink

    def first_token(self, request: Request, t: float) -> None:
        self.sink.first_token(request, t)

    def finished(self, request: Request, t: float) -> None:
        if not math.isnan(request.first):
            self.pod.prefill_s += request.first - request.scheduled
        self.sink.finished(request, t)

    def generated(self, start: float, end: float, tokens: int, step_s: float) -> None:
        self.sink.generated(start, end, tokens, step_s)


def saturation(profile: Profile, prompts: Sequence[int], outputs: Sequence[int]) -> tuple[float, float]:
    """One replica saturated with these requests: the prompt tokens per second it computes when that
    is all it does (every request one token long), and the sequences it runs at once when requests
    always wait (the mean of the running count over the steps of the second half). These are the
    ``step`` physics' truths for the prefill rate and the batch slots (docs/replay.md)."""
    sizes = list(zip(prompts, outputs, strict=True))
    engine = Engine(profile, Sink())
    for i, (prompt, _) in enumerate(sizes):
        engine.add(Request(i, 0.0, prompt, 1), 0.0)
    took = engine.drain()
    prefill = sum(max(1, p) for p, _ in sizes) / took if took > 0 else profile.prefill_tokens_per_s
    engine = Engine(profile, Sink())
    engine.record = []
    for i, (prompt, output) in enumerate(sizes):
        engine.add(Request(i, 0.0, prompt, output), 0.0)
    end = engine.drain()
    record = [r for r in engine.record if r[1] > 0 and r[0] >= end / 2.0] or engine.record
    slots = sum(r[2] for r in record) / len(record) if record else 1.0
    return prefill, slots


def request_seconds(profile: Profile, prompts: Iterable[float], outputs: Iterable[float]) -> list[float]:
    """Each request's share of a replica's time as though its steps' base were shared by an unbounded
    batch: its prompt's tokens (and their attention), and each output token with the context it
    reads. A lower bound on the replicas the requests keep busy, the clairvoyant's first schedule
    (``scaler.replay.compare``)."""
    p = profile
    out = []
    for prompt, output in zip(prompts, outputs, strict=True):
        context = prompt + output / 2.0
        out.append(
            prompt * (p.token_s + p.attention_s * prompt / 2.0) + output * (p.token_s + p.context_s * context)
        )
    return out
