"""The metadata contract: every documented key, its rules, and errors that name every bad key."""

from __future__ import annotations

import pytest

from scaler.config import ALIASES, CUSTOM_QUERY_KEYS, KEDA_KEYS, MetadataError, parse_metadata


def test_cold_start_auto_is_unset() -> None:
    """``coldStartSeconds: auto`` means the same as leaving it out: measure it."""
    assert parse_metadata({"coldStartSeconds": "auto"}).cold_start_seconds is None
    assert parse_metadata({"coldStartSeconds": " AUTO "}).cold_start_seconds is None


def test_defaults_from_empty_metadata() -> None:
    """Empty metadata gives vllm, 1..100 replicas, 0.8 utilization, GPU check on, no windows."""
    policy = parse_metadata({})
    assert policy.engine == "vllm"
    assert policy.min_replicas == 1
    assert policy.max_replicas == 100
    assert policy.target_utilization == 0.8
    assert policy.cold_start_seconds is None  # unset: measured from the pods, 180 s until then
    assert policy.gpu_check is True
    assert policy.max_pending_replicas == 0
    assert policy.gpus_per_replica is None
    assert policy.windows == ()
    assert not policy.token_capacity_known


@pytest.mark.parametrize(
    ("key", "value", "field", "expected"),
    [
        ("engine", "sglang", "engine", "sglang"),
        ("engine", "triton", "engine", "triton"),
        ("labelSelector", 'model_name="llama"', "label_selector", 'model_name="llama"'),
        ("prometheusAddress", "http://prom:9090/", "prometheus_address", "http://prom:9090"),
        ("targetQueuePerReplica", "2.5", "target_queue_per_replica", 2.5),
        ("promptTokensPerSecondPerReplica", "9000", "prompt_tokens_per_second_per_replica", 9000.0),
        ("generationTokensPerSecondPerReplica", "1800", "generation_tokens_per_second_per_replica", 1800.0),
        ("targetUtilization", "1", "target_utilization", 1.0),
        ("coldStartSeconds", "900", "cold_start_seconds", 900.0),
        ("minReplicas", "3", "min_replicas", 3),
        ("maxReplicas", "40", "max_replicas", 40),
        ("timezone", "Europe/Paris", "timezone", "Europe/Paris"),
        ("gpuCheck", "false", "gpu_check", False),
        ("gpuCheckFailure", "closed", "gpu_check_failure", "closed"),
        ("gpusPerReplica", "2", "gpus_per_replica", 2),
        ("maxPendingReplicas", "2", "max_pending_replicas", 2),
        ("maxStalenessSeconds", "120", "max_staleness_seconds", 120.0),
        ("ttftObjectiveSeconds", "1.5", "ttft_objective_seconds", 1.5),
        ("ttftObjectivePercentile", "99", "ttft_objective_percentile", 99.0),
    ],
)
def test_each_key_parses(key: str, value: str, field: str, expected: object) -> None:
    """Each documented key's value parses into its policy field."""
    assert getattr(parse_metadata({key: value}), field) == expected


@pytest.mark.parametrize("key", sorted(ALIASES))
def test_every_key_is_accepted_in_from_env_form(key: str) -> None:
    """Every key given as ``<key>FromEnv`` parses as the key would; all but prewarmWindows change it."""
    samples = {
        "engine": "tgi",
        "labelSelector": 'a="b"',
        "prometheusAddress": "http://p:9090",
        "timezone": "Europe/Paris",
        "gpuCheck": "false",
        "gpuCheckFailure": "closed",
        "prewarmWindows": "[]",
        "targetUtilization": "0.5",
        "ttftObjectivePercentile": "95",
        "router": "dynamo",
        "role": "decode",
        "prewarmStart": None,
        "prewarmEnd": None,
        "prewarmReplicas": None,
    }
    if key in CUSTOM_QUERY_KEYS:
        metadata = {"engine": "custom", "queueQuery": "sum(my_queue)", f"{key}FromEnv": "sum(my_series)"}
        if key == "queueQuery":
            del metadata["queueQuery"]
    elif key in ("prewarmStart", "prewarmEnd", "prewarmReplicas"):
        metadata = {"prewarmStart": "0 9 * * *", "prewarmEnd": "0 12 * * *", "prewarmReplicas": "3"}
        metadata[f"{key}FromEnv"] = metadata.pop(key)
    elif key == "inferencePool":
        metadata = {"router": "llm-d", "inferencePoolFromEnv": "llama-pool"}
    elif key == "roleSelector":
        metadata = {"role": "decode", "roleSelectorFromEnv": "disaggregatedset.x-k8s.io/role"}
    else:
        value = samples.get(key) or "3"
        metadata = {f"{key}FromEnv": value}
    direct = parse_metadata({k.removesuffix("FromEnv"): v for k, v in metadata.items()})
    assert parse_metadata(metadata) == direct
    assert direct != parse_metadata({}) or key == "prewarmWindows"


def test_keda_keys_are_ignored() -> None:
    """KEDA's own trigger keys leave the policy at its defaults."""
    assert parse_metadata(dict.fromkeys(KEDA_KEYS, "x")) == parse_metadata({})


