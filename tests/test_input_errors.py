"""Errors that point at the place: the file line, the row, the missing file, the field meant.

Each bad input goes through the command a user runs (``scaler.cli.dispatch``) and must give
exit status 2 and one line on stderr naming the place, never a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "scaler" / "examples" / "scaledobject.yaml"
HEADER = "timestamp_s,prompt_tokens,output_tokens\n"


def error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the CLI on ``argv``, check it failed with exit 2 and one stderr line, and return that line."""
    assert main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def replay_argv(tmp_path: Path, trace: Path, scaledobject: Path = EXAMPLE) -> list[str]:
    """``scaler replay`` on ``trace`` and ``scaledobject``, writing nothing the test keeps."""
    return [
        "replay",
        "--trace",
        str(trace),
        "--scaledobject",
        str(scaledobject),
        "--no-plot",
        "--out",
        str(tmp_path),
    ]


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        ("0,10,20\n1,abc,20\n", 3, "prompt_tokens 'abc' is not a number"),
        ("0,10,20\n1,10\n", 3, "2 values; each row needs 3: timestamp_s,prompt_tokens,output_tokens"),
        ("0,10,20\n0,1,2,3\n", 3, "4 values where the first row has 3"),
        ("0,10,20\n\n# a comment line\n5,-10,20\n", 5, "prompt_tokens -10 must be a finite number >= 0"),
        ("0,10,20\n1,10,nan\n", 3, "output_tokens nan must be a finite number >= 0"),
    ],
    ids=["not-a-number", "too-few-values", "more-values", "negative-after-blank-and-comment", "nan"],
)
def test_a_bad_request_csv_names_its_file_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, line: int, message: str
) -> None:
    """A bad row of a request trace is named by its line in the file (header = 1), without numpy's advice."""
    trace = tmp_path / "requests.csv"
    trace.write_text(HEADER + body)
    assert (
        error_line(capsys, replay_argv(tmp_path, trace)) == f"scaler replay: error: {trace}:{line}: {message}"
    )


def test_a_rate_trace_s_uneven_window_names_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rate window that breaks the even spacing is named by its file line and value."""
    trace = tmp_path / "rates.csv"
    trace.write_text("window_start_s,req_per_s\n0,1\n600,2\n1300,2\n")
    argv = [
        *replay_argv(tmp_path, trace),
        "--sizes-from",
        str(ROOT / "benchmarks" / "traces" / "azure2023_conv.csv"),
    ]
    assert error_line(capsys, argv) == (
        f"scaler replay: error: {trace}:4: window_start_s 1300 breaks the windows' even, increasing spacing"
        " (600 s from the first row to the second)"
    )


def test_a_csv_with_only_its_header_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A request trace with a header and no row says it holds no row."""
    trace = tmp_path / "empty.csv"
    trace.write_text(HEADER)
    assert error_line(capsys, replay_argv(tmp_path, trace)) == (
        f"scaler replay: error: {trace} holds no row after its header"
    )


def misspelled(tmp_path: Path) -> Path:
    """The example ScaledObject with ``minReplicaCount`` misspelled ``minReplicaCont``."""
    text = EXAMPLE.read_text()
    assert "  minReplicaCount:" in text
    path = tmp_path / "so.yaml"
    path.write_text(text.replace("  minReplicaCount:", "  minReplicaCont:"))
    return path


@pytest.mark.parametrize("command", ["dry-run", "replay"])
def test_a_misspelled_spec_field_is_named_with_the_field_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """dry-run and replay name spec.minReplicaCont and the field meant, not its consequence."""
    so = misspelled(tmp_path)
    if command == "dry-run":
        observations = tmp_path / "obs.jsonl"
        observations.write_text('{"now": "2026-12-01T03:00:00Z", "queue_waiting": 0}\n')
        argv = ["dry-run", "--scaledobject", str(so), "--observations", str(observations)]
    else:
        trace = tmp_path / "requests.csv"
        trace.write_text(HEADER + "0,10,20\n1,10,20\n")
        argv = replay_argv(tmp_path, trace, so)
    line = error_line(capsys, argv)
    assert line.endswith(
        f"{so}: spec.minReplicaCont is not a field of KEDA's ScaledObject; did you mean spec.minReplicaCount?"
    )


