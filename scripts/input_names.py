"""Count the input names quoted as strings in scaler/, outside the input table.

    python scripts/input_names.py [--list]

Every string literal in ``scaler/`` equal to an observation input's name (``scaler.inputs.Input``)
is a second list of input names, which adding or renaming an input would have to find. The
input table itself (``scaler/inputs.py``) is where they belong; ``ALLOWED`` lists the strings that
are equal to an input's name but name something else. ``tests/test_inputs.py`` holds the count at 0.
Before the table was an enum (issue 23 item 1) the table was ``scaler/model.py``'s Observation; the
script measures that tree too.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLES = ("scaler/inputs.py", "scaler/model.py")  # the input table (now, and before issue 23)
# (module, string) -> why a string equal to an input's name is not one.
ALLOWED = {
    ("scaler/config.py", "cold_start_seconds"): "TargetPolicy's own field (coldStartSeconds), by name",
}


def input_names() -> set[str]:
    """Every observation input's name, from the input table."""
    sys.path.insert(0, str(ROOT))
    try:
        from scaler.inputs import Input  # noqa: PLC0415 - the tree measured decides which table exists

        return {str(i) for i in Input}
    except ImportError:
        from scaler.model import INPUTS  # noqa: PLC0415 - the table before issue 23

        return set(INPUTS)


def quoted(names: set[str]) -> list[tuple[str, int, str]]:
    """(module, line, name) of every string literal equal to an input's name outside the table."""
    found = []
    for path in sorted((ROOT / "scaler").rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        if module in TABLES:
            continue
        for node in ast.walk(ast.parse(path.read_text(), module)):
            if not isinstance(node, ast.Constant):
                continue
            text = node.value
            if isinstance(text, str) and text in names and (module, text) not in ALLOWED:
                found.append((module, node.lineno, text))
    return found


def main() -> int:
    """Print the counts (and with --list, every place)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="every place, not only the counts")
    args = parser.parse_args()
    found = quoted(input_names())
    per_module = Counter(module for module, _, _ in found)
    print(f"{len(found)} quoted input names in {len(per_module)} modules")
    for module, count in per_module.most_common():
        print(f"  {count:4d}  {module}")
    if args.list:
        for module, line, name in found:
            print(f"{module}:{line}: {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