def test_min_replicas_zero_and_utilization_two_are_named_together() -> None:
    """One error names minReplicas=0 and targetUtilization=2, each with its rule."""
    with pytest.raises(MetadataError) as caught:
        parse_metadata({"minReplicas": "0", "targetUtilization": "2"})
    message = str(caught.value)
    assert caught.value.keys == ["minReplicas", "targetUtilization"]
    assert 'minReplicas="0"' in message
    assert "never scales to zero" in message
    assert 'targetUtilization="2"' in message
    assert "(0, 1]" in message


@pytest.mark.parametrize(
    ("metadata", "bad_keys"),
    [
        ({"minReplicas": "-1"}, ["minReplicas"]),
        ({"minReplicas": "1.5"}, ["minReplicas"]),
        ({"maxReplicas": "0"}, ["maxReplicas"]),
        ({"targetUtilization": "0"}, ["targetUtilization"]),
        ({"targetUtilization": "nan"}, ["targetUtilization"]),
        ({"coldStartSeconds": "inf"}, ["coldStartSeconds"]),
        ({"coldStartSeconds": "-5"}, ["coldStartSeconds"]),
        ({"targetQueuePerReplica": "0"}, ["targetQueuePerReplica"]),
        ({"promptTokensPerSecondPerReplica": "1e18"}, ["promptTokensPerSecondPerReplica"]),
        ({"engine": "llamacpp"}, ["engine"]),
        ({"gpuCheck": "perhaps"}, ["gpuCheck"]),
        ({"gpuCheckFailure": "sometimes"}, ["gpuCheckFailure"]),
        ({"timezone": "Mars/Olympus"}, ["timezone"]),
        ({"timezone": "../../etc/passwd"}, ["timezone"]),
        ({"timezone": "9" * 400}, ["timezone"]),  # found by the fuzzer: OSError, file name too long
        ({"prometheusAddress": "prom:9090"}, ["prometheusAddress"]),
        ({"labelSelector": 'model="a"} or vector(1) #'}, ["labelSelector"]),
        ({"labelSelector": 'model=~"("'}, ["labelSelector"]),
        ({"prewarmStart": "0 9 * *", "prewarmEnd": "0 12 * * *", "prewarmReplicas": "2"}, ["prewarmStart"]),
        (
            {"prewarmStart": "0 9 * * * *", "prewarmEnd": "0 12 * * *", "prewarmReplicas": "2"},
            ["prewarmStart"],
        ),
        (
            {"prewarmStart": "61 9 * * *", "prewarmEnd": "0 12 * * *", "prewarmReplicas": "2"},
            ["prewarmStart"],
        ),
        ({"prewarmWindows": "not json"}, ["prewarmWindows"]),
        ({"prewarmWindows": '{"start": "0 9 * * *"}'}, ["prewarmWindows"]),
        (
            {"prewarmWindows": '[{"start": "0 9 * * *", "end": "0 10 * * *", "replicas": 0}]'},
            ["prewarmWindows"],
        ),
        (
            {"prewarmWindows": '[{"start": "0 9 * * *", "end": "0 10 * * *", "replicas": 2, "x": 1}]'},
            ["prewarmWindows"],
        ),
        ({"surprise": "1"}, ["surprise"]),
        ({"minReplicas": "2", "minReplicasFromEnv": "3"}, ["minReplicasFromEnv"]),
        ({"engine": "x" * 9000}, ["engine"]),
        # Rules between keys (bounds, complete windows, the pending cap) name the key that breaks them.
        ({"minReplicas": "5", "maxReplicas": "3"}, ["maxReplicas"]),
        ({"prewarmStart": "0 9 * * *"}, ["prewarmEnd", "prewarmReplicas"]),
        (
            {"prewarmStart": "0 9 * * *", "prewarmEnd": "0 9 * * *", "prewarmReplicas": "2"},
            ["prewarmReplicas"],
        ),
        (
            {
                "prewarmStart": "0 9 * * *",
                "prewarmEnd": "0 12 * * *",
                "prewarmReplicas": "50",
                "maxReplicas": "10",
            },
            ["prewarmReplicas"],
        ),
        ({"maxPendingReplicas": "20", "maxReplicas": "10"}, ["maxPendingReplicas"]),
        # Custom queries need engine custom and a queueQuery, each non-blank, NUL-free, not too long
        # and parsing as PromQL.
        ({"engine": "custom"}, ["queueQuery"]),
        ({"engine": "vllm", "queueQuery": "sum(x)"}, ["queueQuery"]),
        ({"queueQuery": "sum(x)", "runningQuery": "sum(y)"}, ["queueQuery", "runningQuery"]),
        ({"engine": "custom", "queueQuery": "   "}, ["queueQuery"]),
        ({"engine": "custom", "queueQuery": "sum(x)\x00"}, ["queueQuery"]),
        ({"engine": "custom", "queueQuery": "x" * 3000}, ["queueQuery"]),
        (
            {"engine": "custom", "queueQuery": "sum(rate(q[1m])", "runningQuery": "sum(r))"},
            ["queueQuery", "runningQuery"],
        ),
    ],
    ids=[
        "min-negative",
        "min-fraction",
        "max-zero",
        "utilization-zero",
        "utilization-nan",
        "cold-start-inf",
        "cold-start-negative",
        "queue-target-zero",
        "prompt-capacity-huge",
        "unknown-engine",
        "gpu-check-not-bool",
        "gpu-check-failure-unknown",
        "timezone-unknown",
        "timezone-path",
        "timezone-too-long",
        "prometheus-no-scheme",
        "selector-injection",
        "selector-bad-regex",
        "cron-four-fields",
        "cron-six-fields",
        "cron-minute-61",
        "windows-not-json",
        "windows-not-a-list",
        "windows-zero-replicas",
        "windows-unknown-field",
        "unknown-key",
        "key-and-from-env",
        "engine-too-long",
        "min-above-max",
        "prewarm-start-alone",
        "prewarm-empty-window",
        "prewarm-above-max",
        "pending-above-max",
        "custom-without-queue",
        "query-with-vllm",
        "queries-with-default-engine",
        "blank-query",
        "nul-in-query",
        "query-too-long",
        "queries-that-do-not-parse",
    ],
)
def test_invalid_values_name_their_key(metadata: dict[str, str], bad_keys: list[str]) -> None:
    """An invalid value, keys that break a rule between them, or a custom query that breaks its
    rules raise MetadataError naming exactly the offending keys."""
    with pytest.raises(MetadataError) as caught:
        parse_metadata(metadata)
    assert caught.value.keys == bad_keys
    for key in bad_keys:
        assert key in str(caught.value)


