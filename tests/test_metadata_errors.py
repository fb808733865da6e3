"""Metadata errors a user can act on: a suggested key, the cron field at fault, strict booleans."""

from __future__ import annotations

import pytest

from scaler.config import ALIASES, MetadataError, cron_field_problem, did_you_mean, parse_metadata

WINDOW = {"prewarmEnd": "0 12 * * 1-5", "prewarmReplicas": "3"}


def _error(metadata: dict[str, str]) -> str:
    with pytest.raises(MetadataError) as caught:
        parse_metadata(metadata)
    return str(caught.value)


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("targetQueuePerReplca", "targetQueuePerReplica"),
        ("gpucheck", "gpuCheck"),
        ("minReplica", "minReplicas"),
        ("ttftObjectiveSecond", "ttftObjectiveSeconds"),
        ("prewarmWindow", "prewarmWindows"),
    ],
    ids=["dropped-letter", "case", "plural", "plural-seconds", "plural-windows"],
)
def test_a_misspelled_key_is_answered_with_the_key_it_resembles(typed: str, meant: str) -> None:
    """A key one slip away from a documented one names that key in the error."""
    assert did_you_mean(typed) == meant
    assert f'{typed}="10": unknown key; did you mean "{meant}"?' in _error({typed: "10"})


def test_an_unrelated_unknown_key_gets_no_guess() -> None:
    """A key like no documented one is called unknown without a made-up suggestion."""
    message = _error({"colour": "blue"})
    assert 'colour="blue": unknown key (see' in message
    assert "did you mean" not in message


def test_every_documented_key_suggests_itself() -> None:
    """The suggestion table is the metadata schema: each key, lower-cased, maps back to itself."""
    for key in ALIASES:
        assert did_you_mean(key.lower()) == key


@pytest.mark.parametrize(
    ("start", "field_and_range"),
    [
        ("61 9 * * 1-5", 'minute "61" is out of range 0-59'),
        ("0 24 * * 1-5", 'hour "24" is out of range 0-23'),
        ("0 9 32 * *", 'day of month "32" is out of range 1-31'),
        ("0 9 * 13 *", 'month "13" is out of range 1-12 (or jan-dec)'),
        ("0 9 * * 1-8", 'day of week "8" is out of range 0-7 (or sun-sat)'),
        ("0 9 * * fri-xyz", 'day of week "xyz" is out of range 0-7 (or sun-sat)'),
        ("*/0 9 * * *", "minute step '0' must be a whole number of 1 or more"),
    ],
    ids=["minute", "hour", "day-of-month", "month", "weekday", "weekday-name", "zero-step"],
)
def test_a_cron_error_names_the_field_and_its_range(start: str, field_and_range: str) -> None:
    """An invalid pre-warm schedule says which of the five fields is wrong and what it allows."""
    message = _error({"prewarmStart": start, **WINDOW})
    assert f'prewarmStart="{start}": is not a valid cron expression: {field_and_range}' in message


def test_a_cron_error_inside_prewarm_windows_names_the_window_and_field() -> None:
    """The JSON windows form reports the window index, the key and the bad field."""
    windows = '[{"start": "0 9 * * 1-5", "end": "0 61 * * 1-5", "replicas": 2}]'
    message = _error({"prewarmWindows": windows})
    assert 'at 0.end: is not a valid cron expression: hour "61" is out of range 0-23' in message


@pytest.mark.parametrize(
    "schedule",
    ["*/15 9-17 * * 1-5", "0 9 * jan-jun mon-fri", "0 12 L * *", "30 8 1,15 * *", "0 9 * * 7"],
    ids=["steps-and-ranges", "names", "last-day", "list", "sunday-as-7"],
)
def test_valid_schedules_still_parse(schedule: str) -> None:
    """The field check explains croniter's refusals and never refuses what croniter accepts."""
    policy = parse_metadata({"prewarmStart": schedule, **WINDOW})
    assert policy.windows[0].start == schedule
    for index, text in enumerate(schedule.split()):
        if text != "L":
            assert cron_field_problem(index, text) is None


@pytest.mark.parametrize("value", ["yes", "no", "1", "0", "on", "enabled", ""], ids=repr)
def test_gpu_check_accepts_only_true_or_false(value: str) -> None:
    """gpuCheck refuses every spelling but true/false instead of guessing what was meant."""
    assert f'gpuCheck="{value}": must be "true" or "false"' in _error({"gpuCheck": value})


@pytest.mark.parametrize(("value", "parsed"), [("true", True), ("false", False), ("False", False)])
def test_gpu_check_true_and_false_parse_in_any_case(value: str, parsed: bool) -> None:
    """true and false parse whatever their case (an unquoted YAML True arrives as "True")."""
    assert parse_metadata({"gpuCheck": value}).gpu_check is parsed


@pytest.mark.parametrize(
    ("key", "value", "rule"),
    [
        ("minReplicas", "abc", "must be a whole number"),
        ("maxReplicas", "1.5", "must be a whole number"),
        ("minReplicas", "0", "must be at least 1"),
        ("ttftObjectiveSeconds", "-1", "must be above 0"),
        ("ttftObjectivePercentile", "100", "must be below 100"),
        ("role", "x", "must be one of 'prefill', 'decode' or 'both'"),
        ("inferencePool", "", "must be at least 1 character(s) long"),
    ],
)
def test_a_bad_value_is_said_in_the_project_s_words(key: str, value: str, rule: str) -> None:
    """A value of the wrong type or out of bounds names its key and the rule as the project says it."""
    extra = {"router": "llm-d"} if key == "inferencePool" else {}
    message = _error({key: value, **extra})
    assert f'{key}="{value}": {rule}' in message
    assert "Input should" not in message
    assert "String should" not in message
