"""Who answers a served model's requests: the identity the response cache keys API answers by (issue 33).

A served model is not named by its preset's ``model_id`` alone: two models behind one server, one model id behind
two servers, or a llama-cpp server that serves whatever GGUF it was started with under any name must never share
cached answers. The identity is (backend kind, normalized ``base_url``, the server's own description of the model
from ``GET /v1/models``); when the description names a model file readable here (llama-cpp-python lists the GGUF
path as the id), its sha256 is added, so a server restarted on another GGUF is another model. A server without
``/v1/models`` is identified by base_url + model id.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# fields of a /v1/models entry that describe the model and stay fixed while it is served ("created" changes per
# request on vLLM, "permission" carries fresh ids): id, owner, vLLM's root/parent/max_model_len, llama.cpp's meta
_STABLE_FIELDS = ("id", "owned_by", "root", "parent", "max_model_len", "meta")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_FILE_HASHES: dict[tuple[str, int, int], str] = {}


def normalize_base_url(url: str) -> str:
    """``HTTP://LocalHost:80/v1/`` -> ``http://localhost/v1``: scheme and host lower case, default port and
    trailing slashes dropped."""
    parts = urlsplit(str(url).strip())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    port = parts.port
    netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def served_identity(base_url: str, model_name: str, timeout: float, api_key: str | None = None) -> dict[str, Any]:
    """The cache identity of ``model_name`` at ``base_url``: {"backend", "base_url", "served"}; ``served`` is the
    server's stable description of the model (plus ``file_sha256`` of a model file it names that is readable
    here), or None when the server lists no models."""
    return {"backend": "openai", "base_url": normalize_base_url(base_url),
            "served": _describe(_list_models(base_url, timeout, api_key), model_name)}


def _list_models(base_url: str, timeout: float, api_key: str | None) -> list[dict] | None:
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = httpx.get(str(base_url).rstrip("/") + "/models", headers=headers, timeout=min(float(timeout), 30.0))
        data = r.json().get("data") if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else None


def _describe(models: list[dict] | None, model_name: str) -> dict | None:
    if not models:
        return None
    named = [m for m in models if str(m.get("id")) == model_name]
    # a server with one model serves it under any name (llama-cpp-python, llama-server)
    entry = named[0] if named else models[0] if len(models) == 1 else None
    if entry is None:
        return None
    desc = {k: entry[k] for k in _STABLE_FIELDS if entry.get(k) is not None}
    for key in ("id", "root"):
        digest = _file_sha256(desc.get(key))
        if digest:
            desc["file_sha256"] = digest
            break
    return desc


def _file_sha256(name: Any) -> str | None:
    """sha256 of a model file the server names, when it is a file on this machine (memoized by size+mtime)."""
    if not isinstance(name, str) or not name or len(name) > 4096:
        return None
    path = Path(name)
    try:
        if not path.is_file():
            return None
        st = path.stat()
    except OSError:
        return None
    memo = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if memo not in _FILE_HASHES:
        h = hashlib.sha256()
        try:
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        except OSError:
            return None
        _FILE_HASHES[memo] = h.hexdigest()
    return _FILE_HASHES[memo]
