"""Why a connection failed, in a few words, for every source that connects (Prometheus, Kubernetes).

requests' and urllib3's errors wrap the operating system's in text that repeats the URL (with
its query URL-encoded), the pool and its retries: ``HTTPConnectionPool(host='127.0.0.1', port=9):
Max retries exceeded with url: /api/v1/nodes?limit=500 (Caused by NewConnectionError(...:
[Errno 111] Connection refused))``. ``why_unreached`` walks the chain under it (``reason``,
``__cause__``, ``__context__``, ``args``) to the OS error and says that: ``connection refused
(nothing listens at that host and port)``.
"""

from __future__ import annotations

import socket

REFUSED = "connection refused (nothing listens at that host and port)"
UNRESOLVED = "the host name does not resolve"


def why_unreached(exc: BaseException) -> str | None:
    """The OS's reason a connection failed, under any wrappers, in a few words; None when there is
    no OS error in the chain (then the wrapper's own text is all there is).

    *Example*: urllib3's MaxRetryError over a ConnectionRefusedError -> ``connection refused
    (nothing listens at that host and port)``.
    """
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        error = pending.pop(0)
        if id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, socket.gaierror):
            return f"{UNRESOLVED} ({error.strerror or error})"
        if isinstance(error, ConnectionRefusedError):
            return REFUSED
        if isinstance(error, OSError) and type(error).__module__ == "builtins" and error.strerror:
            return error.strerror[:1].lower() + error.strerror[1:]
        nested = [getattr(error, "reason", None), error.__cause__, error.__context__, *error.args]
        pending.extend(e for e in nested if isinstance(e, BaseException))
    text = str(exc)
    if "Name or service not known" in text or "NameResolutionError" in text:
        return UNRESOLVED
    return None