def test_all_field_errors_are_reported_at_once() -> None:
    """Every bad field is reported in one error, keys sorted."""
    with pytest.raises(MetadataError) as caught:
        parse_metadata(
            {"minReplicas": "0", "maxReplicas": "x", "engine": "?", "coldStartSeconds": "-1", "zzz": "1"}
        )
    assert caught.value.keys == ["coldStartSeconds", "engine", "maxReplicas", "minReplicas", "zzz"]


def test_several_windows_combine_single_keys_and_json_list() -> None:
    """The single-key window and the JSON list combine, in order, each with its timezone."""
    policy = parse_metadata(
        {
            "prewarmStart": "0 9 * * 1-5",
            "prewarmEnd": "0 12 * * 1-5",
            "prewarmReplicas": "8",
            "timezone": "Asia/Shanghai",
            "prewarmWindows": '[{"start": "0 18 * * 5", "end": "0 20 * * 5", "replicas": 4},'
            ' {"start": "30 7 * * *", "end": "0 8 * * *", "replicas": 3, "timezone": "Europe/Paris"}]',
        }
    )
    assert [(w.start, w.replicas, w.timezone) for w in policy.windows] == [
        ("0 9 * * 1-5", 8, "Asia/Shanghai"),
        ("0 18 * * 5", 4, "Asia/Shanghai"),
        ("30 7 * * *", 3, "Europe/Paris"),
    ]


def test_too_many_keys_is_refused() -> None:
    """Metadata with 100 keys is refused as a whole, under the key "metadata"."""
    with pytest.raises(MetadataError) as caught:
        parse_metadata({f"k{i}": "1" for i in range(100)})
    assert caught.value.keys == ["metadata"]


def test_values_are_quoted_in_errors_without_breaking_the_message() -> None:
    """A bad value appears in the error quoted, its quotes and newlines escaped."""
    with pytest.raises(MetadataError) as caught:
        parse_metadata({"minReplicas": 'a"b\nc'})
    assert '"a\\"b\\nc"' in str(caught.value)


def test_custom_engine_takes_its_queries_from_metadata() -> None:
    """The custom engine takes its queue and prompt-token queries from metadata."""
    policy = parse_metadata(
        {
            "engine": "custom",
            "queueQuery": 'sum(my_queue{model="a"})',
            "promptTokensQuery": "sum(rate(my_prompt_tokens_total[1m]))",
        }
    )
    assert policy.queue_query == 'sum(my_queue{model="a"})'
    assert policy.prompt_tokens_query == "sum(rate(my_prompt_tokens_total[1m]))"


def test_a_query_that_does_not_parse_names_where_it_stops() -> None:
    """An unbalanced queueQuery is refused naming the character where the parser stops and why."""
    with pytest.raises(MetadataError) as caught:
        parse_metadata({"engine": "custom", "queueQuery": "sum(rate(my_queue[1m])"})
    (problem,) = caught.value.problems
    assert problem.rule == "does not parse at character 4 ('(rate(my_queue[1m])'): unclosed left parenthesis"


def test_a_function_the_parser_does_not_know_is_left_to_prometheus() -> None:
    """A function newer than the parser's Prometheus (2.45) is not refused here: Prometheus decides."""
    policy = parse_metadata({"engine": "custom", "queueQuery": "sum(some_newer_function(my_queue))"})
    assert policy.queue_query == "sum(some_newer_function(my_queue))"
