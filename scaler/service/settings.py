"""``scaler serve``'s settings: one table, read from flags, then ``SCALER_*`` variables, then defaults.

pydantic-settings reads the environment (each field's variable is ``SCALER_`` and its name in
capitals, or the shorter name in ``ENV``); ``add_flags`` derives one ``scaler serve`` flag per
field from the same table (``FLAGS`` names the ones that differ from the field), and
``from_args`` builds the Settings with the flags that were given winning over the variables.
A field added here has its flag and variable at once; ``tests/test_settings.py`` holds them.
"""

from __future__ import annotations

import argparse
import types
import typing
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AliasChoices, BeforeValidator, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from scaler.cli import args as cliargs
from scaler.cli.args import seconds, url_problem
from scaler.errors import InputError, rule_of

ENV_PREFIX = "SCALER_"
# Variables whose name is not SCALER_ + the field's name (kept from earlier releases).
ENV = {
    "prometheus_address": "SCALER_PROMETHEUS",
    "kubeconfig": "SCALER_KUBECONFIG_PATH",  # KUBECONFIG itself is the client's
    "refresh_interval_seconds": "SCALER_REFRESH_INTERVAL",
    "grace_seconds": "SCALER_GRACE",
}
# Flags whose name is not -- + the field's name with dashes: a duration's flag has no unit in
# its name, since its value carries one (--history 1h; bare seconds too: scaler.cli.args).
FLAGS = {
    "prometheus_address": "--prometheus",
    "refresh_interval_seconds": "--refresh-interval",
    "grace_seconds": "--grace",
    "prometheus_timeout_seconds": "--prometheus-timeout",
    "history_seconds": "--history",
    "target_idle_seconds": "--target-idle",
    "first_decision_timeout_seconds": "--first-decision-timeout",
}
# The old spellings, accepted for one release with a deprecation line.
OLD_FLAGS = {
    "prometheus_timeout_seconds": "--prometheus-timeout-seconds",
    "history_seconds": "--history-seconds",
    "target_idle_seconds": "--target-idle-seconds",
    "first_decision_timeout_seconds": "--first-decision-timeout-seconds",
}


# Flags checked as every command checks the same kind of value (scaler.cli.args), with its metavar.
FLAG_TYPES: dict[str, tuple[Any, str]] = {
    "prometheus_address": (cliargs.url, "URL"),
    "rate_window": (cliargs.rate_window, "RATE_WINDOW"),
    "kubeconfig": (cliargs.existing_file, "FILE"),
    "tls_cert_file": (cliargs.existing_file, "FILE"),
    "tls_key_file": (cliargs.existing_file, "FILE"),
    "tls_client_ca_file": (cliargs.existing_file, "FILE"),
}


def _seconds(value: Any) -> Any:
    """A duration written as text (``90s``, ``5m``; bare seconds too) in seconds, for the variables."""
    return seconds(value, bare_seconds=True) if isinstance(value, str) else value


def _url(value: str | None) -> str | None:
    problem = None if value is None else url_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return None if value is None else value.rstrip("/")


# Seconds, written as a duration (scaler.cli.args) in a flag or a variable.
Seconds = Annotated[float, BeforeValidator(_seconds)]


def _env(field: str) -> Any:
    return AliasChoices(ENV[field]) if field in ENV else None


