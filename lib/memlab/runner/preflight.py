"""Pre-flight checks: what a run's models need, checked before any model loads or the notebook starts (issue 50).

Each check raises :class:`memlab.errors.ConfigError` with one line naming the file or key that is wrong and the fix
that applies to that input (``make models`` only for the pipeline's own models under ``paths.models``). The runner
calls :func:`check_run` right before it executes a run; nothing here imports torch unless a run asks for CUDA.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

from memlab.backends.hf_config import looks_like_hub_id
from memlab.backends.registry import find_kind, has_weights_at_path, is_served
from memlab.errors import ConfigError

DEVICES = ("cpu", "cuda", "auto")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
# a tokenizer the transformers loaders can build: the fast tokenizer's file, or a slow tokenizer's vocabulary
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "0.0.0.0")
MODELS_FIX = "build it with `make models`"


def check_run(cfg) -> None:
    """Every pre-flight check of a composed run config (after :func:`memlab.model_use.check_model_override`): the
    ``model`` node's device, and each model under test (``models``): device, local files, served URL."""
    from memlab.config import to_plain
    from memlab.model_use import preset, target_nodes

    from omegaconf.errors import OmegaConfBaseException

    try:
        plain = to_plain(cfg)
    except OmegaConfBaseException:
        return  # a config that does not resolve: the runner's own check says why, in one line
    root = Path(str(plain["paths"]["root"]))
    models_dir = Path(str(plain["paths"]["models"]))
    model = plain.get("model") or {}
    if isinstance(model, Mapping):
        check_device(model, "model.device")
    if plain.get("models") is None:
        return
    mia = (plain.get("params") or {}).get("mia")   # the run scores its models under test (the audit's MIA)
    for node in target_nodes(plain):
        check_node(node, root, models_dir)
        if mia and is_served(node):
            check_served_scoring(node)
    if isinstance(mia, Mapping) and mia.get("reference"):   # the audit's reference model: a conf/model preset
        check_node(preset(str(mia["reference"]), plain["paths"], plain.get("numerics")), root, models_dir)


def check_node(node: Mapping[str, Any], root: Path, models_dir: Path) -> None:
    """One model node: its device, then its files (a kind with ``weights_at_path``, e.g. hf) or its server (a
    ``served`` kind, e.g. openai; backends/registry.py)."""
    check_device(node, "model.device")
    kind = find_kind(node.get("backend"))
    if kind is not None and kind.weights_at_path and not node.get("path"):
        raise ConfigError(f"model.path of {node.get('name') or 'the model'} is empty: point it at a model folder, a "
                          ".gguf file or a hub id")
    if has_weights_at_path(node):
        check_local_model(str(node["path"]), node.get("gguf_file"), root, models_dir)
    elif is_served(node):
        check_served(node)


def check_device(node: Mapping[str, Any], key: str) -> None:
    """``model.device`` is cpu, cuda or auto; cuda only where torch sees a CUDA device (a node naming no backend,
    or one whose kind has a ``device`` key)."""
    kind = find_kind(node.get("backend"))
    if "device" not in node or (node.get("backend") is not None and (kind is None or "device" not in kind.keys)):
        return
    device = node.get("device")
    if device not in DEVICES and not re.fullmatch(r"cuda:\d+", str(device)):
        raise ConfigError(f"{key} must be cpu, cuda or auto, got {device!r}; e.g. {key}=cpu")
    if str(device).startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(f"{key}={device} but torch sees no CUDA device here (torch {torch.__version__}, CUDA "
                              f"{torch.version.cuda or 'not built in'}); use {key}=cpu (or auto)")


