"""The command line's one grammar, for every command: how a flag's value is written and checked.

* ``--output/-o`` is a format (``text``, ``wide``, ``json``); ``--out`` is a path.
* A ScaledObject file is ``--scaledobject FILE``; a live one is ``--name NS/NAME``.
* A duration is a number and a unit, as Prometheus writes them (``90s``, ``5m``, ``6h``,
  ``7d``); where a flag took bare seconds it still does (``--interval 15`` is ``15s``).
* A Prometheus is an ``http://`` or ``https://`` URL with a host.
* A path the command writes (``--out``, ``--export``) is in a folder that is there.
* A flag that takes a value is given once: twice is an error naming it (argparse would keep
  the last one without a word).

Every value is checked as the command line is parsed, before the command prints anything,
and a bad one is one line on stderr, ``scaler COMMAND: error: FLAG VALUE: RULE``, exit
status 2 (``Parser.error``). An old spelling keeps working for one release, with a one-line
``deprecated`` notice on stderr (``deprecated``).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

from scaler.errors import InputError

FORMATS = ("text", "wide", "json")
# Prometheus' units (model.ParseDuration), in seconds; weeks and years are left out on purpose:
# nobody replays a year, and "1w" beside "7d" would be two ways to say one thing.
UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^(?P<number>-?\d+(?:\.\d+)?)(?P<unit>ms|s|m|h|d)?$")
# argparse reads a value that starts with "-" as a flag unless it looks like a negative number;
# a negative duration ("--since -7d") is a value too, so that its rule is said, not "expected
# one argument".
_NEGATIVE_VALUE = re.compile(r"^-\d+$|^-\d*\.\d+$|^-\d+(?:\.\d+)?[a-z]+$")


class UsageError(InputError):
    """Flags that cannot be used together, or a value found wrong after parsing; names the flags."""


def _once(parser: argparse.ArgumentParser, action: argparse.Action, option_string: str | None) -> None:
    """ArgumentError when ``action``'s value was given already in this parse (by it, or by another
    spelling of the flag); else remember it was."""
    given = getattr(parser, "given", None)
    if option_string is None or not isinstance(given, dict):
        return
    first = given.get(action.dest)
    if first is not None:
        both = "" if first == option_string else f" (as {first} and {option_string})"
        raise argparse.ArgumentError(action, f"given twice{both}: give it once")
    given[action.dest] = option_string


class _Once(argparse._StoreAction):
    """argparse's ``store``, refusing a flag given twice: argparse keeps the last value without a
    word, and ``--prometheus A ... --prometheus B`` would read B while the user reads A."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        _once(parser, self, option_string)
        super().__call__(parser, namespace, values, option_string)


class Parser(argparse.ArgumentParser):
    """argparse's parser, ending a bad command line in one line rather than its usage block, and
    refusing a flag that takes a value given twice (``_Once``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_VALUE
        self.register("action", None, _Once)
        self.register("action", "store", _Once)
        self.given: dict[str, str] = {}  # dest -> the flag as written, in this parse

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """argparse's, each flag's first value remembered for this parse only (``_Once``)."""
        self.given = {}
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        """``scaler COMMAND: error: MESSAGE``, one line, exit status 2 (as every input error ends)."""
        # "argument --since: '-7d': must be above 0s" -> "--since '-7d': must be above 0s"; a
        # positional's value names itself ("x.yaml: no such file").
        text = re.sub(r"^argument ([^:]+): ", lambda m: _flag(m[1]), message)
        # A required group whose other members are old spellings (hidden) names the one flag.
        text = re.sub(r"^one of the arguments (\S+) is required$", r"\1 is required", text)
        self.exit(2, f"{self.prog}: error: {text}\n")


def seconds(text: str, bare_seconds: bool = False) -> float:
    """The seconds in a duration (``90s``, ``5m``, ``6h``, ``7d``; a bare number where
    ``bare_seconds``), the one reader of durations; ValueError saying how to write one.

    *Example*: ``seconds("7d")`` is 604800.0; ``seconds("15", bare_seconds=True)`` is 15.0.
    """
    match = _DURATION.match(text.strip())
    if match is None or (match["unit"] is None and not bare_seconds):
        written = "90s, 5m, 6h or 7d" + (" (or bare seconds)" if bare_seconds else "")
        raise ValueError(f"{text!r} is not a duration such as {written}")
    return float(match["number"]) * UNIT_S[match["unit"] or "s"]


def _flag(names: str) -> str:
    """How an error names the argument argparse calls ``names`` (``-o/--output``, ``FILE``)."""
    last = names.rsplit("/", maxsplit=1)[-1]
    return f"{last} " if last.startswith("-") else ""


def duration(
    bare_seconds: bool = False, minimum_s: float = 0.0, above: bool = True, as_text: bool = False
) -> Callable[[str], Any]:
    """An argparse ``type``: a duration (``seconds``) above ``minimum_s`` (at least, where not
    ``above``), as seconds or, with ``as_text``, as written (for a reader that takes the text).

    *Example*: ``duration()("-7d")`` is refused: ``'-7d': must be above 0s``.
    """

    def parse(text: str) -> Any:
        try:
            value = seconds(text, bare_seconds)
        except ValueError as exc:
            # A bare number the rule refuses whatever its unit (0, -1) is refused by the rule, as
            # -1d is, not as a spelling: --since 0 and --since -1d say the same thing.
            try:
                value = seconds(text, bare_seconds=True)
            except ValueError:
                raise argparse.ArgumentTypeError(str(exc)) from None
            if value > minimum_s:
                raise argparse.ArgumentTypeError(str(exc)) from None
        if value < minimum_s or (above and value == minimum_s):
            rule = f"must be {'above' if above else 'at least'} {minimum_s:g}s"
            raise argparse.ArgumentTypeError(f"{text!r}: {rule}")
        return text if as_text else value

    return parse


def instant(text: str) -> str:
    """An argparse ``type``: an ISO 8601 time with a zone (``2026-12-07T00:00:00Z``), as written."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 time such as 2026-12-07T00:00:00Z"
        ) from None
    if when.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} needs a zone (Z or +08:00)")
    return text


