"""What several benchmark modules share: the timed step and its clock.

asv's discovery collects the ``time_`` and ``track_`` methods of every class in this package whose
name has no leading underscore, this module's included: a class here that carries one starts with ``_``.
"""

import time
from dataclasses import dataclass

from mpsbench.core import settings
from mpsbench.measure import devices
from mpsbench.measure.suite import OutOfMemorySkips


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
