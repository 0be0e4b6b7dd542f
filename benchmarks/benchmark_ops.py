"""Time single operators per device, op, dtype and size: what a model-level regression is made of.

A model that got 15% slower says something is wrong; an op that got 3x slower
says where (PyTorch's own MPS regressions were often one op, such
as a ``mul`` out-variant, a ``gather`` mitigation or an attention path). The
ops, their shapes and their work counts live in ``mpsbench.measure.ops``; docs/reference/ops.md
lists them. ``mpsbench ops-rank`` ranks the ops by slowdown between two runs.
"""

from mpsbench.measure import devices, measured, ops, suite

from .common import MEASURING_TIMEOUT, StepTimer, measuring


class _OpBenchmark:
    """Shared by every op class: params, setup and the timed body.

    ``time_*`` is the time of one call: each timed call loops k calls (``ops.CALLS_PER_SAMPLE``) and
    the ``timer`` divides by k (docs/reference/ops.md, Timing). The default selection is selection.op's;
    reduced-precision dtypes torch refuses on a device skip, torch refusing float32 fails.
    """

    training = False
    param_names = ("device", "op", "dtype", "size")
    version = "1"  # bump when what is measured changes, not for cosmetic edits
    timeout = 900  # the full sweep's large cpu calls take seconds each
    warmup_time = 0  # setup warms up explicitly (kernel choice, shader compilation)
    # One round: a second would double the launches of the many combinations that skip (docs/reference/ops.md).
    repeat = (3, 20, 0.5)  # min samples, max samples, seconds
    rounds = 1

    def setup(self, *args):
        """A ``time_`` row builds its case. A throughput row's args start with the measured table, which holds its
        outcome, selection included: it builds nothing."""
        if len(args) == len(self.param_names):
            suite.selected(type(self).__name__, *args)
            self.case = ops.prepare(*args, self.training)
            self.calls = self.case.calls_per_sample
            self.timer = StepTimer(self.calls)

    def _time_calls(self):
        self.case.run(self.calls)
        self.case.device.synchronize()  # the clock stops when the device is done


class _ForwardOps(_OpBenchmark):
    """The forward of one op; its class's ``track_`` is the op's work per second (``throughput``)."""

    def time_forward(self, device, op, dtype, size):
        self._time_calls()

    def throughput(self, readings, *params):
        """The op's work (docs/reference/ops.md) over the median time of one call across several samples, read from
        the one measuring process (``_measure_throughputs``); its process never starts the device or imports torch."""
        return measured.family(readings, type(self).__name__).lookup(params, "throughput")


@measured.deferred
def _measure_throughputs():
    """Every selected forward op's work per second, in one process (the first throughput lookup's): on a GPU each
    benchmark process spends most of its time starting the device, not measuring (docs/explanation/budget.md), and under spawn
    importing torch too."""
    return measured.measure_families(
        {
            benchmark.__name__: measuring(forward_throughputs, benchmark)
            for benchmark in (ComputeBoundOps, MemoryBoundOps)
        }
    )


def forward_throughputs(benchmark, keys):
    # An op's inputs are plain tensors, freed when the next case replaces them (ops.cached): no collection between
    table = measured.measure(
        benchmark,
        keys,
        lambda *key: ops.prepare(*key, False),
        {"throughput": ops.throughput},
        after_each=lambda device: None,
    )
    ops.forget()
    return table


class ComputeBoundOps(_ForwardOps):
    """Forward of the compute-bound ops (matmul, linear, conv2d, attention), with GFLOP/s."""

    params = (devices.NAMES, ops.COMPUTE_NAMES, ops.DTYPES, ops.SIZES)

    def track_gflops(self, readings, device, op, dtype, size):  # forward FLOPs
        return self.throughput(readings, device, op, dtype, size)

    track_gflops.unit = ops.GFLOPS
    # asv reads a benchmark's function attributes first: only the track_ rows get the readings
    track_gflops.setup_cache = _measure_throughputs
    track_gflops.timeout = MEASURING_TIMEOUT  # the first one measures every op


class MemoryBoundOps(_ForwardOps):
    """Forward of the memory-bound ops (norms, elementwise, reductions, indexing, copies), with GB/s."""

    params = (devices.NAMES, ops.MEMORY_NAMES, ops.DTYPES, ops.SIZES)

    def track_gbps(self, readings, device, op, dtype, size):  # compulsory bytes
        return self.throughput(readings, device, op, dtype, size)

    track_gbps.unit = ops.GBPS
    track_gbps.setup_cache = _measure_throughputs  # as track_gflops'
    track_gbps.timeout = MEASURING_TIMEOUT


class ForwardBackwardOps(_OpBenchmark):
    """Forward and backward of the ops a model is trained through.

    The backward computes the gradient of every trained input (weights and
    the activation input alike) for a fixed output gradient, with
    ``torch.autograd.grad``: nothing accumulates between calls.
    """

    training = True
    params = (devices.NAMES, ops.BACKWARD_NAMES, ops.DTYPES, ops.SIZES)

    def time_forward_backward(self, device, op, dtype, size):
        self._time_calls()
