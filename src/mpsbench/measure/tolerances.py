"""What counts as a wrong result (torch-free)."""

from __future__ import annotations

import re

# float32's allows for cuda's TF32 convolutions
TOLERANCES: dict[str, float] = {"float32": 1e-2, "float16": 5e-2, "bfloat16": 1e-1}
DTYPES: tuple[str, ...] = tuple(TOLERANCES)
ERROR_UNIT = "relative error"  # max|device - reference| / max|reference|
DIFFERENCE_UNIT = "relative difference"  # two identical calls': not 0 is nondeterminism

# reported patterns, in the dtypes their issues showed wrong
REPORTED: dict[str, tuple[str, ...]] = {
    "matmul_transposed_after_churn": ("float32",),
    "linear_3d_no_bias": ("float16", "bfloat16"),
    "reductions_in_succession": ("float32",),
    "compiled_layer_norm": ("float32",),
    "linear_bias": ("float32",),
    "linear_broadcast_input": ("float32",),
}


def dtypes(pattern: str) -> tuple[str, ...]:
    return REPORTED.get(pattern, DTYPES)


def tolerance(entry: str) -> float:
    """A recorded error row's tolerance, by the dtype among its params (else float32's)."""
    named = re.findall(r"'(\w+)'", entry)
    return next((TOLERANCES[name] for name in named if name in TOLERANCES), TOLERANCES["float32"])
