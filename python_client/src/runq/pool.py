"""The worker pool's former home, kept so that ``from runq.pool import ...``
and ``python -m runq.pool MODULE`` go on working: the runtime is the package
runq.worker, RunStopped is in runq.errors and ``main`` is the ``runq worker``
command's (runq.cli.worker). The runtime still logs under ``runq.pool``."""

import sys

from runq.cli import worker as main
from runq.errors import RunStopped
from runq.worker import AsyncRunContext, Handler, RunContext, Slot, WorkerPool

# The module's other names of before, for reading: the runtime reads its own.
from runq.worker.links import BATCH as BATCH
from runq.worker.log import log as log
from runq.worker.shutdown import RELEASE_PATIENCE as RELEASE_PATIENCE
from runq.worker.upkeep import TICK_BATCH as TICK_BATCH
from runq.worker.writes import REASON_PATIENCE as REASON_PATIENCE

__all__ = ["AsyncRunContext", "Handler", "RunContext", "RunStopped", "Slot", "WorkerPool",
           "main"]

if __name__ == "__main__":
    sys.exit(main())
