"""The logger the worker runtime logs under."""

import logging

# The name of the module the runtime lived in before it was a package: users
# configure logging by it.
log = logging.getLogger("runq.pool")
