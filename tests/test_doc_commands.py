"""The README and the docs say true things about the commands: every command quoted in README.md,
CONTRIBUTING.md and docs/*.md is run (here, or by the test named for it) or listed with why it is
not, every flag quoted is one the parser has, every relative link resolves, and the README stays a
front door. docs/cli.md (tests/test_cli_doc.py) documents every option.

A quoted command is a line of a ``sh`` block (``\\`` joins lines, ``#`` starts a comment) or a line
that starts with ``$ `` in any other block; the other lines of a block are output.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scaler import cli
from scaler.adoption import convert, doctor
from scaler.adoption import timeline as picture
from scaler.cli import build_parser, demo
from scaler.model import Signal
from scaler.replay import cli as replay_cli
from scaler.service import settings
from scaler.sim.prometheus import LocalPrometheus
from tests import k8s_double as k8s
from tests.conftest import require_kubectl
from tests.test_doctor import healthy, with_pods

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 300  # the front door; the manual is docs/ (issue 29, item 3)


COMMANDS = cli.commands()


# ---- the quoted commands ---------------------------------------------------------------------


@dataclass(frozen=True)
class Quoted:
    """One command quoted in a doc: where, and the command as a shell would read it."""

    doc: str
    line: int
    command: str


BLOCK = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\n(?P<body>.*?)^(?P=indent)```", re.S | re.M)


def quoted(path: Path) -> list[Quoted]:
    """The commands quoted in ``path``'s code blocks, in order."""
    text = path.read_text()
    found: list[Quoted] = []
    for block in BLOCK.finditer(text):
        first = text[: block.start("body")].count("\n") + 1
        lines = block["body"].splitlines()
        if block["lang"] == "sh":
            pending, start = "", 0
            for offset, line in enumerate(lines):
                start = start if pending else offset
                body = line.strip()
                if body.endswith("\\"):
                    pending += body[:-1] + " "
                    continue
                command = re.sub(r"\s+#\s.*$", "", pending + body).strip()
                pending = ""
                if command and not command.startswith("#"):
                    found.append(Quoted(path.name, first + start, " ".join(command.split())))
        else:
            found += [
                Quoted(path.name, first + offset, " ".join(line.strip()[2:].split()))
                for offset, line in enumerate(lines)
                if line.strip().startswith("$ ")
            ]
    return found


ALL_QUOTED = [q for path in DOCS for q in quoted(path)]


@dataclass(frozen=True)
class Run:
    """Run here, in a scratch folder holding the repository's folders and the docs' files: the
    exit status wanted and a line the output must hold. ``needs`` names the doubles the
    command's placeholders stand for: ``prometheus`` (a real one scraping a simulated vLLM
    fleet, for URL and the docs' addresses) and ``cluster`` (the Kubernetes API double, for
    ``~/.kube/config`` and ``kubeconfig``)."""

    says: str
    status: int = 0
    needs: frozenset[str] = frozenset()
    writes: str = ""


@dataclass(frozen=True)
class By:
    """Run by another test, on a setup of its own (a week of history, a cluster's pods): the
    test is named, and its module passes the command's subcommand and every flag quoted."""

    test: str


@dataclass(frozen=True)
class NotRun:
    """Not run by any test, and why."""

    why: str


WITH_CLUSTER = frozenset({"prometheus", "cluster"})
SUITE = "it is this test suite (or its unit half): running it from a test would run the test again"
CLUSTER = (
    "needs a cluster running KEDA: the Kubernetes double serves the scaler's reads, not kubectl's"
    " apply; tests/test_manifests.py validates every object it would apply, and"
    " tests/test_manifest_image.py renders them with kubectl"
)
DOCKER = "needs a Docker engine and a registry to push to; neither is here, and no test may need them"
BENCHMARK = (
    "a benchmark: minutes of load or replays whose figures BENCHMARKS.md records; no test asserts"
    " a duration or a decision-quality figure"
)
SYNOPSIS = "a synopsis, [...] marking what is optional: its flags are checked against the parser below"
WEEK = "tests/test_replay_prometheus.py::test_a_plain_keda_object_is_replayed_against_its_conversion"

