"""Errors that point at the place: the file line, the row, the missing file, the field meant.

Each bad input goes through the command a user runs (``scaler.cli.main``) and must give
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
        f"scaler doctor: error: cannot read the cluster: the kubeconfig {missing} does not exist"
    )
    assert error_line(capsys, ["doctor", "--kubeconfig", str(tmp_path)]) == (
        f"scaler doctor: error: cannot read the cluster: the kubeconfig {tmp_path} is a directory, not a file"
    )
