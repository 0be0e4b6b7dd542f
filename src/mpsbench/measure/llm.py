"""The small Llama's generation: prefill latency and decode speed with a KV cache (issue 21).

What Mac users ask of a local LLM is the time to the first token and the
tokens per second after it. ``prefill`` is one forward over the prompt that
fills the key/value cache and picks the first new token; ``decode`` feeds one
token at a time through the cache, greedily (argmax), for a fixed number of
tokens with no stop at an end-of-sequence token, so every build does the same
work. The loop is written here on the model's forward rather than with
``generate``, whose defaults and overheads change between transformers
releases; the cache is whatever the model returns (a ``DynamicCache`` in
current transformers, tuples in old ones).

Batch 1: one user chatting. A 512-token prompt: a question with some context
(a pasted paragraph, a system prompt). 128 new tokens: a short answer, long
enough that decode's per-token time dominates its launch overheads.
"""

from __future__ import annotations

from typing import Any

import torch

from mpsbench.measure import correctness, devices, fallback, models, suite

MODEL = models.LLAMA_NAME
NAMES: tuple[str, ...] = (MODEL,)  # the generation classes' model axis
BATCH = models.LLAMA_GENERATION["batch"]
PROMPT_TOKENS = models.LLAMA_GENERATION["prompt_tokens"]
NEW_TOKENS = models.LLAMA_GENERATION["new_tokens"]


class Generation:
    """The decoder on a device in eval mode, a fixed seeded prompt, and the two phases."""

    def __init__(self, device: str, model: str = MODEL) -> None:
        self.device = devices.get(device)
        self.spec = models.get(model)
        self.device.seed(models.SEED)
        with self.device.creating():
            self.model = self.spec.build().to(device)
        self.model.eval()
        vocab = models.LLAMA_CONFIG["vocab_size"]
        generator = torch.Generator().manual_seed(models.SEED)
        self.prompt = torch.randint(0, vocab, (BATCH, PROMPT_TOKENS), generator=generator).to(device)
        self.fallback_ops: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.spec.name} generation on {self.device} (batch {BATCH}, prompt {PROMPT_TOKENS})"

    def prefill(self) -> tuple[torch.Tensor, Any]:
        """One forward over the prompt: the first new token and the filled cache."""
        with torch.inference_mode():
            output = self.model(input_ids=self.prompt, use_cache=True)
            return output.logits[:, -1:].argmax(-1), output.past_key_values

    def decode(self, token: torch.Tensor, cache: Any, count: int = NEW_TOKENS) -> torch.Tensor:
        """``count`` greedy steps through the cache (which grows in place); returns the tokens."""
        tokens = []
        with torch.inference_mode():
            for _ in range(count):
                output = self.model(input_ids=token, past_key_values=cache, use_cache=True)
                cache = output.past_key_values
                token = output.logits[:, -1:].argmax(-1)
                tokens.append(token)
        return torch.cat(tokens, dim=1)

    def warm_up(self) -> None:
        """A prefill and a few decode steps under the fallback recorder: kernels chosen, shaders compiled."""
        with fallback.Recorder() as recorder:
            token, cache = self.prefill()
            out = self.decode(token, cache, count=4)
            self.device.synchronize()
        self.fallback_ops = tuple(recorder.ops)
        if out.device.type != self.device:
            raise RuntimeError(f"{self.label} produced its tokens on {out.device.type}")


_slot: devices.OneSlot[Generation] = devices.OneSlot()


def prepare(device: str, model: str) -> Generation:
    """The warmed-up generation for an asv ``setup``, built once per process, skipped and guarded as the step timings are."""
    suite.require("inference", device, model)
    def build() -> Generation:
        generation = Generation(device, model)
        generation.warm_up()
        return generation

    generation, _ = _slot.get((device, model), device, build)
    fallback.refuse(generation.label, generation.fallback_ops)
    correctness.verify(device)
    return generation
