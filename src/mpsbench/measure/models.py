"""The benchmarked models: random weights, seeded synthetic batches (docs/reference/models.md)."""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from mpsbench.core import errors
from mpsbench.measure.optional_torch import nn, torch

SEED = 0
# one axis; each model skips the sizes outside its own
BATCH_SIZES: tuple[int, ...] = (1, 8, 32, 64, 128, 1024)


@dataclass(frozen=True)
class Batch:
    inputs: dict[str, torch.Tensor]
    target: torch.Tensor

    def _map(self, change: Callable[[torch.Tensor], torch.Tensor]) -> Batch:
        return Batch(
            {key: change(value) for key, value in self.inputs.items()}, change(self.target)
        )

    def to(self, device: str) -> Batch:
        return self._map(lambda tensor: tensor.to(device))

    def head(self, samples: int | None) -> Batch:
        return self._map(lambda tensor: tensor[:samples])

    def cast(self, dtype: torch.dtype) -> Batch:
        """The floating inputs in ``dtype``; the target as it is."""
        return Batch({k: float_cast(v, dtype) for k, v in self.inputs.items()}, self.target)


def float_cast(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Floats in ``dtype``; integer ids as they are."""
    return tensor.to(dtype) if tensor.is_floating_point() else tensor


@dataclass(frozen=True)
class ModelSpec:
    name: str
    description: str
    build: Callable[[], nn.Module]
    make_batch: Callable[[int, torch.Generator], Batch]
    num_classes: int
    seed_batch_size: int
    batch_sizes: tuple[int, ...]
    large: bool = True  # a cpu step takes seconds: small batches there by default
    steps_per_call: int = 1  # lifts sub-millisecond steps above clock and launch overhead
    requires: tuple[str, ...] = ()
    trainable: Callable[[nn.Module], list[nn.Parameter]] | None = None  # None: all
    make_optimizer: Callable[[list[nn.Parameter]], torch.optim.Optimizer] = field(
        default=lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9)
    )
    forward: Callable[[nn.Module, dict[str, torch.Tensor]], torch.Tensor] = field(
        default=lambda model, inputs: model(*inputs.values())
    )
    trains: bool = True
    modern: bool = False  # a modern model never changes the original classes' params

    def refusal(self, kind: str) -> str | None:
        """Why this model is not timed for ``kind`` (training or inference), or None."""
        if kind == "inference" and self.trainable is not None:
            return (
                f"{self.name} differs from its base model in training only;"
                " time its inference as bert_base"
            )
        if kind == "training" and not self.trains:
            return f"{self.name} is an inference-only model; time its inference"
        return None

    def unimportable(self) -> str | None:
        if missing := [package for package in self.requires if not _imports(package)]:
            return f"{self.name} needs {', '.join(missing)}, not importable here"
        return None


def _imports(package: str) -> bool:
    try:
        importlib.import_module(package)
    except Exception:  # absent, or made for a newer torch
        return False
    return True


def _build_mlp() -> nn.Module:
    return nn.Sequential(
        nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10)
    )


def _build_lenet5() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 6, kernel_size=5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 16, kernel_size=5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120),
        nn.ReLU(),
        nn.Linear(120, 84),
        nn.ReLU(),
        nn.Linear(84, 10),
    )


BERT_SEQUENCE_LENGTH = 128
BERT_NUM_LABELS = 6
# fixed: transformers' default changes between releases
BERT_ATTENTION = "eager"
LLAMA_CONFIG: dict[str, Any] = dict(
    vocab_size=32000,
    hidden_size=768,
    intermediate_size=2048,
    num_hidden_layers=12,
    num_attention_heads=12,
    num_key_value_heads=4,
    max_position_embeddings=2048,
    tie_word_embeddings=False,
)
LLAMA_SEQUENCE_LENGTH = 256
LLAMA_GENERATION = {"batch": 1, "prompt_tokens": 512, "new_tokens": 128}
LLAMA_NAME = "llama_small"
CLIP_TEXT_CONFIG: dict[str, Any] = dict(
    vocab_size=49408,
    hidden_size=768,
    intermediate_size=3072,
    num_hidden_layers=12,
    num_attention_heads=12,
    max_position_embeddings=77,
    hidden_act="quick_gelu",
)
CLIP_SEQUENCE_LENGTH = 77


def _transformers(
    model_class: str, config: dict[str, Any], attention: str
) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        built = getattr(importlib.import_module("transformers"), model_class)
        settings = built.config_class(**config)
        settings._attn_implementation = attention
        try:
            model: nn.Module = built(settings, attn_implementation=attention)
        except TypeError:  # older transformers: no argument, one attention path
            model = built(settings)
        return model

    return build


def _output(output: Any, name: str) -> torch.Tensor:
    # old transformers return a tuple
    found: torch.Tensor = getattr(output, name) if hasattr(output, name) else output[0]
    return found


def _causal_lm_forward(model: nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    return _output(model(input_ids=inputs["input_ids"], use_cache=False), "logits")[
        :, :-1
    ].transpose(1, 2)


def _text_encoder_forward(model: nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    return _output(model(input_ids=inputs["input_ids"]), "last_hidden_state").transpose(1, 2)


def random_ints(gen: torch.Generator, high: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=gen)


def _dense_batch(
    shape: tuple[int, ...], num_classes: int
) -> Callable[[int, torch.Generator], Batch]:
    return lambda batch_size, gen: Batch(
        {"input": torch.randn(batch_size, *shape, generator=gen)},
        random_ints(gen, num_classes, batch_size),
    )


def _bert_batch(batch_size: int, gen: torch.Generator) -> Batch:
    ids = random_ints(gen, 30522, batch_size, BERT_SEQUENCE_LENGTH)
    return Batch(
        {"input_ids": ids, "attention_mask": torch.ones_like(ids)},
        random_ints(gen, BERT_NUM_LABELS, batch_size),
    )


def _llama_batch(batch_size: int, gen: torch.Generator) -> Batch:
    ids = random_ints(gen, LLAMA_CONFIG["vocab_size"], batch_size, LLAMA_SEQUENCE_LENGTH)
    return Batch({"input_ids": ids}, ids[:, 1:].clone())  # each position's next token


def _clip_batch(batch_size: int, gen: torch.Generator) -> Batch:
    shape = batch_size, CLIP_SEQUENCE_LENGTH
    ids = random_ints(gen, CLIP_TEXT_CONFIG["vocab_size"], *shape)
    # a target gives the accuracy guard's loss a shape
    return Batch({"input_ids": ids}, random_ints(gen, CLIP_TEXT_CONFIG["hidden_size"], *shape))


def _adamw(params: list[nn.Parameter]) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=2e-5)


_CNN_SIZES = (1, 8, 32, 64, 128)
_BIG_SIZES = (1, 8, 32, 64)


def _torchvision(
    name: str, description: str, num_classes: int, seed: int, sizes: tuple[int, ...], **more: Any
) -> ModelSpec:
    def build() -> nn.Module:
        module = importlib.import_module("torchvision.models")
        built: nn.Module = getattr(module, name)(weights=None, num_classes=num_classes)
        return built

    batch = _dense_batch((3, 224, 224), num_classes)
    return ModelSpec(
        name, description, build, batch, num_classes, seed, sizes, requires=("torchvision",), **more
    )


def _bert(name: str, description: str, **trainable: Any) -> ModelSpec:
    return ModelSpec(
        name,
        description,
        _transformers(
            "BertForSequenceClassification", {"num_labels": BERT_NUM_LABELS}, BERT_ATTENTION
        ),
        _bert_batch,
        BERT_NUM_LABELS,
        64,
        _BIG_SIZES,
        requires=("transformers.models.bert.modeling_bert",),
        make_optimizer=_adamw,
        forward=lambda model, inputs: _output(model(**inputs), "logits"),
        **trainable,
    )


REGISTRY: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            "mlp",
            "MLP 1024-512-256-10 (the seeds' forward/backward loop)",
            _build_mlp,
            _dense_batch((1024,), 10),
            10,
            1024,
            BATCH_SIZES,
            large=False,
            steps_per_call=20,
        ),
        ModelSpec(
            "lenet5",
            "LeNet-5 on 28x28 single-channel images",
            _build_lenet5,
            _dense_batch((1, 28, 28), 10),
            10,
            128,
            BATCH_SIZES,
            large=False,
            steps_per_call=20,
        ),
        _torchvision(
            "resnet50", "torchvision ResNet-50, 224x224, 1000 classes", 1000, 128, _CNN_SIZES
        ),
        _torchvision(
            "vgg16",
            "torchvision VGG16, 224x224, 10 classes (CIFAR-10 upscaled)",
            10,
            64,
            _BIG_SIZES,
        ),
        _bert("bert_base", "BERT-base classifier (BertConfig, random weights), seq 128, 6 labels"),
        _bert(
            "bert_base_frozen",
            "BERT-base with a frozen encoder: only the classifier head trains",
            trainable=lambda model: list(model.classifier.parameters()),
        ),
        _torchvision(
            "vit_b_16",
            "torchvision ViT-B/16, 224x224, 1000 classes",
            1000,
            32,
            _BIG_SIZES,
            modern=True,
        ),
        ModelSpec(
            LLAMA_NAME,
            "Llama-style decoder (LlamaConfig, 125M params, random weights), 256 tokens, causal LM loss",
            _transformers("LlamaForCausalLM", LLAMA_CONFIG, "sdpa"),
            _llama_batch,
            LLAMA_CONFIG["vocab_size"],
            8,
            (1, 8, 32),
            requires=("transformers.models.llama",),
            make_optimizer=_adamw,
            forward=_causal_lm_forward,
            modern=True,
        ),
        ModelSpec(
            "clip_text",
            "Stable Diffusion 1.x text encoder (CLIPTextModel, ViT-L/14 text sizes), 77 tokens",
            _transformers("CLIPTextModel", CLIP_TEXT_CONFIG, "eager"),
            _clip_batch,
            CLIP_TEXT_CONFIG["hidden_size"],
            8,
            (1, 8, 32),
            requires=("transformers",),
            forward=_text_encoder_forward,
            trains=False,
            modern=True,
        ),
    )
}

NAMES: tuple[str, ...] = tuple(name for name, spec in REGISTRY.items() if not spec.modern)


def timed_for(kind: str, names: Iterable[str] = REGISTRY) -> tuple[str, ...]:
    return tuple(name for name in names if REGISTRY[name].refusal(kind) is None)


INFERENCE_NAMES = timed_for("inference", NAMES)
MODERN_INFERENCE_NAMES: tuple[str, ...] = tuple(name for name in REGISTRY if name not in NAMES)
MODERN_TRAINING_NAMES = timed_for("training", MODERN_INFERENCE_NAMES)


def get(name: str) -> ModelSpec:
    return REGISTRY[errors.one_of("model", name, REGISTRY)]


def check_batch_size(spec: ModelSpec, batch_size: int) -> None:
    if batch_size not in spec.batch_sizes:
        sizes = ", ".join(map(str, spec.batch_sizes))
        raise errors.UserError(
            f"batch size {batch_size} is not run for {spec.name}; choose one of: {sizes}"
        )


def make_batch(spec: ModelSpec, batch_size: int) -> Batch:
    return spec.make_batch(batch_size, torch.Generator().manual_seed(SEED))


# imported once in asv's forkserver, not in each fork; no GPU is touched before a fork
PRELOADED = (
    "torch",
    "torchvision.models",
    "transformers.models.bert.modeling_bert",
    "transformers.models.llama.modeling_llama",
    "transformers.models.clip.modeling_clip",
)
# asv_runner.server is imported in every mode: only the mode tells the forkserver apart
FORKSERVER_MODE = "run_server"


def preload_for_forkserver() -> list[str]:
    """In asv's forkserver only: imports torch and the models' optional packages."""
    if "asv_runner.server" not in sys.modules or sys.argv[1:2] != [FORKSERVER_MODE]:
        return []
    loaded = [package for package in PRELOADED if _imports(package)]  # the rest's models skip
    gc.freeze()  # a fork's gc.collect() then neither walks nor copies them
    return loaded