def number(minimum: float = 0.0, above: bool = True, whole: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: a finite number above ``minimum`` (at least, where not ``above``).

    *Example*: ``number()("-2")`` is refused: ``'-2': must be a number above 0``.
    """

    def parse(text: str) -> float:
        rule = f"must be a {'whole ' if whole else ''}number {'above' if above else 'at least'} {minimum:g}"
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: {rule}") from None
        if (
            not math.isfinite(value)
            or value < minimum
            or (above and value == minimum)
            or (whole and not value.is_integer())
        ):
            raise argparse.ArgumentTypeError(f"{text!r}: {rule}")
        return value

    return parse


def whole(minimum: int = 0) -> Callable[[str], int]:
    """An argparse ``type``: a whole number of at least ``minimum``."""
    check = number(minimum, above=False, whole=True)
    return lambda text: int(check(text))


def url_problem(text: str) -> str | None:
    """Why ``text`` is not a Prometheus URL (``http://`` or ``https://`` and a host), or None.

    *Example*: ``prometheus:9090`` -> ``must be an http:// or https:// URL, such as
    http://prometheus:9090``.
    """
    if not text.startswith(("http://", "https://")) or any(c.isspace() for c in text):
        return "must be an http:// or https:// URL, such as http://prometheus:9090"
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        return "must be an http:// or https:// URL with a valid port"
    if not parts.hostname:
        return "must name a host, such as http://prometheus:9090"
    return None


def url(text: str) -> str:
    """An argparse ``type``: a Prometheus URL (``url_problem``), without a trailing slash."""
    problem = url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: {problem}")
    return text.rstrip("/")


# A PromQL range for rate(): whole milliseconds, seconds, minutes or hours (Settings.rate_window's rule).
RATE_WINDOW = re.compile(r"^[0-9]+(ms|s|m|h)$")


def rate_window(text: str) -> str:
    """An argparse ``type``: a ``rate()`` window such as ``1m`` or ``30s``."""
    if not RATE_WINDOW.match(text) or not any(c in "123456789" for c in text):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a PromQL range above 0 such as 30s, 1m or 5m")
    return text


def prometheus_over(command: str, flag: str | None, written: str | None, whose: str) -> str | None:
    """The Prometheus to read: the ``--prometheus`` given wins over a ``prometheusAddress`` written
    in a manifest, the one rule of every command, said on stderr in one line when they differ.

    *Example*: ``--prometheus http://localhost:9090`` over ``http://prometheus-operated:9090``
    prints ``scaler dry-run: --prometheus http://localhost:9090 wins over the prometheusAddress
    http://prometheus-operated:9090 of ns/name``.
    """
    if flag and written and flag.rstrip("/") != written.rstrip("/"):
        print(
            f"{command}: --prometheus {_redacted(flag)} wins over the prometheusAddress"
            f" {_redacted(written)} of {whose}",
            file=sys.stderr,
        )
    return flag or written


def _redacted(address: str) -> str:
    """``address`` without the password a URL may carry."""
    return re.sub(r"//[^/@]*@", "//***@", address)


def existing_file(text: str) -> str:
    """An argparse ``type``: a file that is there (checked before any output)."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a folder, not a file")
    return text


def to_write(folder: bool = False) -> Callable[[str], str]:
    """An argparse ``type``: a path the command writes, checked before any output, so that a command
    does not print its report and then fail to write: a file in a folder that is there, or with
    ``folder`` a folder (created when missing) that is not a file.

    *Example*: ``--out nodir/x.yaml`` is refused: ``nodir/x.yaml: no folder nodir to write it in``.
    """

    def parse(text: str) -> str:
        path = Path(text)
        if folder:
            if path.exists() and not path.is_dir():
                raise argparse.ArgumentTypeError(f"{text}: is a file, not a folder")
            return text
        if path.is_dir():
            raise argparse.ArgumentTypeError(f"{text}: is a folder; name a file in it")
        if not path.parent.exists():
            raise argparse.ArgumentTypeError(f"{text}: no folder {path.parent} to write it in")
        if not path.parent.is_dir():
            raise argparse.ArgumentTypeError(f"{text}: {path.parent} is a file, not a folder")
        return text

    return parse


def namespaced(text: str) -> str:
    """An argparse ``type``: a live object's ``NAMESPACE/NAME``."""
    namespace, slash, name = text.partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"{text!r}: write it as NAMESPACE/NAME, such as inference/llama")
    return text


