"""The operator registry: per op, fixed inputs at three sizes, the forward call and its work.

Work is exact FLOPs for compute-bound ops and compulsory bytes (each operand touched once) for
memory-bound ones, so GB/s is a lower bound.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mpsbench.core import errors
from mpsbench.measure import devices, fallback, models, precision, skips, timing
from mpsbench.measure.optional_torch import F, torch  # loaded at the first case

SIZES: tuple[str, ...] = ("small", "medium", "large")
DTYPES: tuple[str, ...] = precision.NAMES
# Calls per timed call, so a sub-millisecond op rises above clock and launch overhead.
CALLS_PER_SAMPLE: Mapping[str, int] = {"small": 100, "medium": 20, "large": 3}
GFLOPS = "GFLOP/s"
GBPS = "GB/s"  # 1 GB = 1e9 bytes
INDEX_BYTES = 8  # indices and class targets are int64

Dims = Mapping[str, int]
Forward = Callable[[Mapping[str, "torch.Tensor"]], "torch.Tensor"]  # strings: torch loads lazily


@dataclass(frozen=True)
class Operand:
    shape: tuple[int, ...]
    fill: str = "normal"  # "normal" in the op's dtype; "ones"; "index": int64 in [0, high)
    high: int = 0
    trained: bool = False  # gets a gradient in forward+backward
    transposed: bool = False  # a transposed view: strides (1, rows)
    on_host: bool = False  # stays in host memory (one end of a copy)


@dataclass(frozen=True)
class OpSpec:
    name: str
    description: str
    shapes: Mapping[str, Dims]  # one per name in SIZES
    operands: Callable[[Dims], dict[str, Operand]]
    forward: Forward
    output_shape: Callable[[Dims], tuple[int, ...]]
    unit: str  # GFLOPS or GBPS
    work: Callable[[Dims, int], int]  # FLOPs or bytes of one forward call, given the element size
    formula: str  # ``work`` in words, for the docs
    has_backward: bool = True  # timed by the forward+backward benchmark
    needs_functional: str | None = None  # a torch.nn.functional name older torch lacks

    def dims(self, size: str) -> Dims:
        if size not in SIZES:
            raise errors.UserError(f"unknown size {size!r}; choose one of: {', '.join(SIZES)}")
        return self.shapes[size]

    def work_at(self, size: str, dtype: str) -> int:
        itemsize = torch.empty((), dtype=precision.dtype_of(dtype)).element_size()
        return self.work(self.dims(size), itemsize)


def _dims(
    names: str, small: tuple[int, ...], medium: tuple[int, ...], large: tuple[int, ...]
) -> dict[str, Dims]:
    return {
        size: dict(zip(names.split(), values, strict=True))
        for size, values in zip(SIZES, (small, medium, large))
    }


# 64 KiB, 4 MiB and 256 MiB per float32 operand
_SQUARE = _dims("n", (128,), (1024,), (8192,))
_IMAGES = _dims("n c h w", (4, 16, 16, 16), (16, 64, 32, 32), (64, 256, 64, 64))


Shape = Callable[[Dims], tuple[int, ...]]


def _shape(dims: str) -> Shape:
    """A shape from dim names (or literal sizes), e.g. ``"o c 3 3"``."""
    return lambda d: tuple(int(k) if k.isdigit() else d[k] for k in dims.split())


def _trained(**shapes: str) -> Callable[[Dims], dict[str, Operand]]:
    return lambda d: {name: Operand(_shape(dims)(d), trained=True) for name, dims in shapes.items()}


_square, _image = _shape("n n"), _shape("n c h w")


def _elementwise(name: str, sign: str, transposed: bool) -> OpSpec:
    """``add`` has no backward kernel of its own; ``mul`` has."""
    layout = "a transposed (non-contiguous) n x n view and a contiguous one"
    return OpSpec(
        f"{name}_transposed" if transposed else name,
        f"elementwise a {sign} b of {layout if transposed else 'two contiguous n x n'} tensors",
        _SQUARE,
        lambda d: {
            "a": Operand(_square(d), trained=name == "mul", transposed=transposed),
            "b": Operand(_square(d), trained=name == "mul"),
        },
        lambda x: getattr(torch, name)(x["a"], x["b"]),
        _square,
        GBPS,
        lambda d, s: 3 * d["n"] ** 2 * s,
        "3*n^2*s (read a and b, write the result)",
        has_backward=name == "mul",
    )


def _same_shape(name: str, description: str, forward: Forward) -> OpSpec:
    return OpSpec(
        name,
        description,
        _SQUARE,
        _trained(x="n n"),
        forward,
        _square,
        GBPS,
        lambda d, s: 2 * d["n"] ** 2 * s,
        "2*n^2*s (read x, write y)",
    )


def _reduction(name: str, call: Callable[[torch.Tensor], torch.Tensor]) -> OpSpec:
    return OpSpec(
        name,
        f"{name} over the last dim of an n x n tensor",
        _SQUARE,
        lambda d: {"x": Operand(_square(d))},
        lambda x: call(x["x"]),
        _shape("n"),
        GBPS,
        lambda d, s: (d["n"] ** 2 + d["n"]) * s,
        "(n^2 + n)*s (read x, write one value per row)",
        has_backward=False,  # the backward is a broadcast: no kernel of its own
    )


def _lookup(
    name: str,
    description: str,
    shapes: dict[str, Dims],
    *,
    source: str,
    index: str,
    axis: int,
    forward: Forward,
    work: Callable[[Dims, int], int],
    formula: str,
) -> OpSpec:
    """An op reading a trained ``source`` at random int64 positions along ``axis``; the output
    has the index's dims, then the source's past ``axis``."""
    source_dims = source.split()
    return OpSpec(
        name,
        description,
        shapes,
        lambda d: {
            "source": Operand(_shape(source)(d), trained=True),
            "index": Operand(_shape(index)(d), fill="index", high=d[source_dims[axis]]),
        },
        forward,
        _shape(" ".join([index, *source_dims[axis + 1 :]])),
        GBPS,
        work,
        formula,
    )


def _copy(name: str, description: str, source_on_host: bool) -> OpSpec:
    return OpSpec(
        name,
        description,
        _dims("n", (65536,), (4194304,), (67108864,)),
        lambda d: {
            "source": Operand((d["n"],), on_host=source_on_host),
            "destination": Operand((d["n"],), on_host=not source_on_host),
        },
        lambda x: x["destination"].copy_(x["source"]),
        _shape("n"),
        GBPS,
        lambda d, s: d["n"] * s,
        "n*s (the bytes that cross between host and device memory)",
        has_backward=False,
    )


_SPECS: tuple[OpSpec, ...] = (
    OpSpec(
        "matmul",
        "square matrix product a @ b",
        _dims("n", (64,), (256,), (4096,)),
        _trained(a="n n", b="n n"),
        lambda x: torch.matmul(x["a"], x["b"]),
        _square,
        GFLOPS,
        lambda d, s: 2 * d["n"] ** 3,
        "2*n^3 (n^3 multiply-adds)",
    ),
    OpSpec(
        "linear",
        "F.linear (nn.Linear): t tokens of i features to o features, with bias",
        # large: BERT-large's FFN, 32 x 512 tokens
        _dims("t i o", (32, 128, 128), (512, 256, 256), (16384, 1024, 4096)),
        _trained(x="t i", weight="o i", bias="o"),
        lambda x: F.linear(x["x"], x["weight"], x["bias"]),
        _shape("t o"),
        GFLOPS,
        lambda d, s: d["t"] * d["o"] * (2 * d["i"] + 1),
        "t*o*(2*i + 1) (i multiply-adds and a bias add per output)",
    ),
    OpSpec(
        "conv2d",
        "F.conv2d, 3x3 kernel, stride 1, padding 1, with bias",
        # large: ResNet's first stage at batch 64
        _dims("n c h w o", (1, 16, 16, 16, 16), (8, 32, 16, 16, 32), (64, 64, 56, 56, 64)),
        _trained(x="n c h w", weight="o c 3 3", bias="o"),
        lambda x: F.conv2d(x["x"], x["weight"], x["bias"], padding=1),
        _shape("n o h w"),
        GFLOPS,
        lambda d, s: d["n"] * d["o"] * d["h"] * d["w"] * (2 * d["c"] * 9 + 1),
        "n*o*h*w*(2*c*9 + 1) (c*3*3 multiply-adds and a bias add per output)",
    ),
    OpSpec(
        "scaled_dot_product_attention",
        "F.scaled_dot_product_attention, no mask, q/k/v of shape (n, h, l, d)",
        _dims("n h l d", (1, 4, 64, 32), (2, 8, 128, 64), (8, 16, 2048, 64)),
        _trained(q="n h l d", k="n h l d", v="n h l d"),
        lambda x: F.scaled_dot_product_attention(x["q"], x["k"], x["v"]),
        _shape("n h l d"),
        GFLOPS,
        lambda d, s: 4 * d["n"] * d["h"] * d["l"] ** 2 * d["d"],
        "4*n*h*l^2*d (q @ k^T and scores @ v; the softmax is left out, as FlashAttention counts)",
        needs_functional="scaled_dot_product_attention",  # torch 2.0+
    ),
    OpSpec(
        "max_pool2d",
        "F.max_pool2d, 2x2 window, stride 2",
        _IMAGES,
        _trained(x="n c h w"),
        lambda x: F.max_pool2d(x["x"], 2),
        lambda d: (d["n"], d["c"], d["h"] // 2, d["w"] // 2),
        GBPS,
        lambda d, s: d["n"] * d["c"] * (d["h"] * d["w"] + (d["h"] // 2) * (d["w"] // 2)) * s,
        "(n*c*h*w + n*c*(h/2)*(w/2))*s (read x, write the pooled result)",
    ),
    OpSpec(
        "batch_norm",
        "F.batch_norm in training mode (batch statistics, running stats updated), with affine",
        _IMAGES,
        lambda d: {
            **_trained(x="n c h w", weight="c", bias="c")(d),
            "running_mean": Operand((d["c"],), fill="ones"),
            "running_var": Operand((d["c"],), fill="ones"),
        },
        lambda x: F.batch_norm(
            x["x"], x["running_mean"], x["running_var"], x["weight"], x["bias"], training=True
        ),
        _image,
        GBPS,
        lambda d, s: (2 * d["n"] * d["c"] * d["h"] * d["w"] + 6 * d["c"]) * s,
        "(2*n*c*h*w + 6*c)*s (read x, write y; read weight and bias; read and write both running stats)",
    ),
    OpSpec(
        "layer_norm",
        "F.layer_norm over the last dim of t tokens of width d, with affine",
        _dims("t d", (64, 256), (4096, 256), (16384, 4096)),
        _trained(x="t d", weight="d", bias="d"),
        lambda x: F.layer_norm(x["x"], (x["x"].shape[-1],), x["weight"], x["bias"]),
        _shape("t d"),
        GBPS,
        lambda d, s: (2 * d["t"] * d["d"] + 2 * d["d"]) * s,
        "(2*t*d + 2*d)*s (read x, write y, read weight and bias)",
    ),
    _same_shape(
        "softmax",
        "softmax over the last dim of an n x n tensor",
        lambda x: torch.softmax(x["x"], dim=-1),
    ),
    _same_shape("gelu", "F.gelu (exact, erf form) of an n x n tensor", lambda x: F.gelu(x["x"])),
    *(
        _elementwise(name, sign, transposed)
        for name, sign in (("add", "+"), ("mul", "*"))
        for transposed in (False, True)
    ),
    _reduction("sum", lambda x: torch.sum(x, dim=-1)),
    _reduction("mean", lambda x: torch.mean(x, dim=-1)),
    _lookup(
        "index_select",
        "index_select of k rows (random, repeats allowed) from a v x d table",
        _dims("v d k", (1024, 64, 256), (32768, 256, 4096), (65536, 1024, 65536)),
        source="v d",
        index="k",
        axis=0,
        forward=lambda x: torch.index_select(x["source"], 0, x["index"]),
        work=lambda d, s: 2 * d["k"] * d["d"] * s + INDEX_BYTES * d["k"],
        formula="2*k*d*s + 8*k (read the selected rows, write them, read the int64 indices)",
    ),
    _lookup(
        "gather",
        "torch.gather along dim 1: k random columns per row of an r x c tensor",
        _dims("r c k", (256, 256, 64), (2048, 2048, 512), (16384, 8192, 4096)),
        source="r c",
        index="r k",
        axis=1,
        forward=lambda x: torch.gather(x["source"], 1, x["index"]),
        work=lambda d, s: d["r"] * d["k"] * (2 * s + INDEX_BYTES),
        formula="r*k*(2*s + 8) (per output: read an int64 index and a source element, write it)",
    ),
    _lookup(
        "embedding",
        "F.embedding: look up n x l token ids in a v x d table",
        # medium: BERT's vocabulary; large: GPT-2's
        _dims("v d n l", (1000, 64, 4, 64), (30522, 256, 16, 256), (50257, 1024, 64, 1024)),
        source="v d",
        index="n l",
        axis=0,
        forward=lambda x: F.embedding(x["index"], x["source"]),
        work=lambda d, s: 2 * d["n"] * d["l"] * d["d"] * s + INDEX_BYTES * d["n"] * d["l"],
        formula="2*n*l*d*s + 8*n*l (read the looked-up rows, write them, read the int64 ids)",
    ),
    OpSpec(
        "cross_entropy",
        "F.cross_entropy of n rows of c logits against int64 class targets (mean)",
        # medium: ImageNet's classes; large: an LM's vocabulary
        _dims("n c", (64, 1000), (1024, 1000), (4096, 32000)),
        lambda d: {
            "logits": Operand((d["n"], d["c"]), trained=True),
            "target": Operand((d["n"],), fill="index", high=d["c"]),
        },
        lambda x: F.cross_entropy(x["logits"], x["target"]),
        _shape(""),
        GBPS,
        lambda d, s: d["n"] * d["c"] * s + INDEX_BYTES * d["n"] + s,
        "n*c*s + 8*n + s (read the logits and int64 targets, write the scalar loss)",
    ),
    _copy("copy_h2d", "copy from pageable host memory into a preallocated device buffer", True),
    _copy("copy_d2h", "copy from device memory into a preallocated pageable host buffer", False),
)

REGISTRY: dict[str, OpSpec] = {spec.name: spec for spec in _SPECS}
NAMES: tuple[str, ...] = tuple(REGISTRY)
COMPUTE_NAMES: tuple[str, ...] = tuple(spec.name for spec in _SPECS if spec.unit == GFLOPS)
MEMORY_NAMES: tuple[str, ...] = tuple(spec.name for spec in _SPECS if spec.unit == GBPS)
BACKWARD_NAMES: tuple[str, ...] = tuple(spec.name for spec in _SPECS if spec.has_backward)


def get(name: str) -> OpSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        raise errors.UserError(f"unknown op {name!r}; choose one of: {', '.join(NAMES)}") from None


def make_inputs(
    spec: OpSpec, size: str, device: str, dtype: str, training: bool
) -> dict[str, torch.Tensor]:
    """Seeded, drawn in float32 and cast: every dtype sees the same values."""
    devices.get(device).seed(models.SEED)
    float_dtype = precision.dtype_of(dtype)
    inputs: dict[str, torch.Tensor] = {}
    for name, operand in spec.operands(spec.dims(size)).items():
        where = "cpu" if operand.on_host else device
        shape = operand.shape[::-1] if operand.transposed else operand.shape
        if operand.fill == "index":
            tensor = torch.randint(0, operand.high, shape, device=where, dtype=torch.int64)
        elif operand.fill == "ones":
            tensor = torch.ones(shape, device=where, dtype=float_dtype)
        else:
            tensor = torch.randn(shape, device=where).to(float_dtype)
        if operand.transposed:
            tensor = tensor.t()
        inputs[name] = tensor.requires_grad_(training and operand.trained)
    return inputs


def _bind_torch() -> None:
    """Binds the real modules before timing: the stand-ins' lookup adds to a microsecond op."""
    global torch, F
    import torch as loaded
    import torch.nn.functional as functional

    torch, F = loaded, functional


