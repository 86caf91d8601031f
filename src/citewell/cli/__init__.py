"""The ``citewell`` command. Each command calls the ``Library`` (or ``Engine``) method of the same
name; one module a group of commands.

Exit codes:

- 0: done.
- 1: the request failed: an unknown bucket or source, an invalid value, or a file that cannot be
  read, is unsupported or is damaged. ``ingest`` ingests every file it can and exits with 1 if
  any failed.
- 2: the command line is wrong (click's usage errors).
- 3: the installation failed: a setting is wrong or the store is unavailable.
"""

from citewell.cli import access, agents, buckets, evaluate, models, search, serve, sources
from citewell.cli.common import main

__all__ = ["main"]

# The modules register their commands on ``main`` as they are imported.
del access, agents, buckets, evaluate, models, search, serve, sources
