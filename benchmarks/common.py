"""What several benchmark modules share: the timed step and its clock, the lookup of measured figures.

asv's discovery collects the ``time_`` and ``track_`` methods of every class in this package whose
name has no leading underscore, this module's included: a class here that carries one starts with ``_``.
"""

import functools
import itertools
import time
from dataclasses import dataclass

from mpsbench.core import settings
from mpsbench.measure import devices, measured
from mpsbench.measure.suite import OutOfMemorySkips

MEASURING_TIMEOUT = 6 * 3600  # any lookup may measure the whole sweep (measured.Deferred)


@dataclass
class StepTimer:
    """asv ``timer`` for bodies that loop k steps: the clock over k."""

    steps_per_call: int

    def __call__(self):
        return time.perf_counter() / self.steps_per_call


class _TimedSteps:
    """k steps and one synchronize a call; one step on the cpu under settings.SINGLE_STEPS."""

    def ready(self, workload):
        single = workload.device is devices.Device.CPU and settings.flag(settings.SINGLE_STEPS)
        self.workload, self.steps = workload, 1 if single else workload.spec.steps_per_call
        self.timer = StepTimer(self.steps)

    def time_step(self, *params):
        """Median time of one step."""
        workload = self.workload
        with OutOfMemorySkips(workload.device, workload.spec.name, workload.batch_size):
            workload.run(self.steps)
            workload.device.synchronize()  # the clock stops when the device is done


class Lookup:
    """A class whose ``track_`` methods look up the figures its shared ``setup_cache`` measured.

    ``kind`` names its family in the readings; the first lookup of a run measures every family
    (mpsbench.measure.measured).
    """

    kind: str
    rounds = 1  # a second would read the same cache
    timeout = MEASURING_TIMEOUT

    def figure(self, readings, params, name):
        """The figure ``name`` of one combination of the class's params, from its family's table."""
        return measured.family(readings, self.kind).lookup(params, name)


class _PeakMemory(Lookup):
    """The peak memory of the capacity classes' combinations (benchmark_models, benchmark_precision)."""

    def track_peak_memory(self, readings, *params):
        """Peak device memory over one step, in MiB (cpu: the process's largest RSS sample)."""
        return self.figure(readings, params, "peak_memory")

    track_peak_memory.unit = "MiB"


def measuring(measure, benchmark, *leading):
    """One family of a shared ``setup_cache``: ``measure(*leading, class name, combinations)``, not yet called.

    The combinations are every one of the benchmark class's params; its name picks its selection rule.
    """
    combinations = list(itertools.product(*benchmark.params))
    return functools.partial(measure, *leading, benchmark.__name__, combinations)


def by_kind(measure, *benchmarks):
    """The families of a training and an inference class: each keyed by its kind, which leads its arguments."""
    return {
        benchmark.kind: measuring(measure, benchmark, benchmark.kind) for benchmark in benchmarks
    }
