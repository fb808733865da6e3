"""The two kinds of error a command ends on that are not bugs: the user's input, and a source it names.

Every error a user can cause derives from one of these, so that ``scaler``'s ``main`` tells a
mistake (one line naming the flag, key or file, exit status 2) from a bug (exit status 1,
its traceback behind ``--debug``) by class, never by guessing from ``ValueError``:

* ``InputError``: a flag, a metadata key, a manifest or a file's content that cannot be
  used (``MetadataError``, ``ScaledObjectError``, ``SpanError``, a trace's ``TraceError``...);
* ``UnreachableError``: a Prometheus, a cluster or a program the user pointed at that cannot
  be reached or used (``PrometheusQueryError``, ``KubernetesConfigError``...).

A file that cannot be opened (``OSError`` with its ``filename``) is the user's input too.
"""

from __future__ import annotations


class InputError(ValueError):
    """The user's input cannot be used; the message names the flag, key or file and the rule."""


class UnreachableError(RuntimeError):
    """A source the user named (a Prometheus, a cluster, a program) cannot be reached or used."""


def is_users(exc: BaseException) -> bool:
    """Whether ``exc`` is the user's to fix (exit status 2) rather than a bug of ours (exit status 1)."""
    if isinstance(exc, InputError | UnreachableError):
        return True
    return isinstance(exc, OSError) and getattr(exc, "filename", None) is not None
