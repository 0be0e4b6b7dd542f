"""mpsbench's asv benchmarks: one module per kind of measurement (README.md, docs/)."""

from mpsbench import models

models.preload_for_forkserver()  # asv's forkserver only: forked benchmark processes skip the imports
