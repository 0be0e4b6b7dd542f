"""``torch.compile`` (inductor) beside eager; the cold first step is the compile time."""

from __future__ import annotations

import os
import shutil
import tempfile

from mpsbench.core import errors
from mpsbench.measure import models, skips, suite, workloads

# the frozen BERT compiles as bert_base
TRAINING_NAMES = tuple(name for name in models.timed_for("training") if name != "bert_base_frozen")
INFERENCE_NAMES = models.timed_for("inference")


def cold_caches() -> str:
    folder = tempfile.mkdtemp(prefix="mpsbench-inductor-")
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        os.environ[name] = os.path.join(folder, name.lower())
    return folder


def prepare(kind: str, device: str, model: str) -> workloads.Workload:
    suite.require(kind, device, model)
    skips.skip_if(skips.compile_unsupported(device))
    folder = cold_caches()
    try:
        return suite.prepare(kind, device, model, models.get(model).seed_batch_size, compiled=True)
    except (skips.SkipNotImplemented, *suite.GUARD_ERRORS):
        raise  # not the compile's failure
    except Exception as exc:
        what = f"{type(exc).__name__}: {errors.first_line(exc)}"
        raise RuntimeError(f"torch.compile of {model} {kind} on {device} failed: {what}") from exc
    finally:  # the kernels are loaded; asv's forks skip atexit
        shutil.rmtree(folder, ignore_errors=True)
