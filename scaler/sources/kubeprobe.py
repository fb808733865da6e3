"""Whether the Kubernetes API server a command is pointed at answers at all, asked once.

The inventory (``scaler.sources.kubernetes``) lists every resource on a thread of its own and
retries with backoff, as a server must: an API server that is down for a minute is waited for.
A command run by hand is different: ``scaler dry-run --kubeconfig FILE`` against an API server
that refuses connections waited 30 s for a sync that could not come, then printed the same
error once per resource. ``check_reachable`` asks ``/version`` once, without retries, before the
inventory starts, and says in one line why the server cannot be used.
"""

from __future__ import annotations

import copy

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scaler.errors import UnreachableError
from scaler.sources.unreached import why_unreached

PROBE_TIMEOUT_S = 10.0  # connect and read; /version answers in milliseconds when the server is up


class KubernetesUnreachableError(UnreachableError):
    """The API server does not answer, or refuses the credentials; the message names it and why."""


def check_reachable(api: client.ApiClient, where: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """KubernetesUnreachableError when the API server of ``api`` (configured from ``where``, a
    kubeconfig or the in-cluster account) cannot be connected to, or answers 401/403; any other
    answer means it is there (the inventory then says what it cannot list, resource by resource).

    *Example*: a kubeconfig naming ``https://127.0.0.1:6443`` with nothing listening gives
    ``Kubernetes API https://127.0.0.1:6443 (kubeconfig kc): connection refused (...)``.
    """
    host = api.configuration.host
    configuration = copy.deepcopy(api.configuration)
    configuration.retries = False  # once: the answer, or why not, now (a pool takes it when made)
    probe = client.ApiClient(configuration)
    try:
        client.VersionApi(probe).get_code(_request_timeout=timeout_s, _preload_content=False)
    except ApiException as exc:
        if exc.status in (401, 403):
            raise KubernetesUnreachableError(
                f"Kubernetes API {host} ({where}): HTTP {exc.status} {exc.reason or ''}".rstrip()
                + ": the credentials are refused"
            ) from None
    except Exception as exc:  # noqa: BLE001 - urllib3's and the socket's errors share no base worth naming
        why = why_unreached(exc) or f"{type(exc).__name__}: {str(exc)[:200]}"
        raise KubernetesUnreachableError(f"Kubernetes API {host} ({where}): {why}") from None
    finally:
        probe.close()  # type: ignore[no-untyped-call]
