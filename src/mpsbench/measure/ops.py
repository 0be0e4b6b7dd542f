"""The operator registry: per op, fixed inputs at three sizes, the forward call and its work."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mpsbench.core import errors
from mpsbench.measure import devices, fallback, models, precision, skips, timing
from mpsbench.measure.optional_torch import F, torch

SIZES: tuple[str, ...] = ("small", "medium", "large")
DTYPES: tuple[str, ...] = precision.NAMES
# calls per timed call: a sub-millisecond op rises above clock and launch overhead
CALLS_PER_SAMPLE: Mapping[str, int] = {"small": 100, "medium": 20, "large": 3}
GFLOPS = "GFLOP/s"
GBPS = "GB/s"  # 1 GB = 1e9 bytes

Dims = Mapping[str, int]


@dataclass(frozen=True)
class Operand:
    shape: tuple[int, ...]
    high: int = 0  # above 0: int64 indices in [0, high)
    ones: bool = False
    trained: bool = False
    transposed: bool = False
    on_host: bool = False


def _evaluate(expression: str, dims: Dims, itemsize: int = 0) -> int:
    # eval of our own constants: the documented formula is the one computed
    python = expression.replace("^", "**").replace("/", "//")
    return int(eval(python, {"__builtins__": {}}, {**dims, "s": itemsize}))


def _shape(words: list[str], dims: Dims) -> tuple[int, ...]:
    return tuple(_evaluate(word, dims) for word in words)


@dataclass(frozen=True)
class OpSpec:
    """``inputs``: ``name dims [ones|host|transposed] [below DIM]`` per operand, in call order;
    ``formula``: one forward call's FLOPs or bytes (``s`` bytes per element)."""

    name: str
    shapes: Mapping[str, Dims]
    inputs: str
    forward: Callable[..., torch.Tensor]
    output: str
    unit: str
    formula: str
    has_backward: bool = True
    new_in_functional: bool = False

    def dims(self, size: str) -> Dims:
        return self.shapes[errors.one_of("size", size, SIZES)]

    def operands(self, dims: Dims) -> dict[str, Operand]:
        found = {}
        for declared in self.inputs.split(", "):
            declared, _, high = declared.partition(" below ")
            name, *words = declared.split()
            flags = {"ones", "host", "transposed"}.intersection(words)
            found[name] = Operand(
                _shape([word for word in words if word not in flags], dims),
                dims.get(high, 0),
                "ones" in flags,
                trained=self.has_backward and not high and "ones" not in flags,
                transposed="transposed" in flags,
                on_host="host" in flags,
            )
        return found

    def output_shape(self, dims: Dims) -> tuple[int, ...]:
        return _shape(self.output.split(), dims)

    def work_at(self, size: str, dtype: str) -> int:
        itemsize = torch.empty((), dtype=precision.dtype_of(dtype)).element_size()
        return _evaluate(self.formula.split(" (")[0], self.dims(size), itemsize)


def _dims(names: str, *sizes: tuple[int, ...] | int) -> dict[str, Dims]:
    rows = [size if isinstance(size, tuple) else (size,) for size in sizes]
    return {size: dict(zip(names.split(), row, strict=True)) for size, row in zip(SIZES, rows)}


_SQUARE = _dims("n", 128, 1024, 8192)
_IMAGES = _dims("n c h w", (4, 16, 16, 16), (16, 64, 32, 32), (64, 256, 64, 64))
_COPIED = _dims("n", 65536, 4194304, 67108864)


_READ_WRITE = "2*n^2*s (read x, write y)"

