"""The modern models (tiny configs: the real sizes are the benchmarks'), the Llama's generation, the compile axis."""

from __future__ import annotations

import dataclasses
import os
import warnings

import pytest
import torch
from benchmarks import benchmark_compile, benchmark_modern
from tools import compile_probe

from mpsbench.measure import fallback, llm, models, skips, suite, workloads

TINY_LLAMA = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)
TINY_CLIP = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)


@pytest.fixture
def tiny(monkeypatch):
    for key, value in TINY_LLAMA.items():
        monkeypatch.setitem(models.LLAMA_CONFIG, key, value)
    for key, value in TINY_CLIP.items():
        monkeypatch.setitem(models.CLIP_TEXT_CONFIG, key, value)
    monkeypatch.setattr(llm, "PROMPT_TOKENS", 24)


def test_the_seed_classes_keep_their_models_and_the_modern_ones_have_their_own():
    assert models.NAMES == ("mlp", "lenet5", "resnet50", "vgg16", "bert_base", "bert_base_frozen")
    assert models.MODERN_TRAINING_NAMES == ("vit_b_16", "llama_small")
    assert models.MODERN_INFERENCE_NAMES == ("vit_b_16", "llama_small", "clip_text")
    for name in models.MODERN_INFERENCE_NAMES:
        assert models.get(name).seed_batch_size in models.get(name).batch_sizes


def test_the_llama_trains_on_the_causal_lm_loss(tiny):
    workload = workloads.build("training", "cpu", "llama_small", 1)
    before = [p.detach().clone() for p in workload.trained_parameters()]
    loss = workload.step()
    assert torch.isfinite(loss) and float(loss.detach()) > 0
    logits = workload.spec.forward(
        workload.model, workload.batch.inputs
    )  # (batch, vocabulary, positions - 1)
    assert logits.shape == (1, models.LLAMA_CONFIG["vocab_size"], models.LLAMA_SEQUENCE_LENGTH - 1)
    assert torch.equal(
        workload.batch.target, workload.batch.inputs["input_ids"][:, 1:]
    )  # the next token
    assert all(not torch.equal(a, b) for a, b in zip(before, workload.trained_parameters()))


def test_the_text_encoder_is_inference_only_and_gives_the_hidden_states_sd_uses(tiny):
    with pytest.raises(workloads.WorkloadError, match="clip_text is an inference-only model"):
        workloads.build("training", "cpu", "clip_text", 1)
    workload = workloads.build("inference", "cpu", "clip_text", 1)
    assert workload.step().shape == (1, TINY_CLIP["hidden_size"], models.CLIP_SEQUENCE_LENGTH)


def test_decoding_through_the_cache_gives_the_tokens_of_greedy_decoding_without_one(tiny):
    generation = llm.Generation("cpu")
    token, cache = generation.prefill()
    decoded = generation.decode(token, cache, count=3)
    sequence = generation.prompt
    expected = []
    with torch.no_grad():
        for _ in range(4):  # the prefill's token, then the three decoded ones
            nxt = generation.model(input_ids=sequence, use_cache=False).logits[:, -1:].argmax(-1)
            expected.append(nxt)
            sequence = torch.cat([sequence, nxt], dim=1)
    assert torch.equal(token, expected[0])
    assert torch.equal(decoded, torch.cat(expected[1:], dim=1))


def test_the_decode_class_decodes_a_fixed_count_from_a_fresh_prefill_every_sample(
    tiny, monkeypatch
):
    monkeypatch.setattr(llm, "NEW_TOKENS", 5)
    bench = benchmark_modern.LlmDecode()
    lengths = []
    for _ in range(2):  # asv runs setup before every sample
        bench.setup("cpu", "llama_small")
        lengths.append(bench.cache.get_seq_length())
        bench.time_decode("cpu", "llama_small")
    assert lengths == [llm.PROMPT_TOKENS, llm.PROMPT_TOKENS]
    assert bench.timer.steps_per_call == 5


@pytest.mark.parametrize(
    ("device", "version", "expected"),
    [
        ("cpu", (1, 13), "has no torch.compile"),
        ("mps", (2, 7), "inductor compiles for mps from torch 2.8"),
    ],
)
def test_a_build_that_cannot_compile_skips_with_the_reason(monkeypatch, device, version, expected):
    monkeypatch.setattr(skips.precision, "torch_version", lambda: version)
    assert expected in str(skips.compile_unsupported(device))


def test_the_cpu_without_a_compiler_skips(monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(skips.shutil, "which", lambda name: None)
    assert "needs a C++ compiler" in str(skips.compile_unsupported("cpu"))
    with pytest.raises(suite.SkipNotImplemented, match="needs a C\\+\\+ compiler"):
        benchmark_compile.CompiledInference().setup("cpu", "mlp")


@pytest.fixture
def compile_fails(monkeypatch):
    """A stand-in for torch.compile whose first call fails as inductor's do; yields the cache folders it was given."""
    given: list[str] = []

    def broken(model):
        def call(*args, **kwargs):
            given.append(os.environ["TORCHINDUCTOR_CACHE_DIR"])
            raise RuntimeError(
                "inductor: lowering aten.addmm failed\nTraceback of the generated code ..."
            )

        model.forward = call
        return model

    monkeypatch.setattr(torch, "compile", broken)
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)  # set back afterwards
    return given


