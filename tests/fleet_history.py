"""An hour and more of several vLLM models' series, as OpenMetrics for ``promtool tsdb create-blocks-from``.

For the warm-up's tests (``tests/test_warmup.py``) and the restart benchmark (``benchmarks/restart.py``).
Model ``m`` runs two pods labelled ``model_name="model-<m>"``, ``namespace="team-<m mod 2>"``; each
pod's load follows ``load(t) = 1 + 0.5 sin(2 pi k / 240 + m)`` (``k`` the scrape, a 1-hour cycle at
15 s): 2 load requests/s of 1,000 prompt and 200 output tokens, 8 load running, a KV cache 0.3 load
used, TTFTs of 0.3 load s on average and inter-token gaps of 0.02 + 0.01 load s, with the bucket
shares below (so the ITL at the 99.5th percentile is ``0.1 + 0.15 x 0.045 / 0.05 = 0.235`` s).
"""

from __future__ import annotations

import math

SCRAPE_S = 15
BUCKETS = ("0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "+Inf")
TTFT_SHARES = (0.0, 0.2, 0.7, 0.95, 0.99, 1.0, 1.0)
ITL_SHARES = (0.6, 0.95, 1.0, 1.0, 1.0, 1.0, 1.0)
ITL_P995_S = 0.235


def load(m: int, k: int) -> float:
    """Model ``m``'s load at scrape ``k``."""
    return 1.0 + 0.5 * math.sin(2 * math.pi * k / 240 + m)


def itl_mean(m: int, k: int) -> float:
    """Model ``m``'s mean inter-token gap at scrape ``k``, in seconds."""
    return 0.02 + 0.01 * load(m, k)


def history(models: int, end: int, minutes: int = 75) -> str:
    """``minutes`` of ``models`` models' series ending at ``end`` (Unix seconds), a scrape every 15 s."""
    kinds = {
        "vllm:prompt_tokens": "counter",
        "vllm:generation_tokens": "counter",
        "vllm:num_requests_waiting": "gauge",
        "vllm:num_requests_running": "gauge",
        "vllm:kv_cache_usage_perc": "gauge",
        "vllm:time_to_first_token_seconds": "histogram",
        "vllm:inter_token_latency_seconds": "histogram",
    }
    lines: dict[str, list[str]] = {n: [f"# TYPE {n} {kind}"] for n, kind in kinds.items()}
    steps = minutes * 60 // SCRAPE_S
    for m in range(models):
        for p in range(2):
            labels = f'model_name="model-{m}",namespace="team-{m % 2}",pod="model-{m}-{p}"'
            prompt = generation = requests = gaps = ttft_sum = itl_sum = 0.0
            for k in range(steps + 1):
                t = end - (steps - k) * SCRAPE_S
                x = load(m, k)
                prompt += 2 * x * 1000 * SCRAPE_S
                generation += 2 * x * 200 * SCRAPE_S
                requests += 2 * x * SCRAPE_S
                gaps += 2 * x * 200 * SCRAPE_S
                ttft_sum += 2 * x * SCRAPE_S * 0.3 * x
                itl_sum += 2 * x * 200 * SCRAPE_S * itl_mean(m, k)
                lines["vllm:prompt_tokens"].append(f"vllm:prompt_tokens_total{{{labels}}} {prompt:.1f} {t}")
                lines["vllm:generation_tokens"].append(
                    f"vllm:generation_tokens_total{{{labels}}} {generation:.1f} {t}"
                )
                waiting = max(0.0, 10 * (x - 1.2))
                lines["vllm:num_requests_waiting"].append(
                    f"vllm:num_requests_waiting{{{labels}}} {waiting:.2f} {t}"
                )
                lines["vllm:num_requests_running"].append(
                    f"vllm:num_requests_running{{{labels}}} {8 * x:.2f} {t}"
                )
                lines["vllm:kv_cache_usage_perc"].append(
                    f"vllm:kv_cache_usage_perc{{{labels}}} {0.3 * x:.3f} {t}"
                )
                for family, count, total, shares in (
                    ("vllm:time_to_first_token_seconds", requests, ttft_sum, TTFT_SHARES),
                    ("vllm:inter_token_latency_seconds", gaps, itl_sum, ITL_SHARES),
                ):
                    out = lines[family]
                    for le, share in zip(BUCKETS, shares, strict=True):
                        out.append(f'{family}_bucket{{{labels},le="{le}"}} {count * share:.1f} {t}')
                    out.append(f"{family}_count{{{labels}}} {count:.1f} {t}")
                    out.append(f"{family}_sum{{{labels}}} {total:.4f} {t}")
    return "\n".join(line for family in lines.values() for line in family) + "\n"