def _under(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except (ValueError, OSError):
        return False


def missing_model(target: Path, key: str = "model.path") -> ConfigError:
    """The one line for a model file or folder the user named that is not there."""
    return ConfigError(f"{key}: {target} does not exist; point model.path at an existing model folder or .gguf file")


def check_local_model(path: str, gguf_file: str | None, root: Path, models_dir: Path) -> None:
    """A local model (``model.path``: a folder or a .gguf file; ``model.gguf_file`` inside the folder) exists and is
    whole. A hub id is left to the loader."""
    if path.endswith(".gguf") and not gguf_file:
        path, gguf_file = str(Path(path).parent), Path(path).name
    if looks_like_hub_id(path) and not (root / path).exists():
        return
    folder = Path(path).expanduser()
    if not folder.is_absolute() and not folder.exists():
        folder = root / folder  # the notebook runs in paths.root
    target = folder / gguf_file if gguf_file else folder
    ours = _under(target, models_dir)
    if not target.exists():
        if ours:
            raise ConfigError(f"model {'file' if gguf_file else 'folder'} {target} does not exist (not built yet); "
                              f"{MODELS_FIX}")
        raise missing_model(target, "model.gguf_file" if gguf_file and folder.is_dir() else "model.path")
    fix = "rebuild it with `make models`" if ours else \
        "point model.path at a whole model (a Hugging Face folder or a .gguf file)"
    if gguf_file:
        check_gguf(target, fix if ours else "point model.path at a real .gguf file",
                   fix if ours else "the file is cut (an interrupted download or copy): fetch or copy it again whole")
    elif target.is_dir():
        check_hf_folder(target, fix, ours)
    else:
        raise ConfigError(f"model.path {target} is a file but not a .gguf file; {fix}")


def check_hf_folder(folder: Path, fix: str, ours: bool) -> None:
    """A Hugging Face model folder: config.json, weights, a tokenizer; each safetensors file as long as its header
    says."""
    names = {p.name for p in folder.iterdir()}
    ggufs = sorted(n for n in names if n.endswith(".gguf"))
    weights = sorted(n for n in names if n.endswith(_WEIGHT_SUFFIXES))
    if "config.json" not in names and not weights:
        hint = f"; it holds {ggufs[0]}: point model.path at {folder / ggufs[0]}" if ggufs else ""
        raise ConfigError(f"model folder {folder} holds no model (no config.json, no *.safetensors/*.bin weights){hint}"
                          f"{'' if hint else '; ' + fix}")
    if "config.json" not in names:
        raise ConfigError(f"model folder {folder} has no config.json beside its weights; {fix}")
    if not weights:
        raise ConfigError(f"model folder {folder} has config.json but no weights (*.safetensors or *.bin); {fix}")
    if not names & set(_TOKENIZER_FILES):
        tfix = fix if ours else "copy the model's tokenizer files (tokenizer.json, tokenizer_config.json) into it"
        raise ConfigError(f"model folder {folder} has no tokenizer files (none of {', '.join(_TOKENIZER_FILES)}); "
                          f"{tfix}")
    for name in weights:
        if name.endswith(".safetensors"):
            check_safetensors(folder / name, fix)


def check_safetensors(path: Path, fix: str) -> None:
    """The file is as long as its header's tensors need (a cut download or copy is refused here, not mid-load)."""
    size = path.stat().st_size
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ValueError("shorter than its 8-byte header length")
            n = struct.unpack("<Q", head)[0]
            if n > min(size, 100 << 20):
                raise ValueError(f"its header claims {n} bytes")
            header = json.loads(f.read(n))
        end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as err:
        raise ConfigError(f"weights file {path} is not a valid safetensors file ({err}); {fix}") from None
    if size < 8 + n + end:
        raise ConfigError(f"weights file {path} is truncated: {size} bytes, its header declares {8 + n + end}; {fix}")


# ---- GGUF --------------------------------------------------------------------------------------------------------
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_MAX_COUNT = 1 << 24  # more keys, tensors or dims than any model has: the header is garbage


class _Cut(Exception):
    """The file ended inside its header."""


class _Reader:
    def __init__(self, f, size: int):
        self.f, self.size = f, size

    def read(self, n: int) -> bytes:
        if n > self.size:
            raise ValueError(f"a length of {n} bytes in its header, longer than the file")
        data = self.f.read(n)
        if len(data) < n:
            raise _Cut()
        return data

    def unpack(self, fmt: str):
        return struct.unpack("<" + fmt, self.read(struct.calcsize("<" + fmt)))[0]

    def string(self) -> str:
        return self.read(self.unpack("Q")).decode("utf-8", errors="replace")

    def value(self, kind: int):
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item, count = self.unpack("I"), self.unpack("Q")
            if count > self.size:
                raise ValueError(f"an array of {count} items in its header, more than the file's bytes")
            if item in _SCALARS:  # skipped in one read: vocabularies' scores and token types
                self.read(count * struct.calcsize(_SCALARS[item]))
                return None
            for _ in range(count):
                self.value(item)
            return None
        raise ValueError(f"unknown value type {kind} in its header")


def _header_keys(f, r: _Reader):
    """Read a GGUF's magic, version and counts, then its key/value pairs: (the tensors' count, a generator of
    (key, value) — arrays read past, None). Raises ValueError (not a GGUF, a garbled header) or :class:`_Cut`."""
    if f.read(4) != b"GGUF":
        raise ValueError("its first bytes are not the GGUF magic")
    version = r.unpack("I")
    if version not in (1, 2, 3):
        raise ValueError(f"GGUF version {version} unknown (garbled header)")
    count = "I" if version == 1 else "Q"
    n_tensors, n_kv = r.unpack(count), r.unpack(count)
    if n_tensors > _MAX_COUNT or n_kv > _MAX_COUNT:
        raise ValueError(f"its header claims {n_tensors} tensors and {n_kv} keys (garbled)")

    def pairs():
        for _ in range(n_kv):
            key, kind = r.string(), r.unpack("I")
            yield key, r.value(kind)

    return n_tensors, pairs()


def gguf_extent(path: Path) -> tuple[int, int]:
    """(bytes the GGUF's header declares it holds: header + aligned tensor data, the file's size). Raises ValueError
    (not a GGUF, a garbled header) or :class:`_Cut` (the file ends inside its header)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        r = _Reader(f, size)
        n_tensors, pairs = _header_keys(f, r)
        alignment = 32
        for key, value in pairs:
            if key == "general.alignment" and isinstance(value, int) and value > 0:
                alignment = value
        data_end = 0
        for _ in range(n_tensors):
            r.string()
            n_dims = r.unpack("I")
            if n_dims > 8:
                raise ValueError(f"a tensor with {n_dims} dimensions in its header (garbled)")
            dims = [r.unpack("Q") for _ in range(n_dims)]
            kind, offset = r.unpack("I"), r.unpack("Q")
            data_end = max(data_end, offset + _tensor_bytes(kind, dims))
        header_end = f.tell()
    start = -(-header_end // alignment) * alignment
    return start + data_end, size


def gguf_file_type(path: Path) -> str | None:
    """The type a GGUF's header names for its weights (``general.file_type``: "Q4_1", "F16", ...), or None when the
    file is no readable GGUF or names none (only the header's keys are read, arrays skipped)."""
    try:
        with open(path, "rb") as f:
            _, pairs = _header_keys(f, _Reader(f, path.stat().st_size))
            value = next((v for k, v in pairs if k == "general.file_type"), None)
    except (OSError, ValueError, _Cut, struct.error):
        return None
    if not isinstance(value, int):
        return None
    from gguf.constants import LlamaFileType

    try:
        return LlamaFileType(value).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except ValueError:
        return f"file type {value}"


def _tensor_bytes(kind: int, dims: list[int]) -> int:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    except (ValueError, KeyError):
        raise ValueError(f"a tensor of unknown ggml type {kind} in its header") from None
    n = 1
    for d in dims:
        n *= d
    return n // block * type_size


def check_gguf(path: Path, fix: str, cut_fix: str | None = None) -> None:
    """The file is a GGUF whose header parses and whose size covers the tensor data the header declares (``fix``:
    what to do about a file that is no GGUF; ``cut_fix``: about a cut one)."""
    cut_fix = cut_fix or fix
    try:
        needed, size = gguf_extent(path)
    except _Cut:
        raise ConfigError(f"GGUF file {path} is truncated: it ends inside its header ({path.stat().st_size} bytes); "
                          f"{cut_fix}") from None
    except (ValueError, struct.error, OSError) as err:
        raise ConfigError(f"{path} is not a valid GGUF file ({err}); {fix}") from None
    if size < needed:
        raise ConfigError(f"GGUF file {path} is truncated: {size} bytes, its header declares {needed} "
                          f"({100 * size // max(needed, 1)}% there); {cut_fix}")


# ---- served models -----------------------------------------------------------------------------------------------
def self_hosted(node: Mapping[str, Any]) -> bool:
    """A server of the user's own (this machine's loopback, or any host reached without an API key: llama.cpp or
    vLLM on a cluster node) rather than a hosted API (a key in ``api_key_env``: its rate limits and prices)."""
    host = urlsplit(str(node.get("base_url") or "")).hostname or ""
    return host in _LOOPBACK or not node.get("api_key_env")


def check_served(node: Mapping[str, Any], timeout: float = 5.0) -> None:
    """A self-hosted server (:func:`self_hosted`) answers ``GET <base_url>/models`` and serves ``model.model_id``
    (a server listing one model serves it under any name: llama-cpp-python, llama-server). Hosted APIs are left
    to the backend (their keys, their rate limits)."""
    url = str(node.get("base_url") or "")
    if not url or not self_hosted(node):
        return
    import httpx

    models_url = url.rstrip("/") + "/models"
    try:
        r = httpx.get(models_url, timeout=timeout)
    except httpx.HTTPError as err:
        why = " ".join(str(err).split())[:100] or type(err).__name__
        from memlab.config import CONF_DIR

        how = f" (see conf/model/{node.get('name')}.yaml)" if (CONF_DIR / "model" / f"{node.get('name')}.yaml").is_file() \
            else ""
        raise ConfigError(f"model.base_url {url}: no server answers ({why}); start the model's server there{how} "
                          "or fix model.base_url") from None
    if r.status_code == 404:
        raise ConfigError(f"model.base_url {url}: {models_url} answers HTTP 404, not an OpenAI-compatible server "
                          "root; model.base_url ends in /v1 (e.g. http://127.0.0.1:8080/v1)")
    if r.status_code != 200:
        return  # auth or other errors: the backend's own one-line errors name them
    try:
        data = r.json().get("data")
    except (ValueError, AttributeError):
        return
    ids = [str(m.get("id")) for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    model_id = str(node.get("model_id"))
    if len(ids) > 1 and model_id not in ids:
        raise ConfigError(f"model.model_id {model_id!r} is not served at {url} (it serves {', '.join(ids[:8])}); "
                          "set model.model_id to one of them")


def check_served_scoring(node: Mapping[str, Any]) -> None:
    """A self-hosted server (:func:`self_hosted`, on this machine or another) whose preset scores by echo
    (``can_score: echo_logprobs``) scores one short text now, so a server that echoes misaligned log-probs
    (llama-cpp-python started without the BOS override) is one line before the generation that precedes the run's
    first scoring, not after it. A hosted API is not probed (a request it may charge for)."""
    url = str(node.get("base_url") or "")
    if node.get("can_score") != "echo_logprobs" or not self_hosted(node):
        return
    import contextlib
    import io

    from memlab.backends.factory import build_backend
    from memlab.errors import MemlabError

    try:
        with contextlib.redirect_stderr(io.StringIO()):   # the probe is silent: the run says its own notes
            build_backend(dict(node, max_retries=0)).score(["The pre-flight check scores this short line."])
    except MemlabError as err:
        raise ConfigError(f"model.base_url {url}: scoring before the run failed: {err}") from None
