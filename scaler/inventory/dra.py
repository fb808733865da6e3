"""Dynamic Resource Allocation (resource.k8s.io/v1): the GPUs published as devices, and which are taken. Pure.

Since Kubernetes 1.34 (GA) a DRA driver publishes its devices in ``ResourceSlice`` objects, per
node and per pool, and a pod gets devices through a ``ResourceClaim``: one it names in
``spec.resourceClaims`` (from a ``ResourceClaimTemplate``), or, since 1.36 (KEP-5004), one the
scheduler writes for an extended-resource request (``nvidia.com/gpu: 1``) where a
``DeviceClass`` declares ``extendedResourceName: nvidia.com/gpu``. Such GPUs need not appear in
the node's ``status.allocatable`` at all. This module turns the objects into a ``DraInventory``:

    published(node, class) = devices of the latest pool generation on the node whose attributes
                             pass every CEL selector of the class (``scaler.inventory.cel``)
    allocated              = devices named in any claim's ``status.allocation.devices.results``
    counters(pool, set)    = sharedCounters - what the allocated devices consume (consumesCounters)
    free(node, class)      = published - allocated, whose consumption still fits the counters left

MIG-style partitions share their GPU's counters: an A100 publishes itself and its MIG devices,
each consuming memory slices of one counter set, so allocating a ``1g.10gb`` instance leaves the
whole GPU unallocatable although no claim names it.

*Example*: a node with one 40 GB A100 published as ``gpu-0`` (consuming ``memory-slice-0..7``)
and seven ``1g.5gb`` devices (one slice each): with two ``1g.5gb`` allocated, five more fit and
the whole GPU fits 0; with none allocated, the whole GPU fits 1 (``fit`` picks devices greedily,
in the order the driver publishes them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from scaler.inventory import cel
from scaler.kubejson import as_items, as_mapping, as_str, as_timestamp, frozen
from scaler.quantity import parse_quantity

IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"  # <prefix><class>: any class as an extended resource
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"  # the scheduler's claims
DeviceKey = tuple[str, str, str]  # (driver, pool, device): a device's identity across slices
CounterKey = tuple[str, str, str]  # (driver, pool, counter set)


@dataclass(frozen=True, slots=True)
class Device:
    """One published device: where it is, its attributes and capacities (by domain), what it consumes."""

    driver: str
    pool: str
    name: str
    node: str | None  # None: not local to one node (allNodes or a node selector)
    attributes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    capacity: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)
    capacity_text: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    consumes: tuple[tuple[str, Mapping[str, Fraction]], ...] = ()  # (counter set, counter -> amount)
    fingerprint: str = ""  # what CEL sees of it, as text: the cache key of class matches

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", frozen(self.attributes))
        object.__setattr__(self, "capacity", frozen(self.capacity))

    @property
    def key(self) -> DeviceKey:
        """(driver, pool, device): how a claim's allocation names it."""
        return (self.driver, self.pool, self.name)

    def activation(self) -> Any:
        """The ``device`` variable CEL selectors read."""
        return cel.device_activation(self.driver, self.attributes, self.capacity, self.capacity_text)


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """One ResourceSlice: a driver's pool (or part of it) at one generation, its devices and counters."""

    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    devices: tuple[Device, ...] = ()
    counters: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)  # set -> counter -> value

    def __post_init__(self) -> None:
        object.__setattr__(self, "counters", frozen(self.counters))


def _qualified(name: str, driver: str) -> tuple[str, str]:
    """An attribute or capacity name as (domain, id): ``type`` is the driver's, ``a.b/c`` is a.b's."""
    domain, _, ident = name.rpartition("/")
    return (domain or driver, ident)


def _attribute(raw: Mapping[str, Any]) -> Any:
    for kind in ("bool", "int", "string", "version"):
        if kind in raw:
            return raw[kind]
    return None


def _counter_values(raw: Any) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for name, value in as_mapping(raw).items():
        amount = parse_quantity(as_mapping(value).get("value"))
        if isinstance(name, str) and amount is not None:
            out[name] = amount
    return out


