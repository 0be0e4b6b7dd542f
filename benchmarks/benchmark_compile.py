"""torch.compile (default inductor) beside eager: the steady-state step and the compile time.

pytorch#192551 (Aug 2026): compiled training 4x slower than eager on mps, found by a user; PyTorch's
own dashboard compiles on M2 runners only and its alerts cover cuda only. What is timed, what skips
and the eager twin: docs/explanation/workloads.md, The compile axis. Default: selection.COMPILED_DEFAULT.
"""

from mpsbench.measure import compiled, devices, suite

from .common import _TimedSteps


class _Compiled(_TimedSteps):
    """One compiled step: Training's or Inference's time_step, its model under torch.compile."""

    kind: str  # "training" or "inference": each subclass says which
    version = "1"
    timeout = 1800  # a large model's training graph compiles for minutes on a small cpu
    warmup_time = 0  # setup compiles and warms up
    repeat = (3, 40, 10.0)
    rounds = 1  # a second round compiles again in a second process, for no better number

    def setup(self, device, model):
        suite.selected(type(self).__name__, device, model)
        self.ready(compiled.prepare(self.kind, device, model))

    def track_compile_seconds(self, device, model):
        """The first call of the compiled step, compilation included (inductor's caches cold)."""
        return self.workload.first_step_seconds  # setup warmed it up

    track_compile_seconds.unit = "seconds"


class CompiledTraining(_Compiled):
    """benchmark_models' Training step, its model under torch.compile."""

    kind = "training"
    params = (devices.NAMES, compiled.TRAINING_NAMES)
    param_names = ("device", "model")


class CompiledInference(_Compiled):
    """benchmark_models' Inference step, its model under torch.compile."""

    kind = "inference"
    params = (devices.NAMES, compiled.INFERENCE_NAMES)
    param_names = ("device", "model")
