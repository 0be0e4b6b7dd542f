"""Cold start: the first step in a fresh process, apart from the steady-state steps.

asv runs every sample of a ``timeraw_`` benchmark in a new Python process; what is timed there and
what is not: docs/explanation/instruments.md, Cold start. Every model runs at its seed batch size (selection.cold_start).
"""

from mpsbench.measure import devices, models, suite


class _ColdStart:
    """The first training or inference step in a fresh process (TrainingColdStart, InferenceColdStart)."""

    kind: str  # "training" or "inference": each subclass says which
    version = "1"
    timeout = 600
    number = 1  # one first step per fresh process
    warmup_time = 0  # a warm-up sample would be one more process for nothing
    repeat = (2, 3, 60.0)  # each sample imports torch and builds the model anew
    rounds = 1  # every sample is a fresh process already: a round adds processes, not independence

    def setup(self, device, model):
        suite.selected(type(self).__name__, device, model)
        suite.require(self.kind, device, model)

    # asv runs the setup, then times the statement, in a fresh interpreter: the first step only
    def timeraw_first_step(self, device, model):
        arguments = repr((self.kind, device, model, models.get(model).seed_batch_size))
        setup = f"from mpsbench.measure import suite\nfirst_step = suite.cold_first_step{arguments}"
        return "first_step()", setup


class TrainingColdStart(_ColdStart):
    """The first training step in a fresh process."""

    kind = "training"
    params = (devices.NAMES, models.NAMES)
    param_names = ("device", "model")


class InferenceColdStart(_ColdStart):
    """The first inference step in a fresh process."""

    kind = "inference"
    params = (devices.NAMES, models.INFERENCE_NAMES)
    param_names = ("device", "model")
