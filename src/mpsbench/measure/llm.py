"""The small Llama's greedy generation with a KV cache, never stopping early."""

from __future__ import annotations

from typing import Any

from mpsbench.measure import correctness, devices, fallback, models, precision, suite, workloads
from mpsbench.measure.optional_torch import torch

MODEL = models.LLAMA_NAME
NAMES: tuple[str, ...] = (MODEL,)
BATCH = models.LLAMA_GENERATION["batch"]
PROMPT_TOKENS = models.LLAMA_GENERATION["prompt_tokens"]
NEW_TOKENS = models.LLAMA_GENERATION["new_tokens"]


class Generation:
    def __init__(self, device: str, model: str = MODEL) -> None:
        self.device = devices.get(device)
        self.model = workloads.resident(self.device, models.get(model)).eval()
        self.label = f"{model} generation on {device} (batch {BATCH}, prompt {PROMPT_TOKENS})"
        seeded = torch.Generator().manual_seed(models.SEED)
        vocabulary = models.LLAMA_CONFIG["vocab_size"]
        self.prompt = models.random_ints(seeded, vocabulary, BATCH, PROMPT_TOKENS).to(device)
        self.fallback_ops: tuple[str, ...] = ()

    def _next(self, **inputs: Any) -> tuple[torch.Tensor, Any]:
        output = self.model(**inputs, use_cache=True)
        return output.logits[:, -1:].argmax(-1), output.past_key_values

    def prefill(self) -> tuple[torch.Tensor, Any]:
        with torch.inference_mode():
            return self._next(input_ids=self.prompt)

    def decode(self, token: torch.Tensor, cache: Any, count: int = NEW_TOKENS) -> torch.Tensor:
        tokens = []
        with torch.inference_mode():
            for _ in range(count):
                token, cache = self._next(input_ids=token, past_key_values=cache)
                tokens.append(token)
        return torch.cat(tokens, dim=1)

    def warm_up(self) -> Generation:
        with fallback.Recorder() as recorder:
            token, cache = self.prefill()
            out = self.decode(token, cache, count=4)
            self.device.synchronize()
        self.fallback_ops = tuple(recorder.ops)
        if out.device.type != self.device:
            raise RuntimeError(f"{self.label} produced its tokens on {out.device.type}")
        return self


_slot: devices.OneSlot[Generation] = devices.OneSlot()
forget = _slot.clear


def prepare(device: str, model: str) -> Generation:
    """Built once per process; skips what cannot run or fit, fails on fallbacks or wrong results."""
    suite.require("inference", device, model)
    with suite.OutOfMemorySkips(device, model, BATCH):
        generation = _slot.get((device, model), device, lambda: Generation(device, model).warm_up())
    fallback.refuse(generation.label, generation.fallback_ops)
    correctness.verify(device, precision.DEFAULT)
    return generation