_SPECS: tuple[OpSpec, ...] = (
    OpSpec(
        "matmul",
        _dims("n", 64, 256, 4096),
        "a n n, b n n",
        lambda a, b: torch.matmul(a, b),
        "n n",
        GFLOPS,
        "2*n^3 (n^3 multiply-adds)",
    ),
    OpSpec(
        "linear",
        _dims("t i o", (32, 128, 128), (512, 256, 256), (16384, 1024, 4096)),
        "x t i, weight o i, bias o",
        lambda x, weight, bias: F.linear(x, weight, bias),
        "t o",
        GFLOPS,
        "t*o*(2*i + 1) (i multiply-adds and a bias add per output)",
    ),
    OpSpec(
        "conv2d",
        _dims("n c h w o", (1, 16, 16, 16, 16), (8, 32, 16, 16, 32), (64, 64, 56, 56, 64)),
        "x n c h w, weight o c 3 3, bias o",
        lambda x, weight, bias: F.conv2d(x, weight, bias, padding=1),
        "n o h w",
        GFLOPS,
        "n*o*h*w*(2*c*9 + 1) (c*3*3 multiply-adds and a bias add per output)",
    ),
    OpSpec(
        "scaled_dot_product_attention",
        _dims("n h l d", (1, 4, 64, 32), (2, 8, 128, 64), (8, 16, 2048, 64)),
        "q n h l d, k n h l d, v n h l d",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
        "n h l d",
        GFLOPS,
        "4*n*h*l^2*d (q @ k^T and scores @ v; the softmax is left out, as FlashAttention counts)",
        new_in_functional=True,
    ),
    OpSpec(
        "max_pool2d",
        _IMAGES,
        "x n c h w",
        lambda x: F.max_pool2d(x, 2),
        "n c h/2 w/2",
        GBPS,
        "(n*c*h*w + n*c*(h/2)*(w/2))*s (read x, write the pooled result)",
    ),
    OpSpec(
        "batch_norm",
        _IMAGES,
        "x n c h w, weight c, bias c, running_mean c ones, running_var c ones",
        lambda x, weight, bias, mean, var: F.batch_norm(x, mean, var, weight, bias, training=True),
        "n c h w",
        GBPS,
        "(2*n*c*h*w + 6*c)*s (read x, write y; read weight and bias; read and write both running stats)",
    ),
    OpSpec(
        "layer_norm",
        _dims("t d", (64, 256), (4096, 256), (16384, 4096)),
        "x t d, weight d, bias d",
        lambda x, weight, bias: F.layer_norm(x, (x.shape[-1],), weight, bias),
        "t d",
        GBPS,
        "(2*t*d + 2*d)*s (read x, write y, read weight and bias)",
    ),
    OpSpec(
        "softmax",
        _SQUARE,
        "x n n",
        lambda x: torch.softmax(x, dim=-1),
        "n n",
        GBPS,
        _READ_WRITE,
    ),
    OpSpec(
        "gelu",
        _SQUARE,
        "x n n",
        lambda x: F.gelu(x),
        "n n",
        GBPS,
        _READ_WRITE,
    ),
    *(
        OpSpec(
            f"{name}{suffix}",
            _SQUARE,
            f"a n n{suffix.replace('_', ' ')}, b n n",
            lambda a, b, name=name: getattr(torch, name)(a, b),  # torch binds at the first case
            "n n",
            GBPS,
            "3*n^2*s (read a and b, write the result)",
            has_backward=name == "mul",  # add has no backward kernel of its own; mul has
        )
        for name in ("add", "mul")
        for suffix in ("", "_transposed")
    ),
    *(
        OpSpec(
            name,
            _SQUARE,
            "x n n",
            lambda x, name=name: getattr(torch, name)(x, dim=-1),
            "n",
            GBPS,
            "(n^2 + n)*s (read x, write one value per row)",
            has_backward=False,  # a reduction's backward is a broadcast: no kernel of its own
        )
        for name in ("sum", "mean")
    ),
    OpSpec(
        "index_select",
        _dims("v d k", (1024, 64, 256), (32768, 256, 4096), (65536, 1024, 65536)),
        "source v d, index k below v",
        lambda source, index: torch.index_select(source, 0, index),
        "k d",
        GBPS,
        "2*k*d*s + 8*k (read the selected rows, write them, read the int64 indices)",
    ),
    OpSpec(
        "gather",
        _dims("r c k", (256, 256, 64), (2048, 2048, 512), (16384, 8192, 4096)),
        "source r c, index r k below c",
        lambda source, index: torch.gather(source, 1, index),
        "r k",
        GBPS,
        "r*k*(2*s + 8) (per output: read an int64 index and a source element, write it)",
    ),
    OpSpec(
        "embedding",
        _dims("v d n l", (1000, 64, 4, 64), (30522, 256, 16, 256), (50257, 1024, 64, 1024)),
        "source v d, index n l below v",
        lambda source, index: F.embedding(index, source),
        "n l d",
        GBPS,
        "2*n*l*d*s + 8*n*l (read the looked-up rows, write them, read the int64 ids)",
    ),
    OpSpec(
        "cross_entropy",
        _dims("n c", (64, 1000), (1024, 1000), (4096, 32000)),
        "logits n c, target n below c",
        lambda logits, target: F.cross_entropy(logits, target),
        "",
        GBPS,
        "n*c*s + 8*n + s (read the logits and int64 targets, write the scalar loss)",
    ),
    *(
        OpSpec(
            f"copy_{direction}",
            _COPIED,
            f"source n{' host' * (direction == 'h2d')}, destination n{' host' * (direction == 'd2h')}",
            lambda source, destination: destination.copy_(source),
            "n",
            GBPS,
            "n*s (the bytes that cross between host and device memory)",
            has_backward=False,
        )
        for direction in ("h2d", "d2h")
    ),
)

REGISTRY: dict[str, OpSpec] = {spec.name: spec for spec in _SPECS}
NAMES: tuple[str, ...] = tuple(REGISTRY)
COMPUTE_NAMES: tuple[str, ...] = tuple(spec.name for spec in _SPECS if spec.unit == GFLOPS)
MEMORY_NAMES: tuple[str, ...] = tuple(spec.name for spec in _SPECS if spec.unit == GBPS)
BACKWARD_NAMES: tuple[str, ...] = tuple(spec.name for spec in _SPECS if spec.has_backward)


def get(name: str) -> OpSpec:
    return REGISTRY[errors.one_of("op", name, NAMES)]


