"""What a value may be on its way into a results folder: a finite number within its unit's range, or asv's own
null (the combination failed; asv's log says why) or NaN (skipped, or not selected) (issue 34).

asv's loader is the schema of a results file's form (what wrote it reads it best, :func:`recorded.read`); it takes
any JSON as a value, so ``"abc"``, ``true``, ``Infinity`` or a negative time would be recorded for good. Each unit's
range lives here, beside the units of :mod:`mpsbench.regressions.rule`, which judges changes of them.
"""

from __future__ import annotations

import math
from typing import Any

# unit -> (least, most, least itself allowed); a unit not listed takes any finite number (a benchmark's own unit)
RANGES: dict[str, tuple[float, float, bool]] = {
    "seconds": (0.0, math.inf, False),  # a time is never zero or less
    **{rate: (0.0, math.inf, False) for rate in ("samples/s", "images/s", "GFLOP/s", "GB/s")},
    **{amount: (0.0, math.inf, True) for amount in ("MiB", "ops", "samples", "relative error", "ratio", "macOS version")},
    **{share: (0.0, 1.0, True) for share in ("fraction", "on", "on battery")},
    "threads": (1.0, math.inf, True),
    # leak slopes ("MiB/100 steps", "MiB/1000 iterations") may be negative: memory a loop gave back
}


def problem(value: Any, unit: str) -> str | None:
    """Why ``value`` cannot be recorded for a benchmark whose unit is ``unit``; None when it can."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None  # asv's failed and skipped
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{value!r} is not a number"
    if not math.isfinite(value):
        return f"{value!r} is not a finite number"
    least, most, inclusive = RANGES.get(unit, (-math.inf, math.inf, True))
    if value > most or value < least or (value == least and not inclusive):
        shown = f"{'at least' if inclusive else 'above'} {least:g}" + (f" and at most {most:g}" if most < math.inf else "")
        return f"{value!r} is no value of {unit!r} (valid: a number {shown})"
    return None