class OpCase:
    """One op at one size and dtype with its inputs on a device; nothing here synchronizes.

    The backward is ``torch.autograd.grad`` with a fixed output gradient: no ``.grad`` accumulation.
    """

    def __init__(self, spec: OpSpec, device: str, dtype: str, size: str, training: bool) -> None:
        if training and not spec.has_backward:
            raise errors.UserError(
                f"{spec.name} is not trained through; choose one of: {', '.join(BACKWARD_NAMES)}"
            )
        _bind_torch()
        self.spec, self.dtype, self.size, self.training = spec, dtype, size, training
        self.device = devices.get(device)
        self.inputs = make_inputs(spec, size, device, dtype, training)
        self.trained = [tensor for tensor in self.inputs.values() if tensor.requires_grad]
        self.grad_output: torch.Tensor | None = None
        self.calls_per_sample = CALLS_PER_SAMPLE[size]

    def forward(self) -> torch.Tensor:
        with torch.no_grad():
            return self.spec.forward(self.inputs)

    def forward_backward(self) -> tuple[torch.Tensor, ...]:
        output = self.spec.forward(self.inputs)
        if self.grad_output is None:
            self.grad_output = torch.randn(output.shape, device=output.device).to(output.dtype)
        return torch.autograd.grad(output, self.trained, self.grad_output)

    def run(self, calls: int) -> None:
        call = self.forward_backward if self.training else self.forward
        for _ in range(calls):
            call()

    def work(self) -> int:
        return self.spec.work_at(self.size, self.dtype)

    def warm_up(self, calls: int = 2) -> None:
        """Run until kernels are chosen; fail an output of the wrong shape, dtype or device."""
        for _ in range(calls):
            output = self.forward()
            if self.training:
                self.forward_backward()
        self.device.synchronize()
        expected = (
            ("shape", tuple(output.shape), self.spec.output_shape(self.spec.dims(self.size))),
            ("dtype", output.dtype, precision.dtype_of(self.dtype)),
            ("device", output.device.type, "cpu" if self.spec.name == "copy_d2h" else self.device),
        )
        problems = [f"{what} {got}, expected {want}" for what, got, want in expected if got != want]
        if problems:
            raise errors.UserError(
                f"{self.spec.name} on {self.device} ({self.dtype}, {self.size}) gave "
                + "; ".join(problems)
            )


