"""Who answers a served model's requests: the identity the response cache keys API answers by (issues 33, 50).

A served model is not named by its preset's ``model_id`` alone: two models behind one server, one model id behind
two servers, or a llama-cpp server that serves whatever GGUF it was started with under any name must never share
cached answers. The identity is (backend kind, normalized ``base_url``, what the server itself reports):

- ``served``: the server's stable description of the model from ``GET /v1/models`` (id, owner, vLLM's
  root/parent/max_model_len, llama-server's ``meta``: n_params, n_vocab, n_ctx_train, size); when it names a model
  file readable here (llama-cpp-python lists the GGUF path as the id when no alias is given), its sha256 is added,
  so a server restarted on another GGUF is another model.
- ``server``: what the server reports about how it computes, asked once per backend:
  ``GET <root>/props`` (llama.cpp's llama-server: the model file path and its sha256 when readable here, the chat
  template's sha256, BOS/EOS tokens, n_ctx and the default sampling settings a request does not override, the
  build); the token ids of a fixed probe text from the server's own tokenizer (``POST <root>/extras/tokenize``
  for llama-cpp-python, ``/tokenize`` for vLLM and llama-server): they show the tokenizer and whether the server
  prepends a BOS (``--kv_overrides tokenizer.ggml.add_bos_token=bool:true`` changes them); and the ``model`` a
  one-token completion that names no model reports: llama-cpp-python 0.3 answers with the GGUF path it serves even
  under ``--model_alias`` (its /v1/models says only the alias and ``owned_by: me``), hashed when readable here.

Covered: another model or file behind the same URL when the server names it (file path, hash, meta, vLLM root);
another tokenizer or BOS setting when the server has a tokenize route; another chat template, context size or
default sampling settings when it has ``/props``. NOT covered (nothing in the server's answers shows them):
another file at the same path on a server whose files are not readable here, llama-cpp-python's ``--n_ctx``,
chat format, KV cache type, thread count and other settings (its log-probs would show some, but they move by
~0.05 with the prompt it evaluated before, so they name no state), and a hosted API's silent update of a model
behind the same name. For those the user's ``model.revision`` (part of every cache key) names the weights; when
it is not set and the server names no weights (:func:`names_weights`), the backend warns once that cached
answers may come from another model. A server without ``/v1/models`` is identified by base_url + model id.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# fields of a /v1/models entry that describe the model and stay fixed while it is served ("created" changes per
# request on vLLM, "permission" carries fresh ids): id, owner, vLLM's root/parent/max_model_len, llama.cpp's meta
_STABLE_FIELDS = ("id", "owned_by", "root", "parent", "max_model_len", "meta")
# fields of llama-server's GET /props that name the model or change answers (kept as reported)
_PROPS_FIELDS = ("model_path", "bos_token", "eos_token", "build_info", "modalities")
# the default_generation_settings of /props that change answers: context size and the sampling defaults a
# request leaves to the server (top_k, min_p, repeat_penalty, ...)
_PROPS_SETTINGS = ("n_ctx", "params")
PROBE_TEXT = "Memlab probe: the quick brown fox, 1234."
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
    """The cache identity of ``model_name`` at ``base_url``: {"backend", "base_url", "served", "server"};
    ``served`` is the server's stable description of the model (plus ``file_sha256`` of a model file it names that
    is readable here), or None when the server lists no models; ``server`` is what it reports about how it
    computes (module docstring), or None when it reports nothing (a server without /v1/models is not asked)."""
    models = _list_models(base_url, timeout, api_key)
    served = _describe(models, model_name)
    server = _server_report(base_url, model_name, timeout, api_key) if models is not None else None
    return {"backend": "openai", "base_url": normalize_base_url(base_url), "served": served, "server": server}


def names_weights(identity: dict | None) -> bool:
    """Whether the server's answers name the weights it serves (a file hash or path, llama-server's meta, vLLM's
    root), so another model under the same name gets another key without the user's ``model.revision``."""
    if not identity:
        return False
    served, server = identity.get("served") or {}, identity.get("server") or {}
    return bool(served.get("file_sha256") or served.get("meta") or served.get("root") or server.get("model_path")
                or server.get("reported_model_sha256") or served_file(identity))


