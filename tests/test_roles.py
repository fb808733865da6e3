"""Prefill and decode pools: the role's label, its matcher, and the metadata rules around them."""

from __future__ import annotations

import pytest

from scaler.config import MetadataError, parse_metadata
from scaler.matchers import matches_all
from scaler.presets import PRESETS
from scaler.roles import RoleLabel, parse_role_label, role_matcher, series_label


@pytest.mark.parametrize(
    ("key", "label"),
    [
        ("llm-d.ai/role", "llm_d_ai_role"),
        ("disaggregatedset.x-k8s.io/role", "disaggregatedset_x_k8s_io_role"),
        ("engine_type", "engine_type"),
        ("worker_type", "worker_type"),
    ],
)
def test_a_pod_label_key_is_read_as_kubernetes_discovery_names_it(key: str, label: str) -> None:
    """Every character outside [A-Za-z0-9_] becomes _, as in __meta_kubernetes_pod_label_<name>."""
    assert series_label(key) == label
    assert parse_role_label(key).series_label == label


def engine_label(engine: str) -> RoleLabel:
    """The role label of ``engine``'s preset (the default roleSelector)."""
    text = PRESETS[engine].role_label
    assert text is not None
    return parse_role_label(text)


def series(role: str | None, **labels: str) -> dict[str, str]:
    """A series' labels with llm-d's role label set to ``role`` (None: the pod has no label)."""
    return {"pod": "p", **labels, **({} if role is None else {"llm_d_ai_role": role})}


def test_an_unlabelled_llm_d_pod_counts_as_decode_never_as_prefill() -> None:
    """llm-d's decode filter accepts pods with no role label; its prefill filter does not."""
    label = engine_label("vllm")
    decode, prefill = role_matcher("decode", label), role_matcher("prefill", label)
    assert matches_all(decode, series("decode"))
    assert matches_all(decode, series(None))
    assert not matches_all(decode, series("prefill"))
    assert matches_all(prefill, series("prefill"))
    assert not matches_all(prefill, series(None))
    assert not matches_all(prefill, series("decode"))
    assert [str(m) for m in decode] == ['llm_d_ai_role=~"decode|"']
    # Written as the series label, it is still llm-d's label, with its rule.
    assert role_matcher("decode", parse_role_label("llm_d_ai_role")) == decode


def test_sglang_engine_type_keeps_only_the_role_and_not_unified() -> None:
    """SGLang's engine_type is prefill, decode or unified; a role reads only its own value."""
    decode = role_matcher("decode", engine_label("sglang"))
    assert matches_all(decode, {"engine_type": "decode"})
    assert not matches_all(decode, {"engine_type": "unified"})
    assert not matches_all(decode, {})  # no llm-d rule here: an unlabelled series is not decode


def test_both_adds_no_matcher() -> None:
    """role: both (the default) reads the labelSelector's series, as before roles existed."""
    policy = parse_metadata({"labelSelector": 'model_name="llama"'})
    assert policy.role == "both"
    assert policy.series_matchers == policy.matchers


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"role": "decode"}, ['llm_d_ai_role=~"decode|"']),
        ({"role": "prefill"}, ['llm_d_ai_role="prefill"']),
        ({"role": "prefill", "engine": "sglang"}, ['engine_type="prefill"']),
        ({"role": "decode", "engine": "tgi", "roleSelector": "app.kubernetes.io/component"}, []),
        ({"role": "decode", "roleSelector": "pool"}, ['pool="decode"']),
        ({"role": "decode", "engine": "custom", "queueQuery": "sum(q)"}, []),
    ],
)
def test_the_role_matcher_joins_the_label_selector(metadata: dict[str, str], expected: list[str]) -> None:
    """The role's matcher is added to the labelSelector's: the role label's name reaches PromQL's
    ``by``, its value only the Python matcher."""
    policy = parse_metadata({"labelSelector": 'model_name="llama"', **metadata})
    got = [str(m) for m in policy.series_matchers]
    assert got[0] == 'model_name="llama"'
    if metadata.get("roleSelector", "").startswith("app."):
        expected = ['app_kubernetes_io_component="decode"']
    assert got[1:] == expected


@pytest.mark.parametrize(
    ("metadata", "key", "rule"),
    [
        ({"roleSelector": "engine_type"}, "roleSelector", "only used with role: prefill or decode"),
        ({"role": "decode", "engine": "tgi"}, "roleSelector", "required with role: decode and engine: tgi"),
        (
            {"role": "prefill", "engine": "triton"},
            "roleSelector",
            "engine: triton, whose series carry no role",
        ),
        (
            {"role": "decode", "engine": "dynamo"},
            "role",
            "engine: dynamo reads one frontend whose series sum",
        ),
        (
            {"role": "decode", "engine": "custom", "queueQuery": "sum(q)", "roleSelector": "pool"},
            "roleSelector",
            "not used with engine: custom",
        ),
        (
            {"role": "decode", "labelSelector": 'llm_d_ai_role="decode"'},
            "labelSelector",
            "matches on llm_d_ai_role, the label role: decode picks its series by",
        ),
        ({"role": "middle"}, "role", "'prefill', 'decode' or 'both'"),
        ({"role": "decode", "roleSelector": 'engine_type="decode"'}, "roleSelector", "must be a label name"),
        ({"role": "decode", "roleSelector": "__name__"}, "roleSelector", "Prometheus' own"),
        ({"role": "decode", "roleSelector": "a" * 300 + "/role"}, "roleSelector", "prefix is at most 253"),
    ],
)
def test_each_bad_role_setting_is_named_with_its_rule(metadata: dict[str, str], key: str, rule: str) -> None:
    """INVALID_ARGUMENT names the key, the value given and the rule it breaks."""
    with pytest.raises(MetadataError) as caught:
        parse_metadata(metadata)
    assert caught.value.keys == [key]
    assert rule in str(caught.value)
    if key in metadata:
        assert f"{key}=" in str(caught.value)


def test_every_bad_role_key_is_named_at_once() -> None:
    """A role on Dynamo's frontend beside a bounds error: both keys, in one error."""
    with pytest.raises(MetadataError) as caught:
        parse_metadata(
            {
                "role": "decode",
                "engine": "dynamo",
                "maxReplicas": "4",
                "minReplicas": "5",
            }
        )
    assert caught.value.keys == ["maxReplicas", "role"]
