"""Exceptions named after the SQLSTATEs of runq's contract.

psycopg turns an SQLSTATE it does not know, such as ``RQ001``, into a generic
:class:`psycopg.DatabaseError`; :func:`from_psycopg` gives it back its name.
The server's message is the exception's text; DETAIL and HINT are kept as
attributes and the original psycopg error is the ``__cause__``. One more,
RunStopped, is the worker pool's: a handler's run is no longer its own.
"""

from __future__ import annotations

import psycopg

__all__ = [
    "IdempotencyConflict",
    "InvalidArgument",
    "InvalidRunState",
    "RunNotFound",
    "RunStopped",
    "RunqError",
    "SessionBusy",
    "from_psycopg",
]


class RunqError(Exception):
    """An error runq raised on purpose; ``sqlstate`` says which."""

    sqlstate: str = ""

    def __init__(self, message: str, *, detail: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.detail = detail
        self.hint = hint


class IdempotencyConflict(RunqError):
    """The idempotency key was already used for a different request."""

    sqlstate = "RQ001"


class SessionBusy(RunqError):
    """The session already has a queued or running run (DETAIL names it)."""

    sqlstate = "RQ002"


class RunNotFound(RunqError):
    """No run has that id."""

    sqlstate = "RQ003"


class InvalidRunState(RunqError):
    """The operation does not apply to the run's status."""

    sqlstate = "RQ004"


class InvalidArgument(RunqError):
    """A bad argument (SQLSTATE 22023, invalid_parameter_value)."""

    sqlstate = "22023"


class RunStopped(Exception):
    """The run is no longer this worker's (fenced, cancelled, failed by its
    deadline or budget, released, purged): stop working on it. The worker
    pool (runq.worker) writes nothing more for it.

    Not a RunqError: the pool says it, not a SQLSTATE of runq's, so an
    ``except RunqError`` in a handler does not catch it.

    ``reason`` says why, as the pool found it:

    * ``"cancelled"``, ``"deadline_exceeded"``, ``"budget_exhausted"``: runq
      stopped the run under this worker's epoch (a cancel flag, the deadline,
      begin_turn's budget gate); read from the run's status and failure code
      (one ``runq.get_run``, after the first refusal only);
    * ``"fenced"``: anything else that took the run away (another epoch holds
      it, the sweep took it back, a lease the database stayed out of reach
      for); also when the reason could not be read;
    * ``"finished"``: this handler's own last write (complete, fail,
      ask_user, wait_children) has gone out already;
    * ``"not_found"``: the run no longer exists (purged);
    * ``"pool_stopped"``: the pool's event loop has ended;
    * None: a RunStopped the handler raised itself without one.
    """

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


_BY_SQLSTATE: dict[str, type[RunqError]] = {
    cls.sqlstate: cls
    for cls in (IdempotencyConflict, SessionBusy, RunNotFound, InvalidRunState, InvalidArgument)
}


def from_psycopg(error: psycopg.Error) -> RunqError | None:
    """The runq exception for a psycopg error, or None when it is not one of
    runq's SQLSTATEs (the caller then re-raises the original unchanged)."""
    cls = _BY_SQLSTATE.get(error.sqlstate or "")
    if cls is None:
        return None
    diag = error.diag
    mapped = cls(diag.message_primary or str(error), detail=diag.message_detail,
                 hint=diag.message_hint)
    mapped.__cause__ = error
    return mapped