HOW: dict[str, Run | By | NotRun] = {
    # README.md
    "./dev demo": By("tests/test_live_e2e.py::test_demo_prints_live_decisions_within_a_minute"),
    "./dev test": NotRun(SUITE),
    "./dev test --fast": NotRun(SUITE),
    "scaler doctor --kubeconfig ~/.kube/config --prometheus URL": Run("no findings", needs=WITH_CLUSTER),
    "scaler convert my-scaledobject.yaml --out converted.yaml --replay --prometheus URL": By(
        "tests/test_replay_prometheus.py::test_convert_replays_on_prometheus_history"
    ),
    "docker build --build-arg VERSION=0.1.0 -t REGISTRY/llm-gpu-scaler:0.1.0 .": NotRun(DOCKER),
    "docker push REGISTRY/llm-gpu-scaler:0.1.0": NotRun(DOCKER),
    "kubectl apply -k manifests/": NotRun(CLUSTER),
    "kubectl apply -f converted.yaml": NotRun(CLUSTER),
    "scaler timeline --name NS/NAME --prometheus URL": By(
        "tests/test_timeline.py::test_the_decision_history_is_summed_up_and_drawn"
    ),
    # docs/cli.md
    "scaler dry-run --scaledobject scaler/examples/scaledobject.yaml --observations"
    " scaler/examples/observations.jsonl": Run("summary: "),
    # docs/convert.md
    "scaler convert my-scaledobject.yaml --out converted.yaml --replay"
    " benchmarks/traces/azure2023_conv.csv": Run("new (this scaler)", writes="converted.yaml"),
    "scaler convert benchmarks/baseline-published.yaml --out new.yaml --replay"
    " benchmarks/traces/azure2023_conv.csv": Run("old (as written)", writes="replay-out/replay.png"),
    # docs/deploy.md
    "kubectl kustomize manifests/ | grep 'image:'": Run("image: llm-gpu-scaler:"),
    "kubectl -n llm-gpu-scaler rollout status deploy/llm-gpu-scaler": NotRun(CLUSTER),
    "kubectl -n inference get scaledobject,hpa": NotRun(CLUSTER),
    # docs/doctor.md, docs/inert.md
    "scaler doctor --kubeconfig ~/.kube/config --prometheus http://prometheus.monitoring:9090": Run(
        "no findings", needs=WITH_CLUSTER
    ),
    "scaler doctor --kubeconfig kubeconfig --prometheus http://127.0.0.1:48273": Run(
        "no findings", needs=WITH_CLUSTER
    ),
    # docs/replay.md, docs/replay-report.md
    "scaler replay --trace TRACE.csv --scaledobject SO.yaml [--baseline BASELINE.yaml]"
    " [--cluster CLUSTER.yaml] [--kubeconfig FILE] [--out DIR] [--seed N] [--sizes-from REQUESTS.csv]"
    " [--rate-scale F] [--hours A:B]"
    " [--start ISO] [--objective S] [--keda-version 2.21] [--no-plot]": NotRun(SYNOPSIS),
    "scaler replay --prometheus URL --scaledobject SO.yaml [--since 7d] [--until ISO] [--step 1m]"
    " [--export TRACE.csv] [--baseline BASELINE.yaml] [--cluster CLUSTER.yaml] [--kubeconfig FILE]"
    " [--out DIR] [--seed N] [--rate-scale F] [--objective S] [--keda-version 2.21] [--no-plot]": NotRun(
        SYNOPSIS
    ),
    "scaler replay --trace benchmarks/traces/azure2023_conv.csv --scaledobject"
    " scaler/examples/scaledobject.yaml": Run("keda baseline", writes="replay-out/summary.json"),
    "scaler replay --prometheus http://prometheus.example:9090 --scaledobject my-scaledobject.yaml"
    " --since 7d": By(WEEK),
    "scaler replay --trace benchmarks/traces/azure2023_conv.csv"
    " --scaledobject benchmarks/scaledobject-70b-llm-d.yaml --baseline benchmarks/scaledobject-70b.yaml"
    " --cluster benchmarks/cluster-70b-llm-d.yaml": Run("behind llm-d's flow control (router: llm-d)"),
    "scaler replay --prometheus http://127.0.0.1:9090 --scaledobject plain.yaml --since 7d"
    " --until 2026-11-30T00:00:00Z": By(WEEK),
    "scaler convert old.yaml --out new.yaml --replay benchmarks/traces/azure2023_conv.csv"
    " --replay-out convert-out": Run("new (this scaler)", writes="convert-out/replay.png"),
    # CONTRIBUTING.md
    ".venv/bin/python -m benchmarks.service_speed": NotRun(BENCHMARK),
    ".venv/bin/python -m benchmarks.load_test": NotRun(BENCHMARK),
    ".venv/bin/python -m benchmarks.restart": NotRun(BENCHMARK),
    ".venv/bin/python -m benchmarks.replay_week": NotRun(BENCHMARK),
    ".venv/bin/python -m benchmarks.replay_speed": NotRun(BENCHMARK),
    ".venv/bin/python -m benchmarks.fuzz_metadata": NotRun(BENCHMARK),
    ".venv/bin/python -m benchmarks.engine_memory": NotRun(BENCHMARK),
    ".venv/bin/python benchmarks/image_size.py": NotRun(BENCHMARK),
    ".venv/bin/python benchmarks/decision_quality.py": NotRun(BENCHMARK),
    ".venv/bin/python benchmarks/decision_quality.py --kv-full 0.6": NotRun(BENCHMARK),
    (
        ".venv/bin/python benchmarks/decision_quality.py --quick --physics step"
        " --profile llama-3-70b-4xh100 --rate 8"
    ): NotRun(BENCHMARK),
    ".venv/bin/python benchmarks/router_quality.py": NotRun(BENCHMARK),
    ".venv/bin/python benchmarks/constant_fleet.py": NotRun(BENCHMARK),
    ".venv/bin/python -m benchmarks.pd_quality": NotRun(BENCHMARK),
    ".venv/bin/python -m benchmarks.gpu_gate": NotRun(BENCHMARK),
    ".venv/bin/python -m benchmarks.inert_probe": NotRun(BENCHMARK),
    ".venv/bin/python -m benchmarks.tenant_regex": NotRun(BENCHMARK),
}