def make_inputs(
    spec: OpSpec, size: str, device: str, dtype: str, training: bool
) -> dict[str, torch.Tensor]:
    """Drawn in float32, then cast: every dtype sees the same values."""
    devices.get(device).seed(models.SEED)
    float_dtype = precision.dtype_of(dtype)
    inputs = {}
    for name, operand in spec.operands(spec.dims(size)).items():
        where = "cpu" if operand.on_host else device
        shape = operand.shape[::-1] if operand.transposed else operand.shape
        if operand.high:
            tensor = torch.randint(0, operand.high, shape, device=where)
        elif operand.ones:
            tensor = torch.ones(shape, device=where, dtype=float_dtype)
        else:
            tensor = torch.randn(shape, device=where).to(float_dtype)
        tensor = tensor.t() if operand.transposed else tensor
        inputs[name] = tensor.requires_grad_(training and operand.trained)
    return inputs


def _bind_torch() -> None:
    # the stand-ins' lookup would add to a microsecond op
    global torch, F
    import torch as loaded
    import torch.nn.functional as functional

    torch, F = loaded, functional


class OpCase:
    """An op's inputs on a device and its unsynchronized calls."""

    def __init__(self, spec: OpSpec, device: str, dtype: str, size: str, training: bool) -> None:
        if training and not spec.has_backward:
            raise errors.UserError(
                f"{spec.name} is not trained through; choose one of: {', '.join(BACKWARD_NAMES)}"
            )
        _bind_torch()
        self.spec, self.dtype, self.size, self.training = spec, dtype, size, training
        self.device = devices.get(device)
        self.inputs = make_inputs(spec, size, device, dtype, training)
        self.operands = tuple(self.inputs.values())
        self.trained = [tensor for tensor in self.operands if tensor.requires_grad]
        self.grad_output: torch.Tensor | None = None
        self.calls_per_sample = CALLS_PER_SAMPLE[size]

    def forward(self) -> torch.Tensor:
        with torch.no_grad():
            return self.spec.forward(*self.operands)

    def forward_backward(self) -> tuple[torch.Tensor, ...]:
        # a fixed output gradient; autograd.grad accumulates nothing
        output = self.spec.forward(*self.operands)
        if self.grad_output is None:
            self.grad_output = torch.randn(output.shape, device=output.device).to(output.dtype)
        return torch.autograd.grad(output, self.trained, self.grad_output)

    def run(self, calls: int) -> None:
        call = self.forward_backward if self.training else self.forward
        for _ in range(calls):
            call()

    def work(self) -> int:
        return self.spec.work_at(self.size, self.dtype)

    def warm_up(self) -> None:
        for _ in range(2):
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
            label = _label(self.device, self.spec.name, self.dtype, self.size)
            raise errors.UserError(f"{label} gave {'; '.join(problems)}")


def median_seconds_per_call(case: OpCase, min_samples: int = 3, min_seconds: float = 0.2) -> float:
    return timing.median_seconds(
        case.run, case.device, case.calls_per_sample, min_samples, min_seconds
    )[0]


def throughput(case: OpCase) -> float:
    return case.work() / median_seconds_per_call(case) / 1e9


_slot: devices.OneSlot[OpCase] = devices.OneSlot()
forget = _slot.clear


def cached(device: str, op: str, dtype: str, size: str, training: bool) -> OpCase:
    def build() -> OpCase:
        case = OpCase(get(op), device, dtype, size, training)
        with fallback.Recorder() as recorder:
            case.warm_up()
        fallback.refuse(_label(device, op, dtype, size), recorder.ops)
        return case

    return _slot.get((device, op, dtype, size, training), device, build)


def _label(device: str, op: str, dtype: str, size: str) -> str:
    return f"{op} on {device} in {dtype} at {size}"


def prepare(device: str, op: str, dtype: str, size: str, training: bool) -> OpCase:
    """For an asv ``setup``: what cannot run here skips with the reason."""
    spec = get(op)
    precision.check_name(dtype)
    skips.require_device(device)
    skips.require_dtype(device, dtype)
    if spec.new_in_functional and not hasattr(F, op):
        raise skips.SkipNotImplemented(f"torch {torch.__version__} has no torch.nn.functional.{op}")
    try:
        return cached(device, op, dtype, size, training)
    except Exception as exc:
        forget()
        label, why = _label(device, op, dtype, size), errors.first_line(exc)
        if devices.is_out_of_memory(exc):
            devices.get(device).empty_cache()
            raise skips.SkipNotImplemented(f"{label} does not fit in memory: {why}") from exc
        # float32 must run everywhere; reduced precision may not
        if dtype != precision.DEFAULT and skips.torch_lacks(exc):
            raise skips.SkipNotImplemented(
                f"{label}: torch does not support it here: {why}"
            ) from exc
        if isinstance(exc, NotImplementedError):  # torch lacks a kernel: a failure, not an n/a
            raise RuntimeError(f"{label}: torch lacks an op: {exc}") from exc
        raise