def resourceslice_from_json(obj: Mapping[str, Any]) -> ResourceSlice:
    """A ResourceSlice (resource.k8s.io/v1) from the API's JSON."""
    meta, spec = as_mapping(obj.get("metadata")), as_mapping(obj.get("spec"))
    driver = as_str(spec.get("driver"))
    pool = as_mapping(spec.get("pool"))
    node = as_str(spec.get("nodeName")) or None
    devices = []
    for raw in as_items(spec.get("devices")):
        attributes: dict[str, dict[str, Any]] = {}
        for name, value in as_mapping(raw.get("attributes")).items():
            domain, ident = _qualified(str(name), driver)
            attributes.setdefault(domain, {})[ident] = _attribute(as_mapping(value))
        capacity: dict[str, dict[str, Fraction]] = {}
        text: dict[str, dict[str, str]] = {}
        for name, value in as_mapping(raw.get("capacity")).items():
            amount = parse_quantity(as_mapping(value).get("value"))
            if amount is not None:
                domain, ident = _qualified(str(name), driver)
                capacity.setdefault(domain, {})[ident] = amount
                text.setdefault(domain, {})[ident] = str(as_mapping(value).get("value"))
        consumes = tuple(
            (as_str(c.get("counterSet")), frozen(_counter_values(c.get("counters"))))
            for c in as_items(raw.get("consumesCounters"))
        )
        device_node = node if node else (as_str(raw.get("nodeName")) or None)
        seen = json.dumps([driver, attributes, text], sort_keys=True, default=str)
        devices.append(
            Device(driver, as_str(pool.get("name")), as_str(raw.get("name")), device_node, attributes,
                   capacity, text, consumes, seen)
        )  # fmt: skip
    counters = {
        as_str(s.get("name")): _counter_values(s.get("counters"))
        for s in as_items(spec.get("sharedCounters"))
    }
    generation = pool.get("generation")
    count = pool.get("resourceSliceCount")
    return ResourceSlice(
        name=as_str(meta.get("name")),
        driver=driver,
        pool=as_str(pool.get("name")),
        generation=generation if isinstance(generation, int) else 0,
        slice_count=count if isinstance(count, int) else 1,
        devices=tuple(devices),
        counters=counters,
    )


@dataclass(frozen=True, slots=True)
class DeviceClass:
    """A DeviceClass: its CEL selectors and the extended resource it serves (KEP-5004), if any."""

    name: str
    selectors: tuple[str, ...] = ()
    extended_resource_name: str | None = None
    created_at: float | None = None


def deviceclass_from_json(obj: Mapping[str, Any]) -> DeviceClass:
    """A DeviceClass (resource.k8s.io/v1) from the API's JSON."""
    meta, spec = as_mapping(obj.get("metadata")), as_mapping(obj.get("spec"))
    selectors = tuple(
        as_str(as_mapping(s.get("cel")).get("expression"))
        for s in as_items(spec.get("selectors"))
        if s.get("cel")
    )
    return DeviceClass(
        name=as_str(meta.get("name")),
        selectors=selectors,
        extended_resource_name=as_str(spec.get("extendedResourceName")) or None,
        created_at=as_timestamp(meta.get("creationTimestamp")),
    )


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    """A ResourceClaim as the inventory needs it: the devices its allocation holds."""

    namespace: str
    name: str
    allocated: tuple[DeviceKey, ...] = ()
    extended: bool = False  # written by the scheduler for an extended-resource request (KEP-5004)


def resourceclaim_from_json(obj: Mapping[str, Any]) -> ResourceClaim:
    """A ResourceClaim (resource.k8s.io/v1) from the API's JSON: ``status.allocation.devices.results``."""
    meta = as_mapping(obj.get("metadata"))
    allocation = as_mapping(as_mapping(obj.get("status")).get("allocation"))
    results = as_items(as_mapping(allocation.get("devices")).get("results"))
    annotations = as_mapping(meta.get("annotations"))
    return ResourceClaim(
        namespace=as_str(meta.get("namespace")),
        name=as_str(meta.get("name")),
        allocated=tuple(
            (as_str(r.get("driver")), as_str(r.get("pool")), as_str(r.get("device")))
            for r in results
            if not r.get("adminAccess")  # admin access takes no device from anyone
        ),
        extended=as_str(annotations.get(EXTENDED_CLAIM_ANNOTATION)) == "true",
    )


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One request of a claim (template): ``count`` devices of ``device_class`` passing ``selectors``.

    ``problem`` says why it cannot be counted (``allocationMode: All``, a prioritized list).
    """

    name: str
    device_class: str
    count: int = 1
    selectors: tuple[str, ...] = ()
    problem: str | None = None

    def describe(self) -> str:
        """The request in words, e.g. ``2 gpu.nvidia.com``."""
        extra = f" ({len(self.selectors)} selectors)" if self.selectors else ""
        return f"{self.count} {self.device_class}{extra}"


def _requests(spec: Mapping[str, Any]) -> tuple[DeviceRequest, ...]:
    out = []
    for raw in as_items(as_mapping(spec.get("devices")).get("requests")):
        name = as_str(raw.get("name"))
        exactly = as_mapping(raw.get("exactly"))
        if raw.get("firstAvailable"):
            out.append(
                DeviceRequest(name, "", problem=f"request {name} is a prioritized list (firstAvailable)")
            )
            continue
        mode = as_str(exactly.get("allocationMode"), "ExactCount") or "ExactCount"
        count = exactly.get("count", 1)
        selectors = tuple(
            as_str(as_mapping(s.get("cel")).get("expression"))
            for s in as_items(exactly.get("selectors"))
            if s.get("cel")
        )
        problem = None
        if mode != "ExactCount":
            problem = f"request {name} asks for allocationMode {mode}"
        elif not isinstance(count, int) or count < 1:
            problem, count = f"request {name} has count {count!r}", 1
        out.append(DeviceRequest(name, as_str(exactly.get("deviceClassName")), count, selectors, problem))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ClaimTemplate:
    """A ResourceClaimTemplate: the requests each pod's claim made from it asks for."""

    namespace: str
    name: str
    requests: tuple[DeviceRequest, ...] = ()