def test_every_quoted_command_is_run_or_said_not_to_be() -> None:
    """Each command quoted in the docs has an entry saying how it is run (or why not), and each
    entry is a command some doc quotes: a command edited in a doc fails here until its entry
    follows it."""
    unknown = [f"{q.doc}:{q.line}: {q.command}" for q in ALL_QUOTED if q.command not in HOW]
    assert unknown == [], "quoted but neither run nor listed in HOW"
    assert sorted(set(HOW) - {q.command for q in ALL_QUOTED}) == [], "listed in HOW, quoted nowhere"


def _words(command: str) -> list[str]:
    """What the test that runs ``command`` must pass: its subcommand (``./dev demo``'s is demo) and
    every flag it quotes."""
    tokens = command.split()
    if tokens[0] == "./dev":
        return [tokens[1]]
    return [tokens[1], *(t for t in tokens[2:] if t.startswith("-"))]


@pytest.mark.parametrize("command", sorted(c for c, how in HOW.items() if isinstance(how, By)))
def test_a_command_run_elsewhere_is_run_there(command: str) -> None:
    """The test named for a command exists, and its module passes the command's subcommand and flags."""
    how = HOW[command]
    assert isinstance(how, By)
    path, name = how.test.split("::")
    module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
    assert callable(getattr(module, name, None)), how.test
    source = inspect.getsource(module)
    assert [w for w in _words(command) if f'"{w}"' not in source] == [], how.test


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A folder to run quoted commands in: the repository's folders linked in, the docs' file
    names (a plain KEDA ScaledObject for each of theirs), and HOME there."""
    for name in ("benchmarks", "manifests", "scaler", "scripts"):
        (tmp_path / name).symlink_to(ROOT / name)
    for name in ("my-scaledobject.yaml", "old.yaml"):
        shutil.copy(ROOT / "benchmarks" / "baseline-published.yaml", tmp_path / name)
    return tmp_path


@pytest.fixture
def cluster(scratch: Path) -> Iterator[Path]:
    """The Kubernetes API double serving a healthy cluster whose vLLM pods are the simulated
    fleet's, with its kubeconfig at ``~/.kube/config`` and ``kubeconfig`` in the scratch folder."""
    with k8s.KubeDouble(token="t") as double:
        for obj in with_pods(healthy(), "vllm-0", "vllm-1"):
            double.apply(obj)
        config = k8s.kubeconfig(scratch / "kubeconfig", double.url, "t")
        (scratch / ".kube").mkdir()
        shutil.copy(config, scratch / ".kube" / "config")
        yield config