def test_a_compile_error_fails_the_combination_with_its_first_line(compile_fails):
    with pytest.raises(
        RuntimeError,
        match=r"^torch.compile of mlp inference on cpu failed: "
        r"RuntimeError: inductor: lowering aten.addmm failed$",
    ):
        benchmark_compile.CompiledInference().setup("cpu", "mlp")
    # asv's forked processes end without atexit: the folder goes with the preparation, failed or not
    assert len(compile_fails) == 1 and not os.path.exists(os.path.dirname(compile_fails[0]))


def test_a_compile_uses_a_fresh_folder_of_its_own_and_removes_only_that(
    compile_fails, monkeypatch, tmp_path
):
    mine = tmp_path / "my-caches"  # the user's, named by variables the process inherited
    (mine / "keep").mkdir(parents=True)
    (mine / "keep" / "kernel.so").write_text("the user's")
    for name in ("MPSBENCH_COMPILE_CACHE", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.setenv(name, str(mine))
    for _ in range(
        2
    ):  # asv's next process, or a second preparation in this one: a new folder each time
        with pytest.raises(RuntimeError, match=r"^torch\.compile of mlp inference on cpu failed"):
            benchmark_compile.CompiledInference().setup("cpu", "mlp")
    assert (mine / "keep" / "kernel.so").read_text() == "the user's"
    assert not any(folder.startswith(str(mine)) for folder in compile_fails)
    first, second = (os.path.dirname(folder) for folder in compile_fails)
    assert first != second and not os.path.exists(first) and not os.path.exists(second)


def test_a_guard_refusing_the_compiled_step_says_what_it_refused_not_that_the_compile_failed(
    monkeypatch,
):
    mlp = models.get("mlp")

    def forward(
        model, inputs
    ):  # an op that falls back, as TORCH_WARN_ONCE reports it under fallback.Recorder
        if torch.is_warn_always_enabled():
            warnings.warn(
                "The operator 'aten::_embedding_bag' is not currently supported on the MPS backend and will"
                " fall back to run on the CPU.",
                UserWarning,
                stacklevel=2,
            )
        return mlp.forward(model, inputs)

    monkeypatch.setitem(models.REGISTRY, "mlp", dataclasses.replace(mlp, forward=forward))
    monkeypatch.setattr(
        torch, "compile", lambda model: model
    )  # compiles nothing: the guard is what is tested
    monkeypatch.delenv(fallback.ALLOW_ENV, raising=False)
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)  # set back afterwards
    with pytest.raises(
        fallback.FallbackError,
        match=r"^mlp inference on cpu at batch 1024 \(float32, compiled\): 1 op",
    ):
        benchmark_compile.CompiledInference().setup("cpu", "mlp")


def test_a_generation_that_does_not_fit_skips_with_the_reason(tiny, monkeypatch):
    def out_of_memory(device, model):
        raise RuntimeError(
            "DefaultCPUAllocator: can't allocate memory: you tried to allocate 17179869184 bytes.\nMore ..."
        )

    monkeypatch.setattr(llm, "Generation", out_of_memory)
    reason = r"^llama_small at batch \d+ does not fit in cpu memory: DefaultCPUAllocator: can't allocate memory: you tried"
    with pytest.raises(
        suite.SkipNotImplemented, match=reason + r" to allocate 17179869184 bytes\.$"
    ):
        llm.prepare("cpu", "llama_small")


@pytest.mark.slow
def test_the_compiled_mlp_trains_and_its_compile_time_is_its_first_call():
    bench = benchmark_compile.CompiledTraining()
    bench.setup("cpu", "mlp")
    assert bench.workload.compiled and "compiled" in bench.workload.label
    before = [p.detach().clone() for p in bench.workload.trained_parameters()]
    bench.time_step("cpu", "mlp")
    assert all(not torch.equal(a, b) for a, b in zip(before, bench.workload.trained_parameters()))
    first = bench.track_compile_seconds("cpu", "mlp")
    assert first > 0
    bench.setup("cpu", "mlp")  # asv's next sample: the cached workload, no second compile
    assert bench.track_compile_seconds("cpu", "mlp") == first


@pytest.mark.parametrize(
    ("device", "says"),
    [
        ("tpu", "unknown device 'tpu'; choose one of: cpu, mps, cuda"),
        ("cuda", "cuda is not usable here"),
    ],
)
def test_the_compile_probe_refuses_a_device_it_cannot_compile_for_in_one_line(device, says, capsys):
    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the probe would run")
    assert compile_probe.main(["--device", device, "mlp"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and says in captured.err
