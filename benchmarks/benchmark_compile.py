"""torch.compile (default inductor) beside eager: the steady-state step and the compile time (issue 21).

pytorch#192551 (Aug 2026): compiled training 4x slower than eager on mps,
found by a user; PyTorch's own dashboard compiles on M2 runners only and its
alerts cover cuda only. These classes time the compiled step of each model at
its seed batch size; its eager twin is benchmark_models' (or
benchmark_modern's) time_step at the same batch, and the figures page sets the
two side by side. ``track_compile_seconds`` is the first call: dynamo's trace,
inductor's code generation and kernel builds, and one step, with inductor's
caches cold (src/mpsbench/measure/compiled.py). Builds and devices that cannot compile
skip with the reason; a compile error where it should work fails the
combination with its first line. Default: the mlp on the cpu
(selection.COMPILED_DEFAULT: a GPU's 3-minute default has no room for compiling);
MPSBENCH_FULL=1 for every model on every device.
"""

from mpsbench.measure import compiled, devices, suite


class _Compiled(suite.TimedSteps):
    """One compiled step: Training's or Inference's time_step, its model under torch.compile."""

    kind: str  # "training" or "inference": suite.per_kind sets it per class
    param_names = ("device", "model")
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
        return compiled.compile_seconds(self.workload)

    track_compile_seconds.unit = "seconds"


CompiledTraining, CompiledInference = suite.per_kind("Compiled{Kind}", _Compiled, (devices.NAMES, compiled.TRAINING_NAMES),
                                                     (devices.NAMES, compiled.INFERENCE_NAMES))
