"""scaler serve's settings: every field has a flag and a SCALER_* variable; flags win over variables."""

from __future__ import annotations

import pytest

from scaler.cli import build_parser
from scaler.service.settings import Settings, SettingsError, env_name, flag_name, from_args


def serve_flags() -> set[str]:
    """Every option string the ``scaler serve`` parser accepts."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    serve = sub.choices["serve"]  # type: ignore[index]
    return {o for action in serve._actions for o in action.option_strings}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove SCALER_* variables so each test sees only what it sets."""
    import os

    for name in list(os.environ):
        if name.startswith("SCALER_"):
            monkeypatch.delenv(name)


def test_every_field_has_a_flag_and_a_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every settings field has a serve flag, and a value set in its variable reaches it."""
    flags = serve_flags()
    for name in Settings.model_fields:
        assert flag_name(name) in flags, name
    # a value set through each variable arrives in its field (the four that had neither before included)
    monkeypatch.setenv(env_name("prometheus_timeout_seconds"), "9")
    monkeypatch.setenv(env_name("history_seconds"), "600")
    monkeypatch.setenv(env_name("target_idle_seconds"), "120")
    monkeypatch.setenv(env_name("first_decision_timeout_seconds"), "2.5")
    monkeypatch.setenv("SCALER_PROMETHEUS", "http://prom:9090")
    monkeypatch.setenv("SCALER_KUBERNETES", "true")
    settings = from_args(build_parser().parse_args(["serve"]))
    assert (
        settings.prometheus_timeout_seconds,
        settings.history_seconds,
        settings.target_idle_seconds,
        settings.first_decision_timeout_seconds,
        settings.prometheus_address,
        settings.kubernetes,
    ) == (9.0, 600.0, 120.0, 2.5, "http://prom:9090", True)


def test_flags_win_over_variables_and_variables_over_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flag wins over its variable, and a variable over the default."""
    monkeypatch.setenv("SCALER_PORT", "7000")
    monkeypatch.setenv("SCALER_GRACE", "5")
    monkeypatch.setenv("SCALER_LOG_LEVEL", "debug")
    args = build_parser().parse_args(["serve", "--port", "7100", "--history-seconds", "60"])
    settings = from_args(args)
    assert (settings.port, settings.grace_seconds, settings.log_level) == (7100, 5.0, "debug")
    assert (settings.history_seconds, settings.metrics_port, settings.refresh_interval_seconds) == (
        60.0,
        8080,
        15.0,
    )


def test_a_bad_variable_is_refused_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bad variable values are refused, each error naming the flag and the variable."""
    monkeypatch.setenv("SCALER_REFRESH_INTERVAL", "-1")
    monkeypatch.setenv("SCALER_PORT", "ninety")
    with pytest.raises(SettingsError) as caught:
        from_args(build_parser().parse_args(["serve"]))
    message = str(caught.value)
    assert "--refresh-interval / SCALER_REFRESH_INTERVAL: must be above 0" in message
    assert "--port / SCALER_PORT: must be a whole number" in message


def test_choices_come_from_the_field_s_type() -> None:
    """A value outside the field type's choices is refused by the parser."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--log-format", "xml"])