def claimtemplate_from_json(obj: Mapping[str, Any]) -> ClaimTemplate:
    """A ResourceClaimTemplate (resource.k8s.io/v1) from the API's JSON (``spec.spec.devices.requests``)."""
    meta = as_mapping(obj.get("metadata"))
    return ClaimTemplate(
        as_str(meta.get("namespace")),
        as_str(meta.get("name")),
        _requests(as_mapping(as_mapping(obj.get("spec")).get("spec"))),
    )


def claim_names(pod_spec: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A pod spec's ``resourceClaims``: (template names, shared claim names)."""
    claims = as_items(pod_spec.get("resourceClaims"))
    templates = tuple(
        as_str(c.get("resourceClaimTemplateName")) for c in claims if c.get("resourceClaimTemplateName")
    )
    shared = tuple(as_str(c.get("resourceClaimName")) for c in claims if c.get("resourceClaimName"))
    return templates, shared


class ClassMatcher:
    """Which devices each DeviceClass (and request) selects, memoised per selectors and device content.

    CEL costs about 0.4 ms a device (cel-python), so each (selectors, device) pair is evaluated once,
    when first asked, and the answer kept until the selectors change.
    """

    def __init__(self) -> None:
        self._known: dict[tuple[tuple[str, ...], str], tuple[bool | None, str]] = {}

    def matches(self, selectors: tuple[str, ...], device: Device) -> tuple[bool | None, str]:
        """Whether ``device`` passes ``selectors`` (None: an expression could not be evaluated, and why)."""
        if not selectors:
            return True, ""
        key = (selectors, device.fingerprint)
        found = self._known.get(key)
        if found is None:
            found = cel.matches(selectors, device.activation())
            self._known[key] = found
        return found


@dataclass(frozen=True, slots=True)
class DraInventory:
    """What the DRA objects say, per node: the devices published, which are taken, the counters left.

    ``problem`` says why the DRA objects could not be read (their API not served, RBAC), in which
    case the inventory is empty and the GPU fit counts allocatable GPUs only.
    """

    devices: Mapping[str, tuple[Device, ...]] = field(default_factory=dict)  # node -> its devices
    allocated: frozenset[DeviceKey] = frozenset()
    counters: Mapping[CounterKey, Mapping[str, Fraction]] = field(default_factory=dict)  # what is left
    classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    templates: Mapping[tuple[str, str], ClaimTemplate] = field(default_factory=dict)  # (namespace, name)
    problem: str | None = None
    matcher: ClassMatcher = field(default_factory=ClassMatcher, compare=False)
    incomplete: tuple[str, ...] = ()  # pools not counted: their latest generation not all published
    # (node, class, selectors) -> what ``selected`` found: the inventory is rebuilt when an object changes
    _selected: dict[tuple[str, str, tuple[str, ...]], tuple[list[Device], list[str]]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def class_for(self, resource: str) -> DeviceClass | None:
        """The DeviceClass serving the extended resource ``resource``, as the scheduler picks it: the
        newest class naming it in ``extendedResourceName`` (name breaks ties), or the implicit
        ``deviceclass.resource.kubernetes.io/<class>``."""
        if resource.startswith(IMPLICIT_PREFIX):
            return self.classes.get(resource.removeprefix(IMPLICIT_PREFIX))
        named = [c for c in self.classes.values() if c.extended_resource_name == resource]
        if not named:
            return None
        return sorted(named, key=lambda c: (-(c.created_at or 0.0), c.name))[0]

    def selected(
        self, node: str, device_class: str, selectors: tuple[str, ...] = ()
    ) -> tuple[list[Device], list[str]]:
        """The devices on ``node`` of ``device_class`` passing ``selectors`` (allocated or not), and
        the reasons of any counted without being understood (a CEL expression not evaluated)."""
        key = (node, device_class, selectors)
        found = self._selected.get(key)
        if found is not None:
            return found
        klass = self.classes.get(device_class)
        chosen: list[Device] = []
        unsure: list[str] = []
        for device in self.devices.get(node, ()) if klass is not None else ():
            verdict, why = self.matcher.matches((*klass.selectors, *selectors), device)  # type: ignore[union-attr]
            if verdict is False:
                continue
            chosen.append(device)
            if verdict is None:
                unsure.append(why)
        self._selected[key] = (chosen, unsure)
        return chosen, unsure

    def free(self, device: Device, counters: Mapping[CounterKey, Mapping[str, Fraction]]) -> bool:
        """Whether ``device`` is not allocated and its counter consumption fits ``counters``."""
        return device.key not in self.allocated and _fits(device, counters)


def _fits(device: Device, counters: Mapping[CounterKey, Mapping[str, Fraction]]) -> bool:
    for counter_set, amounts in device.consumes:
        left = counters.get((device.driver, device.pool, counter_set))
        if left is None:
            return False  # a counter set not published (yet): the scheduler cannot allocate it either
        if any(left.get(name, Fraction(0)) < amount for name, amount in amounts.items()):
            return False
    return True


def consume(device: Device, counters: dict[CounterKey, dict[str, Fraction]]) -> None:
    """Take ``device``'s consumption out of ``counters`` (in place)."""
    for counter_set, amounts in device.consumes:
        left = counters.setdefault((device.driver, device.pool, counter_set), {})
        for name, amount in amounts.items():
            left[name] = left.get(name, Fraction(0)) - amount


def dra_inventory(
    slices: Iterable[ResourceSlice],
    classes: Iterable[DeviceClass],
    claims: Iterable[ResourceClaim],
    problem: str | None = None,
    matcher: ClassMatcher | None = None,
    templates: Iterable[ClaimTemplate] = (),
) -> DraInventory:
    """The DRA inventory of a cluster's slices, classes and claims (the module docstring's formulas).

    Only each pool's latest generation counts, and only once every slice of it is published: a
    pool whose driver is rewriting it (fewer slices of the latest generation than its
    ``resourceSliceCount``) is not counted until it is complete, and is named in ``incomplete``
    (the ResourceSlice API's rule for consumers; Kueue's count was fixed to it, kueue#14573).
    """
    pools: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in slices:
        pools.setdefault((s.driver, s.pool), []).append(s)
    devices: dict[str, list[Device]] = {}
    published: dict[DeviceKey, Device] = {}
    counters: dict[CounterKey, dict[str, Fraction]] = {}
    incomplete: list[str] = []
    for (driver, pool), members in sorted(pools.items()):
        latest = max(m.generation for m in members)
        current = [m for m in members if m.generation == latest]
        expected = max(m.slice_count for m in current)
        published_slices = len({m.name for m in current})
        if published_slices < expected:
            incomplete.append(
                f"{driver} pool {pool} ({published_slices} of {expected} slices of generation {latest})"
            )
            continue
        for member in current:
            for name, values in member.counters.items():
                counters[(driver, pool, name)] = dict(values)
            for device in member.devices:
                published[device.key] = device
                if device.node is not None:
                    devices.setdefault(device.node, []).append(device)
    allocated = frozenset(key for claim in claims for key in claim.allocated)
    for key in allocated:
        held = published.get(key)
        if held is not None:
            consume(held, counters)
    return DraInventory(
        devices={node: tuple(found) for node, found in devices.items()},
        allocated=allocated,
        counters={k: frozen(v) for k, v in counters.items()},
        classes={c.name: c for c in classes},
        templates={(t.namespace, t.name): t for t in templates},
        problem=problem,
        matcher=matcher or ClassMatcher(),
        incomplete=tuple(incomplete),
    )


__all__ = [
    "EXTENDED_CLAIM_ANNOTATION",
    "IMPLICIT_PREFIX",
    "ClaimTemplate",
    "ClassMatcher",
    "Device",
    "DeviceClass",
    "DeviceRequest",
    "DraInventory",
    "ResourceClaim",
    "ResourceSlice",
    "claim_names",
    "claimtemplate_from_json",
    "consume",
    "deviceclass_from_json",
    "dra_inventory",
    "resourceclaim_from_json",
    "resourceslice_from_json",
]
