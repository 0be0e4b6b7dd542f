"""mpsbench's asv benchmarks: one module per kind of measurement (README.md, docs/)."""

from mpsbench.measure import models

models.preload_for_forkserver()  # asv's forkserver only: forked benchmark processes skip the imports
