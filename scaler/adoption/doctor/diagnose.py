"""Every check, in one table, and the findings they give, errors first."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from scaler.adoption.doctor.availability import check_fallback, check_scaler
from scaler.adoption.doctor.gpus import check_gpu_counted, check_kueue_quota
from scaler.adoption.doctor.inert import check_inert
from scaler.adoption.doctor.objects import Cluster, Finding, Options
from scaler.adoption.doctor.scaling import (
    check_bounds,
    check_foreign_hpas,
    check_hpas,
    check_scraped,
    check_tolerance,
    check_triggers,
)
from scaler.adoption.doctor.stacks import check_pd_roles, check_removed_metrics, check_router_queue
from scaler.adoption.doctor.workloads import check_ingresses, check_nodes, check_pods

CHECKS: tuple[Callable[[Cluster, Options], Iterable[Finding]], ...] = (
    check_triggers,
    check_bounds,
    check_hpas,
    check_foreign_hpas,
    check_pods,
    check_nodes,
    check_ingresses,
    check_tolerance,
    check_scraped,
    check_inert,
    check_router_queue,
    check_pd_roles,
    check_removed_metrics,
    check_gpu_counted,
    check_kueue_quota,
    check_scaler,
    check_fallback,
)
_ORDER = {"error": 0, "warning": 1, "info": 2}


def diagnose(cluster: Cluster, options: Options | None = None) -> list[Finding]:
    """Every finding, errors first."""
    chosen = options or Options()
    found = [f for check in CHECKS for f in check(cluster, chosen)]
    return sorted(found, key=lambda f: (_ORDER[f.severity], f.check, f.object))
