"""The models Mac users run in 2025-2026: a small Llama, ViT-B/16, Stable Diffusion's text encoder.

Their own classes, so that benchmark_models' Training and Inference keep their params and history; the
steps and their guards are the seeds'. ``LlmPrefill`` and ``LlmDecode`` time the Llama's generation
(mpsbench.measure.llm says why its sizes). Default: selection.modern and selection.generation.
"""

from mpsbench.measure import devices, llm, models, suite

from .benchmark_models import _StepBenchmark
from .common import StepTimer


class ModernTraining(_StepBenchmark):
    """One training step (llama_small: next-token cross entropy over 256 tokens, AdamW)."""

    kind = "training"
    params = (devices.NAMES, models.MODERN_TRAINING_NAMES, models.BATCH_SIZES)
    param_names = ("device", "model", "batch_size")


class ModernInference(_StepBenchmark):
    """A forward in eval mode under torch.inference_mode() (clip_text: a 77-token prompt)."""

    kind = "inference"
    params = (devices.NAMES, models.MODERN_INFERENCE_NAMES, models.BATCH_SIZES)
    param_names = ("device", "model", "batch_size")


class _Generation:
    """Shared by LlmPrefill and LlmDecode: the small Llama on a device, built, warmed up and guarded once per process."""

    param_names = ("device", "model")
    params = (devices.NAMES, llm.NAMES)
    version = "1"
    timeout = 900
    warmup_time = 0  # setup warms up explicitly
    rounds = 1  # as the step timings (benchmark_models)

    def setup(self, device, model):
        suite.selected(type(self).__name__, device, model)
        self.generation = llm.prepare(device, model)


class LlmPrefill(_Generation):
    """Time to first token: one forward over a 512-token prompt that fills the KV cache (batch 1)."""

    repeat = (3, 20, 10.0)

    def time_prefill(self, device, model):
        self.generation.prefill()
        self.generation.device.synchronize()


class LlmDecode(_Generation):
    """Seconds per decoded token: 128 greedy steps through the prompt's KV cache, divided by 128.

    asv runs ``setup`` before every sample: it prefills (untimed), so each
    timed call decodes from a fresh 512-token cache. Tokens per second at
    batch 1 is the inverse (the figures page shows it).
    """

    repeat = (3, 20, 20.0)

    def setup(self, device, model):
        super().setup(device, model)
        # asv's clock divided by the tokens: seconds per token
        self.timer = StepTimer(llm.NEW_TOKENS)
        self.token, self.cache = self.generation.prefill()
        self.generation.device.synchronize()

    def time_decode(self, device, model):
        self.generation.decode(self.token, self.cache)
        self.generation.device.synchronize()