class _Deprecated(argparse.Action):
    """An old spelling of a flag: stores where the new one does, and says it is going."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str = "", **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if self.nargs != 0:
            _once(parser, self, option_string)
        print(
            f"{parser.prog}: deprecated: {option_string} is now {self.new}; the old spelling goes in the"
            " next release",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, True if self.nargs == 0 else values)


def deprecated(
    parser: argparse.ArgumentParser | argparse._ActionsContainer, old: Sequence[str], new: str, **kwargs: Any
) -> None:
    """Accept ``old`` (hidden from --help, listed in docs/cli.md) for the flag ``new`` for one release;
    ``parser`` may be a group.

    ``kwargs`` are the new flag's ``dest``, ``type`` and the like; ``nargs=0`` for a switch.
    """
    kwargs.setdefault("default", argparse.SUPPRESS)  # the new flag's default stands
    parser.add_argument(*old, action=_Deprecated, new=new, help=argparse.SUPPRESS, **kwargs)


def deprecations(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """Each old spelling ``parser`` still accepts, with the flag that replaces it."""
    return [
        (option, action.new)
        for action in parser._actions
        if isinstance(action, _Deprecated)
        for option in action.option_strings
    ]


def add_output(parser: argparse.ArgumentParser, formats: Sequence[str], help_text: str) -> None:
    """``-o/--output FORMAT``: how the command prints (the first format is the default)."""
    parser.add_argument("-o", "--output", choices=list(formats), default=formats[0], help=help_text)


# ---- declaring a flag of each kind, in one line ---------------------------------------------


def add_file(parser: Any, flag: str, help_text: str, required: bool = False) -> None:
    """``FLAG FILE``: a file that is there (``existing_file``); ``parser`` may be a group."""
    parser.add_argument(flag, required=required, type=existing_file, metavar="FILE", help=help_text)


def add_prometheus(parser: Any, help_text: str, required: bool = False) -> None:
    """``--prometheus URL``: the Prometheus to read (``url``); ``parser`` may be a group."""
    parser.add_argument("--prometheus", required=required, type=url, metavar="URL", help=help_text)


def add_duration(
    parser: Any, flag: str, help_text: str, kind: Callable[[str], Any] | None = None, **kwargs: Any
) -> None:
    """``FLAG DURATION``, read by ``kind`` (default ``duration()``); ``kwargs``: ``default``, ``dest``."""
    parser.add_argument(flag, type=kind or duration(), metavar="DURATION", help=help_text, **kwargs)


def add_instant(parser: Any, flag: str, help_text: str, **kwargs: Any) -> None:
    """``FLAG ISO``: an ISO 8601 time with a zone (``instant``); ``kwargs``: ``default``."""
    parser.add_argument(flag, type=instant, metavar="ISO", help=help_text, **kwargs)