@pytest.mark.parametrize("command", ["dry-run", "replay", "convert"])
def test_a_value_keda_refuses_is_named_with_the_field_and_the_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """Every command reading a manifest names each value KEDA's CRD refuses, and its rule, at once."""
    text = EXAMPLE.read_text()
    assert "  pollingInterval: 15\n" in text
    assert "  minReplicaCount: 2\n" in text
    so = tmp_path / "so.yaml"
    so.write_text(
        text.replace("  pollingInterval: 15\n", '  pollingInterval: "15s"\n').replace(
            "  minReplicaCount: 2\n", "  minReplicaCount: 20\n"
        )
    )
    if command == "dry-run":
        observations = tmp_path / "obs.jsonl"
        observations.write_text('{"now": "2026-12-01T03:00:00Z", "queue_waiting": 0}\n')
        argv = ["dry-run", "--scaledobject", str(so), "--observations", str(observations)]
    elif command == "replay":
        trace = tmp_path / "requests.csv"
        trace.write_text(HEADER + "0,10,20\n1,10,20\n")
        argv = replay_argv(tmp_path, trace, so)
    else:
        argv = ["convert", str(so)]
    line = error_line(capsys, argv)
    assert line.endswith(
        ": spec.minReplicaCount: 20 is above maxReplicaCount 16"
        " (KEDA's CRD: minReplicaCount <= maxReplicaCount);"
        " spec.pollingInterval: '15s' is not an integer >= 1 (KEDA's CRD)"
    )