ADDRESSES = ("http://prometheus.monitoring:9090", "http://127.0.0.1:48273", "http://prometheus.example:9090")


def _params() -> Iterator[object]:
    for command, how in sorted(HOW.items()):
        if isinstance(how, Run):
            marks = [pytest.mark.prometheus] if "prometheus" in how.needs else []
            yield pytest.param(command, marks=marks, id=command)


@pytest.mark.e2e  # each command runs in a subprocess
@pytest.mark.parametrize("command", list(_params()))
def test_a_quoted_command_runs_as_written(
    command: str, scratch: Path, request: pytest.FixtureRequest
) -> None:
    """The command, as the doc quotes it, exits as it should and prints what it should, with the
    doc's placeholders standing for the test's doubles."""
    how = HOW[command]
    assert isinstance(how, Run)
    line = command
    if "prometheus" in how.needs:
        request.getfixturevalue("fleet")
        prometheus: LocalPrometheus = request.getfixturevalue("prometheus")
        assert prometheus.wait_for("count(vllm:num_requests_running) >= 2", timeout_s=30)
        for address in ADDRESSES:
            line = line.replace(address, prometheus.url)
        line = re.sub(r"\bURL\b", prometheus.url, line)
    if "cluster" in how.needs:
        request.getfixturevalue("cluster")
    if line.startswith("kubectl"):
        require_kubectl()
    env = {**os.environ, "HOME": str(scratch), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-c", line], cwd=scratch, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    said = done.stdout + done.stderr
    assert done.returncode == how.status, said
    assert how.says in said
    if how.writes:
        assert (scratch / how.writes).is_file(), how.writes


# ---- the flags quoted --------------------------------------------------------------------------

# What follows `scaler` in a quoted span that is not a command: a placeholder, or a message's prefix.
NOT_A_COMMAND = re.compile(r"^(COMMAND|[\w-]+:)$")


def _documented(command: str) -> set[str]:
    """A command's flags, every spelling but the hidden old ones (they are deprecated)."""
    return {
        option
        for action in COMMANDS[command]._actions
        if action.help != argparse.SUPPRESS
        for option in action.option_strings
    }


def quoted_scaler_commands() -> list[tuple[str, str]]:
    """Every ``scaler ...`` the docs quote, in a code span or a command block: (doc, text)."""
    found = [(q.doc, q.command) for q in ALL_QUOTED if q.command.startswith("scaler ")]
    for path in DOCS:
        for span in re.findall(r"`(scaler [^`]+)`", path.read_text()):
            found.append((path.name, " ".join(span.split())))
    return found


def test_quoted_flags_are_the_parser_s() -> None:
    """Each ``scaler COMMAND --flag`` the docs quote names a command and flags it has, in their
    current spelling: an old spelling (``convert -o``) or a flag gone fails here."""
    wrong = []
    for doc, text in quoted_scaler_commands():
        words = text.split()
        if len(words) < 2 or words[1].startswith("-") or NOT_A_COMMAND.match(words[1]):
            continue
        if words[1] not in COMMANDS:
            wrong.append(f"{doc}: {text}: no command {words[1]}")
            continue
        for word in words[2:]:
            flag = word.strip("[](),;:.'\"").split("=")[0]
            if flag.startswith("-") and flag != "-" and flag not in _documented(words[1]) | {"--help"}:
                wrong.append(f"{doc}: {text}: {flag}")
    assert wrong == []


def test_the_flag_check_catches_an_old_spelling() -> None:
    """The check above reads convert's -o (now --out) as a flag convert does not document."""
    assert "-o" not in _documented("convert")
    assert "--out" in _documented("convert")


# ---- the Engine API example --------------------------------------------------------------------


def test_the_engine_api_example_returns_what_it_says() -> None:
    """docs/architecture.md's Engine API example, run as written, returns the target, proposals,
    binding signal, clamps and inert reasons its comments give."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("\n## Engine API\n", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)[:1]
    namespace: dict[str, object] = {}
    exec(code, namespace)  # the doc's own example, run as a reader would
    decision = namespace["d"]
    said = dict(re.findall(r"^d\.(replicas|proposals|binding|clamps|inert)\s+# (.*)$", code, re.M))
    assert set(said) == {"replicas", "proposals", "binding", "clamps", "inert"}
    for name, comment in said.items():
        value = comment if name == "proposals" else comment.split(":")[0]
        assert getattr(decision, name) == eval(value, {"Signal": Signal}), name  # the doc's literal


# ---- links and the front door -----------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """A heading's anchor as GitHub writes it: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of ``path``'s headings (code blocks left out), a repeated one numbered."""
    text = BLOCK.sub("", path.read_text())
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    """The relative links of ``path``, outside code blocks."""
    text = BLOCK.sub("", path.read_text())
    return [target for target in LINK.findall(text) if not re.match(r"^[a-z]+:", target)]


MARKDOWN = [*DOCS, ROOT / "BENCHMARKS.md"]


@pytest.mark.parametrize("path", MARKDOWN, ids=[p.name for p in MARKDOWN])
def test_every_relative_link_resolves(path: Path) -> None:
    """Each ``[text](path#anchor)`` names a file of the repository, and a heading it has."""
    broken = []
    for target in links(path):
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        missing_anchor = anchor and resolved.suffix == ".md" and anchor not in anchors(resolved)
        if not resolved.exists() or missing_anchor:
            broken.append(target)
    assert broken == []


def test_the_link_check_reads_github_s_anchors() -> None:
    """Anchors are made as GitHub makes them, so a link to a heading with code and punctuation
    resolves, and one to a heading that is not there does not."""
    assert slug("Your own history: `--prometheus URL`") == "your-own-history---prometheus-url"
    assert slug("4. Need: the fewest replicas within the objective's budget") == (
        "4-need-the-fewest-replicas-within-the-objectives-budget"
    )
    assert "did-it-land" in anchors(ROOT / "docs" / "keda.md")
    assert "no-such-heading" not in anchors(ROOT / "docs" / "keda.md")


def test_the_readme_is_a_front_door() -> None:
    """The README stays short, and every page of docs/ is reachable from it, through the pages it
    links to."""
    assert len(README.read_text().splitlines()) < README_MAX_LINES
    reached, todo = set(), [README]
    while todo:
        page = todo.pop()
        for target in links(page):
            linked = (page.parent / target.partition("#")[0]).resolve()
            if linked.suffix == ".md" and linked.exists() and linked not in reached:
                reached.add(linked)
                todo.append(linked)
    assert sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.resolve() not in reached) == []


def test_the_readme_s_trigger_is_the_example_s_and_valid() -> None:
    """The README's first YAML block is the trigger a user writes: its metadata is valid, and each
    key it shows has the embedded example's value (scaler/examples/scaledobject.yaml), so the front
    door and the example cannot drift apart (broken once: a ``maxReplicas`` of 15 fails)."""
    import yaml

    from scaler.config import parse_metadata

    blocks = [m["body"] for m in BLOCK.finditer(README.read_text()) if m["lang"] == "yaml"]
    assert blocks, "the README shows no trigger"
    shown = yaml.safe_load(blocks[0])["triggers"][0]
    assert shown["type"] == "external"
    example = yaml.safe_load((ROOT / "scaler" / "examples" / "scaledobject.yaml").read_text())
    metadata = example["spec"]["triggers"][0]["metadata"]
    assert {key: metadata.get(key) for key in shown["metadata"]} == shown["metadata"]
    parse_metadata(shown["metadata"])  # raises MetadataError naming every bad key


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_is_in_the_readme_s_table(command: str) -> None:
    """Each subcommand has a row in the README's command table."""
    assert f"| `scaler {command}` |" in README.read_text()


MODULE_DOCSTRINGS = [
    (module.__doc__ or "").strip() for module in (cli, convert, doctor, picture, replay_cli, demo, settings)
]


@pytest.mark.parametrize("command", ["scaler", *sorted(COMMANDS)])
def test_help_is_written_for_users(command: str) -> None:
    """--help shows a description written for users, not a module's docstring for developers."""
    parser = build_parser() if command == "scaler" else COMMANDS[command]
    assert parser.description
    assert parser.description.strip() not in MODULE_DOCSTRINGS
    assert "``" not in parser.format_help()