def served_file(identity: dict | None) -> str | None:
    """The model file a server names: llama-server's /props ``model_path``, else the GGUF a completion that names
    no model reports (llama-cpp-python), else None."""
    server = (identity or {}).get("server") or {}
    reported = server.get("reported_model")
    gguf = reported if isinstance(reported, str) and reported.lower().endswith(".gguf") else None
    return server.get("model_path") or gguf


def _root(base_url: str) -> str:
    root = str(base_url).rstrip("/")
    return root[:-3] if root.endswith("/v1") else root


def _headers(api_key: str | None) -> dict:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _list_models(base_url: str, timeout: float, api_key: str | None) -> list[dict] | None:
    import httpx

    try:
        r = httpx.get(str(base_url).rstrip("/") + "/models", headers=_headers(api_key),
                      timeout=min(float(timeout), 30.0))
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


def _server_report(base_url: str, model_name: str, timeout: float, api_key: str | None) -> dict | None:
    """What the server says about how it computes: llama-server's /props, and its tokenizer's ids of a probe."""
    out: dict[str, Any] = {}
    props = _get_json(_root(base_url) + "/props", timeout, api_key)
    if isinstance(props, dict):
        out.update({k: props[k] for k in _PROPS_FIELDS if props.get(k) is not None})
        digest = _file_sha256(props.get("model_path"))
        if digest:
            out["model_sha256"] = digest
        if isinstance(props.get("chat_template"), str):
            out["chat_template_sha256"] = hashlib.sha256(props["chat_template"].encode("utf-8")).hexdigest()
        settings = props.get("default_generation_settings")
        if isinstance(settings, dict):
            kept = {k: settings[k] for k in _PROPS_SETTINGS if settings.get(k) is not None}
            if kept:
                out["default_generation_settings"] = kept
    probe = _probe_tokens(base_url, model_name, timeout, api_key)
    if probe is not None:
        out["probe_tokens"] = probe
    out.update(_completion_probe(base_url, timeout, api_key))
    return out or None


def _completion_probe(base_url: str, timeout: float, api_key: str | None) -> dict[str, Any]:
    """What a one-token completion that names no model reports as its ``model``: llama-cpp-python answers with
    the model file it serves (its ``model_path``, even under ``--model_alias``), kept with its sha256 when readable
    here. A server that wants a model name (hosted APIs) refuses it: nothing is added. Its log-probs are not kept:
    llama-cpp-python's differ by ~0.05 with the prompt it evaluated before (its reused prefix), so they would not
    name one server state."""
    import httpx

    body = {"prompt": PROBE_TEXT, "max_tokens": 1, "temperature": 0}
    try:
        r = httpx.post(str(base_url).rstrip("/") + "/completions", json=body, headers=_headers(api_key),
                       timeout=min(float(timeout), 30.0))
        reply = r.json() if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return {}
    if not isinstance(reply, dict):
        return {}
    out: dict[str, Any] = {}
    model = reply.get("model")
    if isinstance(model, str) and model:
        out["reported_model"] = model
        digest = _file_sha256(model)
        if digest:
            out["reported_model_sha256"] = digest
    return out


def _get_json(url: str, timeout: float, api_key: str | None) -> Any:
    import httpx

    try:
        r = httpx.get(url, headers=_headers(api_key), timeout=min(float(timeout), 30.0))
        return r.json() if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def _probe_tokens(base_url: str, model_name: str, timeout: float, api_key: str | None) -> list[int] | None:
    """The server's token ids of PROBE_TEXT as its tokenize route returns them (with the BOS it prepends)."""
    import httpx

    root = _root(base_url)
    for route, body in (("/extras/tokenize", {"input": PROBE_TEXT, "model": model_name}),
                        ("/tokenize", {"model": model_name, "prompt": PROBE_TEXT, "content": PROBE_TEXT})):
        try:
            r = httpx.post(root + route, json=body, headers=_headers(api_key), timeout=min(float(timeout), 30.0))
            toks = r.json().get("tokens") if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            toks = None
        if isinstance(toks, list) and toks and all(isinstance(t, int) for t in toks):
            return toks
    return None


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