def test_doctor_says_a_missing_kubeconfig_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """doctor --kubeconfig on a path with no file says the file does not exist."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    missing = tmp_path / "missing"
    assert error_line(capsys, ["doctor", "--kubeconfig", str(missing)]) == (
        f"scaler doctor: error: --kubeconfig {missing}: no such file"
    )
    assert error_line(capsys, ["doctor", "--kubeconfig", str(tmp_path)]) == (
        f"scaler doctor: error: --kubeconfig {tmp_path}: is a folder, not a file"
    )


AZURE = ROOT / "benchmarks" / "traces" / "azure2023_conv.csv"
RATES = ROOT / "benchmarks" / "traces" / "servegen_language_m-large_rate_10min.csv"


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["replay", "--trace", str(RATES), "--sizes-from", str(AZURE), "--rate-scale", "-2"],
            "scaler replay: error: --rate-scale '-2': must be a number above 0",
        ),
        (
            ["replay", "--prometheus", "http://127.0.0.1:1", "--since", "-7d"],
            "scaler replay: error: --since '-7d': must be above 0s",
        ),
        (
            ["replay", "--prometheus", "http://127.0.0.1:1", "--since", "0"],
            "scaler replay: error: --since '0': must be above 0s",
        ),
        (
            ["replay", "--prometheus", "http://127.0.0.1:1", "--since", "-1"],
            "scaler replay: error: --since '-1': must be above 0s",
        ),
        (
            ["replay", "--prometheus", "prometheus:9090"],
            "scaler replay: error: --prometheus 'prometheus:9090': must be an http:// or https:// URL,"
            " such as http://prometheus:9090",
        ),
        (
            ["replay", "--trace", "/no/such/trace.csv"],
            "scaler replay: error: --trace /no/such/trace.csv: no such file",
        ),
        (
            ["replay", "--trace", str(AZURE), "--hours", "72:0"],
            "scaler replay: error: --hours '72:0': write A:B with 0 <= A < B, such as 0:72",
        ),
        (
            ["replay", "--trace", str(AZURE), "--start", "2026-12-07T00:00:00"],
            "scaler replay: error: --start '2026-12-07T00:00:00' needs a zone (Z or +08:00)",
        ),
        (
            ["dry-run", "--prometheus", "http://127.0.0.1:1", "--interval", "-5"],
            "scaler dry-run: error: --interval '-5': must be above 0s",
        ),
        (
            ["dry-run", "--prometheus", "http://", "--once"],
            "scaler dry-run: error: --prometheus 'http://': must name a host, such as http://prometheus:9090",
        ),
        (
            ["dry-run", "--prometheus", "http://127.0.0.1:1", "--rate-window", "0m"],
            "scaler dry-run: error: --rate-window '0m': must be a PromQL range above 0 such as 30s, 1m or 5m",
        ),
        (
            ["demo", "--interval", "2x"],
            "scaler demo: error: --interval '2x' is not a duration such as"
            " 90s, 5m, 6h or 7d (or bare seconds)",
        ),
        (
            ["timeline", "--name", "llama", "--prometheus", "http://127.0.0.1:1"],
            "scaler timeline: error: --name 'llama': write it as NAMESPACE/NAME, such as inference/llama",
        ),
        (
            ["timeline", "--prometheus", "http://127.0.0.1:1"],
            "scaler timeline: error: --name is required",
        ),
        (
            ["trace", "--name", "a/b", "--prometheus", "http://127.0.0.1:1", "--since", "7"],
            "scaler timeline: error: --since '7' is not a duration such as 90s, 5m, 6h or 7d",
        ),
        (
            ["doctor", "--max-generation", "0"],
            "scaler doctor: error: --max-generation '0': must be above 0s",
        ),
        (
            ["serve", "--prometheus", "prometheus:9090"],
            "scaler serve: error: --prometheus 'prometheus:9090': must be an http:// or https:// URL,"
            " such as http://prometheus:9090",
        ),
    ],
    ids=[
        "rate-scale-negative",
        "since-negative",
        "since-zero-bare",
        "since-negative-bare",
        "url-without-scheme",
        "missing-trace",
        "hours-backwards",
        "start-without-zone",
        "interval-negative",
        "url-without-host",
        "rate-window-zero",
        "demo-interval-not-a-duration",
        "trace-name-without-namespace",
        "timeline-without-name",
        "trace-since-bare-number",
        "max-generation-zero",
        "serve-url-without-scheme",
    ],
)
def test_a_bad_flag_is_one_line_naming_the_flag_and_the_rule_before_any_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], line: str
) -> None:
    """Every flag is checked as the command line is read: one line, the flag, its value, the rule,
    exit status 2, and nothing on stdout (no conversion line, no summary) before it."""
    monkeypatch.delenv("SCALER_PROMETHEUS", raising=False)
    command, rest = argv[0], argv[1:]
    if command in ("replay", "dry-run") and "--scaledobject" not in rest:
        rest = [*rest, "--scaledobject", str(ROOT / "benchmarks" / "baseline-published.yaml")]
    assert main([command, *rest]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [line]
    assert captured.out == ""


def test_a_missing_trace_is_named_before_a_plain_scaledobject_is_converted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """replay of a plain KEDA ScaledObject converts it first, each change on stderr: a --trace
    that is not there is the one line, before any of them."""
    plain = ROOT / "benchmarks" / "baseline-published.yaml"
    assert main(["replay", "--trace", "/no/such.csv", "--scaledobject", str(plain)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "scaler replay: error: --trace /no/such.csv: no such file"
    ]


def test_an_unreachable_prometheus_prints_no_summary_before_its_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """dry-run against a Prometheus nobody serves: the error line alone, no "summary: 0 decisions"."""
    code = main(["dry-run", "--scaledobject", str(EXAMPLE), "--prometheus", "http://127.0.0.1:9", "--once"])
    captured = capsys.readouterr()
    assert code == 2
    assert "summary" not in captured.out + captured.err
    assert captured.err.startswith("scaler dry-run: error: prometheus http://127.0.0.1:9: ")


def test_a_bug_exits_1_with_its_traceback_only_behind_debug(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug of ours is not called the user's mistake: exit status 1, one line saying it is a bug;
    --debug adds the traceback."""
    from scaler.cli import dispatch as cli

    def broken(args: object) -> int:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setitem(cli.COMMANDS, "doctor", broken)
    assert main(["doctor"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "scaler doctor: bug: ZeroDivisionError: division by zero"
        " (--debug shows the traceback; please report it)"
    ]
    assert main(["doctor", "--debug"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert err.splitlines()[-1] == "scaler doctor: bug: ZeroDivisionError: division by zero"


def test_an_old_spelling_works_for_one_release_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """convert -o PATH (now --out) still writes the file, with one deprecation line on stderr."""
    new = tmp_path / "new.yaml"
    assert main(["convert", str(ROOT / "benchmarks" / "baseline-published.yaml"), "-o", str(new)]) == 0
    assert "type: external" in new.read_text()
    assert capsys.readouterr().err.splitlines() == [
        "scaler convert: deprecated: -o is now --out; the old spelling goes in the next release"
    ]


def test_a_bad_variable_names_its_flag_and_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """scaler serve's SCALER_PROMETHEUS is checked by the same rule as --prometheus, at start."""
    monkeypatch.setenv("SCALER_PROMETHEUS", "prometheus:9090")
    assert error_line(capsys, ["serve"]) == (
        "scaler serve: error: invalid settings: --prometheus / SCALER_PROMETHEUS: must be an http://"
        " or https:// URL, such as http://prometheus:9090"
    )


@pytest.mark.parametrize(
    ("argv", "flag", "rule"),
    [
        (
            ["timeline", "--name", "ns/so", "--prometheus", "http://p:9090", "--out", "{nodir}/t.png"],
            "--out",
            "no folder",
        ),
        (
            ["replay", "--trace", "{trace}", "--scaledobject", str(EXAMPLE), "--export", "{nodir}/t.csv"],
            "--export",
            "no folder",
        ),
        (
            ["replay", "--trace", "{trace}", "--scaledobject", str(EXAMPLE), "--out", "{trace}"],
            "--out",
            "is a file, not a folder",
        ),
        (["convert", str(EXAMPLE), "--out", "{tmp}"], "--out", "is a folder"),
    ],
    ids=["timeline-out", "replay-export", "replay-out-a-file", "convert-out-a-folder"],
)
def test_a_path_to_write_that_cannot_be_written_is_refused_as_parsed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], flag: str, rule: str
) -> None:
    """A file or folder to write where it cannot be is one line naming the flag, before anything runs."""
    trace = tmp_path / "requests.csv"
    trace.write_text(HEADER + "0,10,20\n")
    paths = {"nodir": str(tmp_path / "nodir"), "trace": str(trace), "tmp": str(tmp_path)}
    line = error_line(capsys, [arg.format(**paths) for arg in argv])
    assert line.startswith(f"scaler {argv[0]}: error: {flag} ")
    assert rule in line


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["replay", "--prometheus", "http://a:9090", "--prometheus", "http://b:9090"], "--prometheus"),
        (["replay", "--trace", "{trace}", "--since", "1d", "--since", "2d"], "--since"),
        (
            ["replay", "--trace", "{trace}", "--scaledobject", str(EXAMPLE), "--scaledobject", str(EXAMPLE)],
            "--scaledobject",
        ),
        (["convert", str(EXAMPLE), "--out", "{tmp}/a.yaml", "--out", "{tmp}/b.yaml"], "--out"),
        (
            [
                "dry-run",
                "--scaledobject",
                str(EXAMPLE),
                "--prometheus",
                "http://a:9090",
                "--interval",
                "15",
                "--interval",
                "1m",
            ],
            "--interval",
        ),
        (["serve", "--port", "9090", "--port", "9091"], "--port"),
    ],
    ids=[
        "replay-prometheus",
        "replay-since",
        "replay-scaledobject",
        "convert-out",
        "dry-run-interval",
        "serve-port",
    ],
)
def test_a_flag_given_twice_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], flag: str
) -> None:
    """A flag that takes a value, given twice, is one line naming it, not the last value taken silently."""
    trace = tmp_path / "requests.csv"
    trace.write_text(HEADER + "0,10,20\n")
    line = error_line(capsys, [arg.format(trace=trace, tmp=tmp_path) for arg in argv])
    assert line == f"scaler {argv[0]}: error: {flag} given twice: give it once"


