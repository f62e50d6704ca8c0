"""Loading a model for the HF backend: a local folder, a GGUF file, or a hub id (when the hub is reachable); the
revision that names its weights, the dtype to load (bf16 only where this CPU multiplies it fast), and a wider
output layer computed as weight @ rows.T."""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError

from memlab.backends.hf_config import HFBackendConfig, looks_like_hub_id
from memlab.errors import ConfigError, MemlabError
from memlab.gguf_parse import one_gguf_parse

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16,
           "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
# besides the weights, what changes outputs: architecture, tokenizer, chat template, EOS ids
_CONFIG_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                 "special_tokens_map.json", "chat_template.jinja", "chat_template.json")
_REVISIONS: dict[tuple, str] = {}
_MODELS_HINT = "build the offline models with `make models` (= `dvc repro --glob 'model-*' 'zoo-*'`)"


def _hub_offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def weights_revision(folder: Path, gguf_file: str | None = None) -> str:
    """Short content hash (12 hex of sha256) of a local model: its weight files (or the GGUF file), plus
    the config, tokenizer and chat-template files, so any change to what the model computes changes it."""
    folder = Path(folder)
    if gguf_file:
        files = [folder / gguf_file]
    else:
        files = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(_WEIGHT_SUFFIXES))
    files += [folder / n for n in _CONFIG_FILES if (folder / n).is_file()]
    stamp = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    if stamp in _REVISIONS:  # same files, unchanged since hashed in this process
        return _REVISIONS[stamp]
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
    _REVISIONS[stamp] = h.hexdigest()[:12]
    return _REVISIONS[stamp]


@functools.cache
def bf16_slowdown() -> float:
    """How many times slower a bfloat16 matrix product is than a float32 one on this CPU, at the current torch
    thread count (best of 5, a 128×512 by 512×512 product: ~1 ms). Below 1 on CPUs with bf16 matrix units (AMX,
    AVX512-BF16, Arm BF16); several times above 1 without them (measured here with oneDNN limited to AVX2: ~9×)."""
    def best(dtype: torch.dtype) -> float:
        a, b = torch.ones(128, 512, dtype=dtype), torch.ones(512, 512, dtype=dtype)
        times = []
        for _ in range(6):
            t0 = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - t0)
        return min(times[1:])  # the first call pays one-time kernel setup
    return best(torch.bfloat16) / best(torch.float32)


BF16_IF_FAST = "bfloat16_if_fast"  # bfloat16 where this CPU multiplies it faster than float32, else float32


def bf16_is_fast() -> bool:
    """Whether this CPU multiplies bfloat16 faster than float32 (bf16 matrix units: :func:`bf16_slowdown` < 1;
    measured 0.29 with AMX, 9–50 on AVX2-only CPUs, so the cut is far from both)."""
    return bf16_slowdown() < 1


def _resolve_bf16_if_fast(device: str) -> str:
    """``bfloat16`` on a GPU with bf16 or on a CPU with bf16 matrix units, else ``float32`` (one line says why): the
    dtype loaded is the backend's numerics (cache key) and ``run.json`` records it."""
    if device != "cpu":
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    if (ratio := bf16_slowdown()) < 1:
        return "bfloat16"
    print(f"memlab: model.dtype={BF16_IF_FAST} → float32: a bfloat16 product is {ratio:.0f}× slower than float32 "
          "on this CPU (no bf16 matrix units)", file=sys.stderr)
    return "float32"


def _warn_if_bf16_is_slow(dtype: torch.dtype, device: torch.device) -> None:
    if dtype == torch.bfloat16 and device.type == "cpu" and (ratio := bf16_slowdown()) > 1.5:
        print(f"memlab: warning: model.dtype=bfloat16 runs {ratio:.0f}× slower than float32 on this CPU (no bf16 "
              "matrix units); set model.dtype=float32 for speed (its answers differ slightly from bf16's)",
              file=sys.stderr)


# An output layer this wide, applied to this few rows (decoding steps; prefill keeps only its last position), runs
# faster as weight @ rows.T than as rows @ weight.T on CPU BLAS: Gemma-3's 262144 × 640 layer, 8 rows: 294 → 180 ms,
# 6 rows 296 → 134 ms; SmolLM2's 49152 × 576, 8 rows: 42 → 31 ms (one core, AVX2; medians of 7; `make bench
# --only backends` reports it). Layers of zoo size (2048 words) and the hidden layers gain nothing (measured).
TALL_OUTPUT_WORDS = 32768
TALL_OUTPUT_MAX_ROWS = 64


