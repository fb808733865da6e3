"""The decider's tuned constants live in one typed object (at most 15 of them), every other number
in the decider is named once at its module's head, and none is written into a formula."""

from __future__ import annotations

import ast
import itertools
from dataclasses import fields
from pathlib import Path

import pytest

from scaler.decider.params import DeciderParams

ROOT = Path(__file__).resolve().parent.parent / "scaler" / "decider"
# Every module of the decider but the parameter object itself.
DECIDER = tuple(sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py") if p.name != "params.py"))
# The only numbers a formula may write: the identities.
ARITHMETIC = {0, 1}


@pytest.mark.parametrize("module", DECIDER)
def test_no_decision_constant_outside_the_parameter_object(module: str) -> None:
    """Every number in the decider's modules is arithmetic; every tuned one is a DeciderParams field."""
    tree = ast.parse((ROOT / module).read_text())
    # A module-level NAME = number is a named fact (its comment says its unit and source), not a
    # tuned number hidden in a formula.
    named = {
        id(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets)
        and isinstance(node.value, ast.Constant)
    }
    found = sorted(
        {
            (node.lineno, node.value)
            for node in ast.walk(tree)
            if id(node) not in named
            and isinstance(node, ast.Constant)
            and isinstance(node.value, int | float)
            and not isinstance(node.value, bool)
            and node.value not in ARITHMETIC
        }
    )
    assert not found, f"{module}: numbers to name (in DeciderParams, or at the module's head): {found}"


@pytest.mark.parametrize("module", DECIDER)
def test_each_named_number_says_its_unit_and_why(module: str) -> None:
    """A module-level NAME = number of the decider carries a comment, on its line or just above."""
    source = (ROOT / module).read_text()
    lines = source.splitlines()
    bare = [
        node.targets[0].id  # type: ignore[attr-defined]
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        and all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, int | float)
        and "#" not in lines[node.lineno - 1]
        and not lines[node.lineno - 2].lstrip().startswith("#")
    ]
    assert not bare, f"{module}: named numbers without a comment saying their unit and why: {bare}"


def test_at_most_fifteen_constants_each_documented() -> None:
    """The parameter object holds at most 15 constants, each with a docstring saying its unit and why,
    and its switches (one per mechanism, for the ablation), each documented too."""
    names = [f.name for f in fields(DeciderParams)]
    assert len([f for f in fields(DeciderParams) if f.type not in ("bool", bool)]) <= 15
    source = (ROOT / "params.py").read_text()
    tree = ast.parse(source)
    body = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "DeciderParams").body
    documented = {
        stmt.target.id
        for stmt, after in itertools.pairwise(body)
        if isinstance(stmt, ast.AnnAssign)
        and isinstance(stmt.target, ast.Name)
        and isinstance(after, ast.Expr)
        and isinstance(after.value, ast.Constant)
        and len(str(after.value.value)) > 40
    }
    assert set(names) == documented