def test_an_old_and_a_new_spelling_of_one_flag_are_refused_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """convert's old -o and its --out, both given, are refused naming both spellings."""
    assert (
        main(["convert", str(EXAMPLE), "-o", str(tmp_path / "a.yaml"), "--out", str(tmp_path / "b.yaml")])
        == 2
    )
    assert capsys.readouterr().err.splitlines()[-1] == (
        "scaler convert: error: --out given twice (as -o and --out): give it once"
    )


def test_a_live_dry_run_needs_a_prometheus_from_the_flag_or_the_trigger(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """dry-run with neither --observations, --prometheus nor a prometheusAddress names all three."""
    line = error_line(capsys, ["dry-run", "--scaledobject", str(EXAMPLE), "--once"])
    assert line == (
        "scaler dry-run: error: --observations FILE (offline) or --prometheus URL (live): one is needed,"
        f" the trigger of {EXAMPLE} names no prometheusAddress"
    )


def test_a_plain_keda_object_given_to_dry_run_points_to_convert(capsys: pytest.CaptureFixture[str]) -> None:
    """A ScaledObject with only plain KEDA triggers names them and the scaler convert command for it."""
    published = ROOT / "benchmarks" / "baseline-published.yaml"
    line = error_line(capsys, ["dry-run", "--scaledobject", str(published), "--prometheus", "http://p:9090"])
    assert line.startswith(
        f"scaler dry-run: error: {published}: the ScaledObject has no trigger of type external"
    )
    assert "its triggers (prometheus, prometheus, cron) are plain KEDA ones" in line
    assert f"`scaler convert {published}`" in line
