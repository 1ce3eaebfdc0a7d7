"""A worker pool: thousands of runs on a handful of connections.

Capacity is reserved by declaring slots per class set, for example::

    pool = WorkerPool(url, handlers, slots=[([0], 2), ([0, 10], 400), ([20], 1)])

Two runs at a time are only ever interactive ones, so an interactive run
never waits behind async work; 400 take interactive or async; one does
maintenance. Each class set claims up to its free capacity at once, of the
kinds the pool has handlers for only (a rolling deploy never hands a new kind
to an old worker), and runs each run's handler with a context.

A handler is ``async def handler(ctx: AsyncRunContext)`` (awaited on the
pool's event loop: a run holds no thread and no connection while it awaits)
or ``def handler(ctx: RunContext)`` (run in a thread of its own, for code
that blocks). Both kinds share one core: one event loop, a small
psycopg_pool for the runs' writes, claims and sweeps (``max_connections``,
whatever the concurrency), one connection for heartbeats and one for LISTEN.

The pool keeps no queue logic: every write is one fenced runq function, and
the first one that says ``false`` stops the run: the context raises
RunStopped from then on and the pool writes nothing more for that run. The
one exception is ``ctx.record_usage``: spend is a fact, so it is sent (and
recorded by runq) even once the run is no longer this worker's, and it
answers False rather than raising. RunStopped says why in ``reason``, which
the pool reads once (``runq.get_run``) after the first refusal: the cancel,
the deadline or the budget, or else fenced. A handler that returns
completes the run with its return value; one that raises fails it with the
exception's class and message; a return value jsonb cannot hold fails it
with code ``result_not_json``. After ``ctx.ask_user`` or ``ctx.wait_children``
(the run waits for its user, or for the child runs ``ctx.spawn`` made) the
run is no longer the handler's: it should return, and what it returns is
not written. The claimed run's budget, deadline and usage (as of the claim,
over every attempt) are on the context.

Every lease/3 one ``runq.heartbeat_many`` extends the lease of every run in
flight. A run whose element comes back false (fenced, cancelled) is stopped
at once, and an async handler's task is cancelled ``stop_grace`` seconds
later if it has not returned. Completions go through ``runq.complete_many``:
a completion is sent at once when none is on its way, and those that arrive
while one is become the next batch, so a lone completion waits for nothing
and a burst shares round trips. A run keeps its heartbeats while its
completion waits in line, and a batch that meets a locked row gives up at its
lock timeout and completes its runs one by one, each on its own.

Nothing stops a loop of the pool: an error about one run ends the handling
of that run only, any other error is logged and the loop carries on after a
pause. A write that loses its connection (a server restart, a terminated
backend) is sent again on a new one for up to a lease; fencing makes that
safe. A heartbeat batch that meets a row another session holds locked gives
up at its lock timeout, and the runs are then beaten one by one, the locked
one on its own until its row is free again, so one locked run costs the
others at most a lock timeout.

Idle class sets wake on ``LISTEN runq`` and poll every ``poll_interval``
seconds in any case (a PgBouncer in transaction mode drops notifications). A
timer sweeps, and another ticks the schedules (``runq.tick``: any number of
pools may, a slot still makes one run). ``stop()`` (SIGTERM or SIGINT under
``run()``) stops claiming, gives in-flight handlers ``grace`` seconds, then
releases the runs still in flight with ``runq.release``, which follows each
run's recovery policy. A handler that raises SystemExit or KeyboardInterrupt
gives its run back the same way and stops the pool.

It logs under ``runq.pool``, the name of the module it used to be (which
still re-exports it). Its parts, one module each: ``workerpool`` (settings,
the loop's thread, stop and join), ``core`` (what the parts share, the loops
it keeps going), ``claims`` (slots claiming, LISTEN), ``handling`` (a run
from its handler to its last write), ``context`` (what a handler gets),
``writes`` (fenced writes, RunStopped's reason), ``completions``
(complete_many batches), ``heartbeats``, ``upkeep`` (sweeps, ticks),
``shutdown`` (grace and releases), ``state`` (a run's Phase, slots),
``links`` (connections), ``waits`` and ``log``.
"""

from runq.errors import RunStopped
from runq.worker.context import AsyncRunContext, Handler, RunContext
from runq.worker.state import Slot
from runq.worker.workerpool import WorkerPool

__all__ = ["AsyncRunContext", "Handler", "RunContext", "RunStopped", "Slot", "WorkerPool"]
