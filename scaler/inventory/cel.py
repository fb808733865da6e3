"""DRA's device selectors: CEL expressions over one device, evaluated as the scheduler does. Pure.

A DeviceClass (and a claim's request) selects devices with CEL expressions over ``device``::

    device.driver                                   the DRA driver's name
    device.attributes['<domain>'].<id>              an attribute (int, bool, string, version)
    device.capacity['<domain>'].<id>                a capacity, a Kubernetes quantity

A device matches when every expression is ``true``. The evaluation is cel-python's (``celpy``,
the Common Expression Language's Python implementation) with the Kubernetes quantity library
on top (``quantity()``, ``isQuantity()``, ``compareTo``, ``isGreaterThan``, ``isLessThan``,
``asInteger``): what the NVIDIA, AMD and Intel drivers' DeviceClasses write. An expression this
cannot evaluate (a syntax error, a function of Kubernetes' libraries not provided here such as
``semver``) answers ``None`` with the reason: the caller counts such a device as matching, so an
expression the scaler does not understand never hides GPUs the scheduler would use.

*Example*: NVIDIA's ``gpu.nvidia.com`` class selects
``device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'``: true
for a whole GPU, false for a MIG device (``type == 'mig'``), which ``mig.nvidia.com`` selects.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import celpy
from celpy import celtypes

from scaler.quantity import parse_quantity

MAX_REASON_CHARS = 160  # a CEL error is cut to this many characters in an explanation


class Quantity(celtypes.StringType):
    """A Kubernetes quantity inside CEL: its text, and its exact value for the quantity library."""

    amount: Fraction

    def __new__(cls, text: str, amount: Fraction) -> Quantity:
        """The quantity ``text`` whose value is ``amount``."""
        made: Quantity = super().__new__(cls, text)  # type: ignore[assignment]
        made.amount = amount
        return made


def _quantity(text: Any) -> Quantity:
    amount = parse_quantity(str(text))
    if amount is None:
        raise ValueError(f"quantity({text!r}): not a Kubernetes quantity")
    return Quantity(str(text), amount)


def _amount(value: Any) -> Fraction:
    if isinstance(value, Quantity):
        return value.amount
    raise TypeError(f"not a quantity: {value!r}")


def _compare(a: Any, b: Any) -> celtypes.IntType:
    left, right = _amount(a), _amount(b)
    return celtypes.IntType((left > right) - (left < right))


# The Kubernetes quantity library (k8s.io/apiserver/pkg/cel/library/quantity.go), as functions
# celpy calls with the receiver first.
_FUNCTIONS: Mapping[str, Any] = {
    "quantity": _quantity,
    "isQuantity": lambda text: celtypes.BoolType(parse_quantity(str(text)) is not None),
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: celtypes.BoolType(_amount(a) > _amount(b)),
    "isLessThan": lambda a, b: celtypes.BoolType(_amount(a) < _amount(b)),
    "asInteger": lambda a: celtypes.IntType(int(_amount(a))),
}


@functools.lru_cache(maxsize=512)
def _program(expression: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(expression), functions=dict(_FUNCTIONS))


def _value(raw: Any) -> Any:
    if isinstance(raw, bool):
        return celtypes.BoolType(raw)
    if isinstance(raw, int):
        return celtypes.IntType(raw)
    return celtypes.StringType(str(raw))


def device_activation(
    driver: str,
    attributes: Mapping[str, Mapping[str, Any]],
    capacity: Mapping[str, Mapping[str, Fraction]],
    capacity_text: Mapping[str, Mapping[str, str]],
) -> celtypes.MapType:
    """The ``device`` variable of one device: its driver, attributes and capacities by domain."""
    attrs = celtypes.MapType(
        {
            celtypes.StringType(domain): celtypes.MapType(
                {celtypes.StringType(k): _value(v) for k, v in values.items()}
            )
            for domain, values in attributes.items()
        }
    )
    caps = celtypes.MapType(
        {
            celtypes.StringType(domain): celtypes.MapType(
                {
                    celtypes.StringType(k): Quantity(capacity_text.get(domain, {}).get(k, str(v)), v)
                    for k, v in values.items()
                }
            )
            for domain, values in capacity.items()
        }
    )
    return celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(driver),
            celtypes.StringType("attributes"): attrs,
            celtypes.StringType("capacity"): caps,
        }
    )


def matches(expressions: Sequence[str], device: celtypes.MapType) -> tuple[bool | None, str]:
    """Whether ``device`` satisfies every expression: True, False, or None when one cannot be
    evaluated (with why). A false expression wins over one that cannot be evaluated."""
    unknown = ""
    for expression in expressions:
        try:
            result = _program(expression).evaluate({"device": device})
        except Exception as exc:  # noqa: BLE001 - celpy's parse and evaluation errors have no common base
            text = str(exc.args[0] if exc.args else exc)
            unknown = unknown or f"CEL {expression!r}: {text[:MAX_REASON_CHARS]}"
            continue
        if isinstance(result, celtypes.BoolType):
            if not bool(result):
                return False, ""
        else:
            unknown = unknown or f"CEL {expression!r} gave {type(result).__name__}, not a bool"
    return (None, unknown) if unknown else (True, "")