def _transposed_output_layer(model) -> None:
    """Compute a wide output layer as weight @ rows.T for at most TALL_OUTPUT_MAX_ROWS rows (the same dot products;
    the summation order inside each is the BLAS kernel's)."""
    head = model.get_output_embeddings()
    if type(head) is not torch.nn.Linear or head.out_features < TALL_OUTPUT_WORDS:
        return
    linear = head.forward

    def forward(x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        if rows.shape[0] > TALL_OUTPUT_MAX_ROWS or x.device.type != "cpu":
            return linear(x)
        out = torch.mm(head.weight, rows.T).T
        if head.bias is not None:
            out = out + head.bias
        return out.contiguous().reshape(*x.shape[:-1], head.out_features)

    head.forward = forward



def resolve_dtype(dtype: str, device: str) -> tuple[str, Any]:
    """The device (``auto`` resolved) and the torch dtype to load (``auto`` = the checkpoint's), after checking
    ``model.dtype``."""
    if dtype not in _DTYPES and dtype not in ("auto", BF16_IF_FAST):
        raise ConfigError(f"model.dtype must be one of {sorted(_DTYPES)}, auto or {BF16_IF_FAST}, got {dtype!r}")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype == BF16_IF_FAST:
        dtype = _resolve_bf16_if_fast(device)
    return device, ("auto" if dtype == "auto" else _DTYPES[dtype])


def locate(cfg: HFBackendConfig) -> tuple[str, dict[str, Any], str, str, bool]:
    """Where to load ``cfg`` from: (source, from_pretrained kwargs, model id, revision, whether a hub id)."""
    path, gguf_file, revision = str(cfg.path), cfg.gguf_file, cfg.revision
    if path.endswith(".gguf") and not gguf_file:
        path, gguf_file = str(Path(path).parent), Path(path).name
    local = Path(path).expanduser()
    kwargs: dict[str, Any] = {"trust_remote_code": cfg.trust_remote_code}
    kwargs.update({"gguf_file": gguf_file} if gguf_file else {})
    if local.is_dir():
        if gguf_file and not (local / gguf_file).is_file():
            raise MemlabError(f"GGUF file {local / gguf_file} not found; {_MODELS_HINT} or fix model.gguf_file")
        rev = revision if revision not in (None, "auto") else weights_revision(local, gguf_file)
        return str(local), kwargs, cfg.name or (Path(gguf_file).stem if gguf_file else local.name), rev, False
    if looks_like_hub_id(path):
        hub_rev = None if revision in (None, "auto") else str(revision)
        if hub_rev:
            kwargs["revision"] = hub_rev
        if _hub_offline():
            kwargs["local_files_only"] = True  # a copy already in the HF cache still works offline
        return path, kwargs, path, hub_rev or "main", True
    raise MemlabError(f"model folder {local} does not exist; {_MODELS_HINT} or point model.path at a "
                      "local model folder")


def load_pretrained(source: str, kwargs: dict[str, Any], torch_dtype: Any, is_hub: bool):
    """(tokenizer, model) from ``source``; a model that cannot load is one MemlabError line."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        with one_gguf_parse() if kwargs.get("gguf_file") else nullcontext():
            tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, **kwargs)
    except (OSError, ValueError, SafetensorError) as err:  # SafetensorError: a truncated model.safetensors
        if is_hub:
            if _hub_offline():
                raise MemlabError(f"model {source!r} is not a local folder and the Hugging Face hub is offline "
                                  "(HF_HUB_OFFLINE=1); set model.path to a local model folder, e.g. one "
                                  "under models/ built by `make models`") from None
            raise MemlabError(f"could not load {source!r} from the Hugging Face hub "
                              f"({str(err).splitlines()[0][:160]}); check the id/revision or use a local "
                              "folder") from None
        raise MemlabError(f"could not load the model at {source} ({str(err).splitlines()[0][:160]}); "
                          f"rebuild it with `make models`") from None
    return tokenizer, model
