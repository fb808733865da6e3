"""Rewrite docs/metrics.md's table of input series from the input table (scaler.inputs, as model.INPUTS).

The table between the two markers is generated; everything else in the file is written by
hand. `./dev docs` runs this; `--check` only says whether the file is current (exit 1 if not).
tests/test_inputs.py fails when the file and the table disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path

from scaler.model import INPUTS
from scaler.outputs.series import TARGET_LABELS

DOC = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"
BEGIN = "<!-- begin inputs: generated from scaler.model.INPUTS by ./dev docs -->"
END = "<!-- end inputs -->"


def input_table() -> list[str]:
    """The table of input series, in export order: a header, then for each row of the input
    table its series, type and labels, and its help followed by its ``doc``."""
    rows = ["| series | type | labels | meaning |", "|---|---|---|---|"]
    for spec in sorted(INPUTS.values(), key=lambda spec: spec.replica_state):
        if spec.series is not None:
            meaning = f"{spec.help} {spec.doc}".strip()
            rows.append(f"| `{spec.series}` | gauge | {', '.join(TARGET_LABELS)} | {meaning} |")
    return rows


def render(text: str) -> str:
    """``text`` (docs/metrics.md) with the generated table in place of what is between the markers."""
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"docs/metrics.md lacks the markers {BEGIN!r} ... {END!r}")
    return "\n".join([head + BEGIN, *input_table(), END + tail])


def main(argv: list[str]) -> int:
    """Write the table (or with ``--check``, exit 1 when they are out of date)."""
    text = DOC.read_text()
    new = render(text)
    if "--check" in argv:
        if new != text:
            print("docs/metrics.md's input table is out of date: run ./dev docs", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
