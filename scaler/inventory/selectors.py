"""Label selectors, node selector terms, taints and tolerations, as the scheduler reads them. Pure.

*Example*: a GPU node tainted ``nvidia.com/gpu=present:NoSchedule`` keeps off every pod
without a toleration for it; ``Toleration("nvidia.com/gpu", "Exists")`` tolerates it, and
so does ``Toleration(operator="Exists")`` (an empty key with Exists matches every key).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from scaler.errors import InputError
from scaler.kubejson import as_items, as_labels, as_str, as_strings, frozen


class NamedObject(Protocol):
    """What a node selector term reads of a node (``scaler.inventory.objects.Node`` is one)."""

    @property
    def name(self) -> str:
        """The object's metadata.name."""

    @property
    def labels(self) -> Mapping[str, str]:
        """The object's metadata.labels."""


BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint: key, value and effect."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"

    @property
    def blocks_scheduling(self) -> bool:
        """NoSchedule and NoExecute keep new pods off; PreferNoSchedule only discourages."""
        return self.effect in BLOCKING_EFFECTS

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration; ``tolerates`` applies Kubernetes' matching rule."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' rule: an empty effect matches every effect; an empty key with
        ``Exists`` matches every key; ``Equal`` (the default) compares values."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return False


def tolerated(taint: Taint, tolerations: Iterable[Toleration]) -> bool:
    """Whether any of ``tolerations`` tolerates ``taint``."""
    return any(t.tolerates(taint) for t in tolerations)


class SelectorError(InputError):
    """A selector this module cannot evaluate (unknown operator, malformed values)."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` entry (label selectors and node selector terms share the shape)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:  # noqa: PLR0911 - one return per operator, as the API lists them
        """Whether ``labels`` satisfy the requirement (In, NotIn, Exists, DoesNotExist, Gt, Lt)."""
        present = self.key in labels
        value = labels.get(self.key, "")
        op = self.operator
        if op == "In":
            return present and value in self.values
        if op == "NotIn":
            return not present or value not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt"):
            # Both sides must be integers; otherwise the requirement does not match.
            if not present or len(self.values) != 1:
                return False
            try:
                mine, theirs = int(value), int(self.values[0])
            except ValueError:
                return False
            return mine > theirs if op == "Gt" else mine < theirs
        return False

    def __str__(self) -> str:
        if self.operator in ("Exists", "DoesNotExist"):
            return f"{'' if self.operator == 'Exists' else '!'}{self.key}"
        if self.operator in ("Gt", "Lt"):
            return f"{self.key} {'>' if self.operator == 'Gt' else '<'} {','.join(self.values)}"
        return f"{self.key} {self.operator.lower()} ({','.join(self.values)})"


_LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_NODE_OPERATORS = _LABEL_OPERATORS | {"Gt", "Lt"}


def _requirements(raw: Any, operators: frozenset[str], where: str) -> tuple[Requirement, ...]:
    out = []
    for item in as_items(raw):
        op = as_str(item.get("operator"))
        if op not in operators:
            raise SelectorError(f"{where}: unsupported operator {op!r} for key {as_str(item.get('key'))!r}")
        out.append(Requirement(as_str(item.get("key")), op, as_strings(item.get("values"))))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A ``metav1.LabelSelector``: matchLabels and matchExpressions, all ANDed."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[Requirement, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "match_labels", frozen(self.match_labels))

    @property
    def empty(self) -> bool:
        """Whether the selector has no terms (it would match everything)."""
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy every matchLabels entry and every expression."""
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )

    def __str__(self) -> str:
        parts = [f"{k}={v}" for k, v in sorted(self.match_labels.items())]
        parts += [str(r) for r in self.match_expressions]
        return ",".join(parts) or "<everything>"


def label_selector_from_json(obj: Mapping[str, Any]) -> LabelSelector:
    """Parse a LabelSelector; raises SelectorError on an operator Kubernetes does not define."""
    return LabelSelector(
        as_labels(obj.get("matchLabels")),
        _requirements(obj.get("matchExpressions"), _LABEL_OPERATORS, "selector"),
    )


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Expressions on node labels and fields, ANDed. An empty term matches no node."""

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()

    def matches(self, node: NamedObject) -> bool:
        """Whether ``node`` satisfies every expression and field (only metadata.name) of the term."""
        if not self.match_expressions and not self.match_fields:
            return False
        fields = {"metadata.name": node.name}
        # Only metadata.name is a supported field; a requirement on any other field fails.
        return all(r.matches(node.labels) for r in self.match_expressions) and all(
            r.key in fields and r.matches(fields) for r in self.match_fields
        )

    def __str__(self) -> str:
        parts = [str(r) for r in self.match_expressions] + [f"field {r}" for r in self.match_fields]
        return " and ".join(parts) or "<empty term>"
