"""docs/metadata.md's table of keys is generated from the metadata parser and current, and the bounds
it prints are the ones the parser holds a value to."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scaler.config import ALIASES, KEDA_KEYS, MetadataError, parse_metadata
from tests.helpers import script

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "metadata.md"


GEN = script("gen_docs")


def rows() -> dict[str, list[str]]:
    """The generated table's rows, by key: value, default, bounds, meaning."""
    found: dict[str, list[str]] = {}
    for line in GEN.metadata_table():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if cells and cells[0].startswith("`"):
            found[cells[0].strip("`")] = cells[1:]
    return found


def test_docs_metadata_md_is_current() -> None:
    """docs/metadata.md is what ./dev docs writes from TargetPolicy: a key added, renamed, given a new
    default or bound, or a docstring reworded without regenerating fails here."""
    text = DOC.read_text()
    assert GEN.render_metadata(text) == text, "docs/metadata.md is out of date: run ./dev docs"


def test_every_key_has_one_row_with_its_description() -> None:
    """Each metadata key the parser accepts has exactly one row, and each row says what it means;
    KEDA's own keys are named under the table."""
    table = rows()
    assert sorted(table) == sorted(ALIASES)
    assert all(len(cells[3]) > 30 for cells in table.values())
    assert all(f"`{key}`" in GEN.metadata_table()[-1] for key in KEDA_KEYS)


# The widest bounds the other keys allow, so that a cross-key rule (maxPendingReplicas <= maxReplicas)
# does not stand in for the key's own bound.
ROOM = {"maxReplicas": "10000"}


def _refused(key: str, value: str) -> bool:
    try:
        parse_metadata(ROOM | {key: value})
    except MetadataError as exc:
        return key in exc.keys
    return False


BOUND = re.compile(r"(>=|<=|>|<) (-?[\d,]+(?:\.\d+)?)")


BOUNDED = sorted((key, cells[2]) for key, cells in rows().items() if BOUND.search(cells[2]))


@pytest.mark.parametrize(("key", "bounds"), BOUNDED)
def test_the_bounds_printed_are_the_parser_s(key: str, bounds: str) -> None:
    """At each bound the table prints, the parser refuses the value just past it (naming the key)
    and, where the bound is inclusive, takes the bound itself as far as that key goes."""
    for sign, number in BOUND.findall(bounds):
        limit = float(number.replace(",", ""))
        step = 1.0 if rows()[key][0] == "integer" else 0.001
        past = {">": limit, ">=": limit - step, "<": limit, "<=": limit + step}[sign]
        assert _refused(key, f"{past:g}" if step == 1.0 else repr(past)), (key, sign, number)
        if sign in (">=", "<="):
            assert not _refused(key, f"{limit:g}" if step == 1.0 else repr(limit)), (key, sign, number)