def median_seconds_per_call(case: OpCase, min_samples: int = 3, min_seconds: float = 0.2) -> float:
    return timing.median_seconds(
        case.run, case.device, case.calls_per_sample, min_samples, min_seconds
    )[0]


def throughput(case: OpCase) -> float:
    return case.work() / median_seconds_per_call(case) / 1e9


_slot: devices.OneSlot[OpCase] = devices.OneSlot()
forget = _slot.clear


def cached(device: str, op: str, dtype: str, size: str, training: bool) -> OpCase:
    """The warmed-up case, one per process; a warm-up that fell back to the cpu fails."""

    def build() -> OpCase:
        case = OpCase(get(op), device, dtype, size, training)
        with fallback.Recorder() as recorder:
            case.warm_up()
        fallback.refuse(f"{op} on {device} in {dtype} at {size}", recorder.ops)
        return case

    return _slot.get((device, op, dtype, size, training), device, build)


def prepare(device: str, op: str, dtype: str, size: str, training: bool) -> OpCase:
    """The case for an asv ``setup``; what cannot run here skips with the reason."""
    spec = get(op)
    precision.check_name(dtype)
    skips.require_device(device)
    skips.require_dtype(device, dtype)
    if spec.needs_functional is not None and not hasattr(F, spec.needs_functional):
        raise skips.SkipNotImplemented(
            f"torch {torch.__version__} has no torch.nn.functional.{spec.needs_functional}"
        )
    try:
        return cached(device, op, dtype, size, training)
    except Exception as exc:
        forget()
        if devices.is_out_of_memory(exc):
            devices.get(device).empty_cache()
            raise skips.SkipNotImplemented(
                f"{op} at {size} in {dtype} does not fit in {device} memory: {errors.first_line(exc)}"
            ) from exc
        # float32 must run everywhere; reduced-precision support varies with device, OS and torch
        if dtype != precision.DEFAULT and skips.torch_lacks(exc):
            raise skips.SkipNotImplemented(
                f"{op} in {dtype} on {device}: torch does not support it here: {errors.first_line(exc)}"
            ) from exc
        if isinstance(exc, NotImplementedError):  # torch lacks a kernel: a failure, not an n/a
            raise RuntimeError(f"{op} on {device} in {dtype}: torch lacks an op: {exc}") from exc
        raise