class Settings(BaseSettings):
    """Server settings (``scaler serve --help``; docs/cli.md)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", frozen=True, populate_by_name=True, case_sensitive=False
    )

    host: str = Field("0.0.0.0", description="listen address")  # noqa: S104 - a pod listens on all interfaces
    port: int = Field(9090, ge=0, le=65535, description="gRPC port")
    metrics_port: int | None = Field(
        8080, ge=0, le=65535, description="Prometheus /metrics port; 0 turns it off"
    )
    refresh_interval_seconds: Seconds = Field(
        15.0,
        gt=0,
        le=3600,
        validation_alias=_env("refresh_interval_seconds"),
        description="time between refreshes of every target's decision",
    )
    prometheus_address: Annotated[str | None, AfterValidator(_url)] = Field(
        None,
        validation_alias=_env("prometheus_address"),
        description="default Prometheus URL for targets without prometheusAddress",
    )
    prometheus_timeout_seconds: Seconds = Field(
        5.0, gt=0, le=60, description="timeout of one Prometheus query"
    )
    rate_window: str = Field(
        "1m", pattern=r"^[0-9]+(ms|s|m|h)$", description="PromQL rate() window for token rates"
    )
    history_seconds: Seconds = Field(
        3600.0, ge=0, le=7 * 86400, description="history a new target warms its forecaster from"
    )
    kubernetes: bool = Field(
        False, description="read replicas and the GPU inventory from the Kubernetes API, in-cluster"
    )
    kubeconfig: str | None = Field(
        None, validation_alias=_env("kubeconfig"), description="as --kubernetes, through this kubeconfig file"
    )
    log_format: Literal["json", "console"] = Field("json", description="log lines as JSON or for a console")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="lowest level logged")
    log_decisions: Literal["all", "changes"] = Field(
        "all",
        description="log every decision, or only those whose target, binding, landing or inert reasons"
        " changed",
    )
    grace_seconds: Seconds = Field(
        20.0,
        ge=0,
        le=600,
        validation_alias=_env("grace_seconds"),
        description="time in-flight RPCs get on SIGTERM",
    )
    target_idle_seconds: Seconds = Field(
        3600.0, gt=0, description="forget a ScaledObject KEDA has not asked about for this long"
    )
    first_decision_timeout_seconds: Seconds = Field(
        1.0, ge=0, le=10, description="how long a first GetMetrics waits for the target's first decision"
    )
    tls_cert_file: str | None = Field(None, description="server certificate (PEM) for TLS")
    tls_key_file: str | None = Field(None, description="server private key (PEM) for TLS")
    tls_client_ca_file: str | None = Field(
        None,
        description="CA bundle (PEM); when set, clients must present a certificate it signed (mutual TLS)",
    )


def env_name(field: str) -> str:
    """The environment variable that sets ``field`` (``SCALER_`` + its name, unless renamed)."""
    return ENV.get(field, ENV_PREFIX + field.upper())


def flag_name(field: str) -> str:
    """The command-line flag that sets ``field`` (``--`` + its name with dashes, unless renamed)."""
    return FLAGS.get(field, "--" + field.replace("_", "-"))


def _parse(annotation: Any) -> tuple[Any, list[str] | None]:
    """The argparse type and choices of a field's annotation (Optional unwrapped)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if typing.get_origin(annotation) is Literal:
        return str, [str(a) for a in typing.get_args(annotation)]
    return annotation, None


def add_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per field; a flag not given leaves the field to its variable or default."""
    for name, info in Settings.model_fields.items():
        default = "unset" if info.default is None else info.default
        metavar = flag_name(name).removeprefix("--").upper().replace("-", "_")
        kind, choices = _parse(info.annotation)
        if name.endswith("_seconds"):
            kind = cliargs.duration(bare_seconds=True, above=False)  # Settings holds the bounds
            metavar = "DURATION"
            default = f"{default:g}s"
        kind, metavar = FLAG_TYPES.get(name, (kind, metavar))
        help_text = f"{info.description} ({env_name(name)}; default {default})"
        if name in OLD_FLAGS:
            cliargs.deprecated(parser, [OLD_FLAGS[name]], flag_name(name), dest=name, type=kind)
        if kind is bool:
            parser.add_argument(
                flag_name(name), dest=name, action="store_true", default=argparse.SUPPRESS, help=help_text
            )
            continue
        parser.add_argument(
            flag_name(name),
            dest=name,
            type=kind,
            choices=choices,
            default=argparse.SUPPRESS,
            metavar=None if choices else metavar,
            help=help_text,
        )


def from_args(args: argparse.Namespace) -> Settings:
    """Settings with the flags given on the command line over ``SCALER_*`` variables over defaults."""
    given = {name: getattr(args, name) for name in Settings.model_fields if hasattr(args, name)}
    try:
        return Settings(**given)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = str(error["loc"][0]) if error["loc"] else ""
            field = next((n for n in Settings.model_fields if loc in (n, ENV.get(n))), loc)
            rule = rule_of(error)
            problems.append(f"{flag_name(field)} / {env_name(field)}: {rule}")
        raise SettingsError("invalid settings: " + "; ".join(problems)) from None


class SettingsError(InputError):
    """A flag or variable of scaler serve is invalid; the message names both for each."""
