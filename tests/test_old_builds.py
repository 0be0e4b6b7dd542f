"""Old builds: a package made for a newer torch fails at import with any error, and only its models skip."""

from __future__ import annotations

import importlib
import sys

from mpsbench.measure import models


def test_a_package_that_does_not_import_with_this_torch_is_missing_not_fatal(monkeypatch):
    real = importlib.import_module

    def newer_than_torch(name: str, package: str | None = None):
        if name.startswith("transformers"):  # transformers 4.51 on torch 2.0: no torch.compiler
            raise AttributeError("module 'torch' has no attribute 'compiler'")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", newer_than_torch)
    assert models.get("bert_base").unimportable() == (
        "bert_base needs transformers.models.bert.modeling_bert, not importable here"
    )
    assert models.get("mlp").unimportable() is None
    monkeypatch.setitem(sys.modules, "asv_runner.server", object())  # as in asv's forkserver
    monkeypatch.setattr(
        sys, "argv", ["benchmark.py", models.FORKSERVER_MODE, "benchmarks", "socket"]
    )
    assert "transformers.models.bert.modeling_bert" not in models.preload_for_forkserver()
