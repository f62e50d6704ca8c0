"""What a run leaves beside its results so a reviewer can tell what produced them, and what it keeps out of them.

* :func:`settle_notebook` makes the executed notebook a function of the config alone: papermill's clocks and the
  kernel's stderr (progress bars, warnings with the venv's path) leave it for ``run.log``, and the checkout's
  absolute path becomes relative. The notebook and its HTML are DVC outputs: a fresh clone anywhere must hash them
  the same (``dvc.lock``).
* :func:`write_run_json` records provenance in ``run.json`` (not a DVC output: it holds times): commit and what
  differs from it, the config's hash, the seed, the numeric path (CPU, instruction sets, pinned kernels, dtypes,
  threads), the versions of the packages and Debian data packages that decide the numbers, and the models' hashes.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Mapping

from memlab import numerics
from memlab.model_use import required_model_setting, required_threads

# the packages whose versions a run (run.json) and the reviewer site (its environment section) record: one list
PACKAGES = ("torch", "transformers", "tokenizers", "numpy", "scipy", "scikit-learn", "pandas", "papermill",
            "hydra-core", "omegaconf", "datasets", "infini-gram", "pydivsufsort", "numba", "rouge-score", "dvc",
            "wandb")
DEBIAN_DATA = ("bible-kjv", "bible-kjv-text", "fortunes", "fortunes-min", "fortunes-de", "wordnet-base",
               "wordnet-sense-index")
_VOLATILE_NB_KEYS = ("duration", "start_time", "end_time", "environment_variables")
BF16_IF_FAST = "bfloat16_if_fast"


def portable(text: str, root: str) -> str:
    """``text`` with the checkout's absolute path made relative (``<root>/x`` → ``x``, ``<root>`` → ``.``)."""
    root = str(root).rstrip("/")
    return text.replace(root + "/", "").replace(root, ".")


def settle_notebook(nb_path: Path, root: str) -> None:
    """Strip the executed notebook of what differs between identical runs (see the module docstring); the
    stderr it held goes to ``run.log`` beside it."""
    if not nb_path.exists():
        return
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    for key in _VOLATILE_NB_KEYS:
        nb.get("metadata", {}).get("papermill", {}).pop(key, None)
    log = []
    for i, cell in enumerate(nb.get("cells", [])):
        if "id" in cell:  # papermill gives the injected parameters cell a random id: ids by position instead
            cell["id"] = f"cell-{i}"
        cell.get("metadata", {}).pop("execution", None)
        cell.get("metadata", {}).pop("papermill", None)
        kept = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                text = out.get("text", "")
                log.append(f"--- cell {i} ---\n" + ("".join(text) if isinstance(text, list) else text))
            else:
                kept.append(out)
        if "outputs" in cell:
            cell["outputs"] = kept
    text = json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    nb_path.write_text(portable(text, root), encoding="utf-8")
    if log:
        (nb_path.parent / "run.log").write_text(portable("".join(log), root), encoding="utf-8")


def required_dtypes(cfg: Mapping) -> dict[str, str]:
    """Weight dtype each model a run requires loads (:func:`memlab.model_use.required_model_setting`), with
    ``bfloat16_if_fast`` resolved on this machine (bfloat16 or float32): ``run.json`` records it."""
    out = {name: str(d) for name, d in required_model_setting(cfg, "dtype", "float32").items()}
    if any(d == BF16_IF_FAST for d in out.values()):
        from memlab.backends.hf import bf16_is_fast

        fast = "bfloat16" if bf16_is_fast() else "float32"
        out = {k: fast if d == BF16_IF_FAST else d for k, d in out.items()}
    return out


def _git(root: str, *args: str) -> str:
    try:
        r = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return r.stdout if r.returncode == 0 else ""


def checkout_state(root: str) -> dict:
    """The commit, whether the checkout differs from it, which files differ, and a hash of the difference."""
    commit = _git(root, "rev-parse", "HEAD").strip() or "unknown (not a git checkout)"
    changed = sorted(line[3:] for line in _git(root, "status", "--porcelain", "--untracked-files=no").splitlines())
    diff = _git(root, "diff", "HEAD", "--binary") if changed else ""
    return {"commit": commit, "dirty": bool(changed), "dirty_files": changed,
            "diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if changed else None}


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def debian_versions() -> dict[str, str]:
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", *DEBIAN_DATA],
                       capture_output=True, text=True)
    found = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    return {p: found.get(p, "not installed") for p in DEBIAN_DATA}


def model_hashes(cfg: Mapping, root: str, plan=None, asked: Mapping[str, dict] | None = None) -> dict[str, str]:
    """Each model the run used: the pipeline's own models by their content hash as ``dvc.lock`` records it; in a run
    with models under test (``models``, memlab.model_use) those models replace the experiment's pretrained defaults —
    each by name: its dvc.lock hash when it is a pipeline model, else ``sha256:<12 hex>`` of its weight files (a
    GGUF file or HF folder given by path), or ``served <model id> at <url> (<what the server reports>)`` (see
    :func:`_served_identity`) — beside the zoo checkpoints it requires. ``plan``: the run's
    :class:`memlab.runner.plan.RunPlan` (its models under test and required folders), else derived from ``cfg``;
    ``asked``: what each served model's server already reported for this run.json, by model name."""
    from memlab import yaml_text
    from memlab.model_use import required_models, target_nodes

    lock = Path(root) / "dvc.lock"
    outs: dict[str, str] = {}
    if lock.exists():
        for stage in (yaml_text.safe_load(lock.read_text()) or {}).get("stages", {}).values():
            outs.update({o["path"]: o.get("md5", "") for o in stage.get("outs") or []})
    if plan is not None:
        tested, required = list(plan.tested), list(plan.required)
    else:
        tested, required = target_nodes(cfg) if cfg.get("models") is not None else [], required_models(cfg)
    out = {}
    for path in required:
        rel = portable(str(path), root).rstrip("/")
        if tested and not rel.startswith("models/tiny-neox/"):
            continue  # a pretrained default: the models under test say what ran
        family = "/".join(rel.split("/")[:3]) if rel.startswith("models/tiny-neox/") else rel
        out[rel] = outs.get(family) or outs.get(rel) or "not in dvc.lock"
    for node in tested:
        out[node["name"]] = _model_identity(node, root, outs, (asked or {}).get(node["name"]))
    return out


def _model_identity(node: Mapping, root: str, outs: Mapping[str, str], ident: dict | None = None) -> str:
    from memlab.backends.registry import is_served

    if is_served(node):
        return _served_identity(node, ident)
    if not node.get("path"):
        return f"unknown: backend {node.get('backend')} reads no weights from a path"
    path = Path(str(node["path"]))
    rel = portable(str(path), root).rstrip("/")
    if rel in outs:
        return outs[rel]
    if not path.exists():
        return "not found"
    from memlab.backends.hf import weights_revision

    folder, gguf = (path.parent, path.name) if path.is_file() else (path, node.get("gguf_file"))
    return "sha256:" + weights_revision(folder, gguf)


def _served_identity(node: Mapping, ident: dict | None = None) -> str:
    """A served model as its server reports it when run.json is written: ``served <model id> at <url>``, then the
    user's revision and what the server names (the model id it lists, the file it serves and that file's sha256 when
    readable here, llama-server's size/parameters, vLLM's root), or that it names no weights; only the first part
    when the server does not answer. ``ident``: the server's report when already asked (else asked here)."""
    from memlab.backends.identity import names_weights, served_file

    head = f"served {node.get('model_id')} at {node.get('base_url')}"
    ident = _ask_server(node) if ident is None else ident
    served, server = ident.get("served") or {}, ident.get("server") or {}
    parts = [f"revision {node['revision']}"] if node.get("revision") else []
    if served.get("id") is not None:
        parts.append(f"server lists {served['id']}")
    digest = served.get("file_sha256") or server.get("model_sha256") or server.get("reported_model_sha256")
    if served_file(ident) and not digest:
        digest = "unknown (the file is not readable here)"
    for label, value in (("root", served.get("root")), ("file", served_file(ident)), ("file sha256", digest)):
        if value:
            parts.append(f"{label} {value}")
    meta = served.get("meta")
    if isinstance(meta, Mapping):
        parts.append("meta " + json.dumps(dict(meta), sort_keys=True))
    if (served or server) and not names_weights(ident):
        parts.append("the server names no weights")
    return f"{head} ({'; '.join(parts)})" if parts else head


def _ask_server(node: Mapping) -> dict:
    """What the server of a served model reports (:func:`memlab.backends.identity.served_identity`), {} when it
    does not answer."""
    import os

    from memlab.backends.identity import served_identity

    key = os.environ.get(str(node["api_key_env"])) if node.get("api_key_env") else None
    try:
        return served_identity(str(node.get("base_url")), str(node.get("model_id")), 5.0, key)
    except Exception:  # noqa: BLE001 (provenance must never fail a finished run)
        return {}


def _served_dtype(node: Mapping, ident: dict | None = None) -> str:
    """The weights' type a served model computes in, as far as its server shows it: the type in the header of the
    GGUF it names when that file is readable here (``Q4_1 (the served GGUF's file type)``), else "unknown
    (served)"; ``ident``: the server's report when already asked (else asked here)."""
    from memlab.backends.identity import served_file
    from memlab.runner.preflight import gguf_file_type

    path = served_file(_ask_server(node) if ident is None else ident)
    kind = gguf_file_type(Path(path)) if path else None
    return f"{kind} (the served GGUF's file type)" if kind else "unknown (served)"


def _served_nodes(cfg: Mapping, plan=None) -> list[Mapping]:
    """The served models a run tests (their kind is ``served``: :mod:`memlab.backends.registry`), from the run's
    plan when given."""
    if cfg.get("models") is None:
        return []
    from memlab.backends.registry import is_served
    from memlab.model_use import target_nodes

    return [n for n in (plan.tested if plan is not None else target_nodes(cfg)) if is_served(n)]


def write_run_json(out_dir: Path, cfg: Mapping, config_text: str, t0: float, plan=None) -> dict:
    """``run.json``: when the run started and how long it took, and its provenance (module docstring); the models,
    threads and dtypes from the run's plan (:class:`memlab.runner.plan.RunPlan`) when given, else derived from ``cfg``."""
    root = str(cfg["paths"]["root"])
    profile = numerics.load_profile(cfg["numerics"]["name"])
    if plan is not None:
        threads, dtypes = dict(plan.threads), dict(plan.dtypes)
    else:
        threads, dtypes = dict(required_threads(cfg)), required_dtypes(cfg)
    described, served = numerics.describe(profile), _served_nodes(cfg, plan)
    asked = {node["name"]: _ask_server(node) for node in served}   # each server asked once (a report hashes its file)
    for node in served:   # a server computes in its own dtype (Q4_1, ...) on its own threads: it says no thread
        threads[node["name"]], dtypes[node["name"]] = "unknown (served)", _served_dtype(node, asked[node["name"]])
    if served:            # nor on which kernels: never claim machine independence for a served model's numbers
        described["machine_independent"] = "unknown (served models)"
    info = {"started": datetime.fromtimestamp(t0, tz=timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(time.time() - t0, 1), "key": cfg["run"]["key"], "seed": cfg.get("seed"),
            **checkout_state(root), "config_sha256": hashlib.sha256(config_text.encode()).hexdigest(),
            "numerics": {**described, "threads": threads, "dtypes": dtypes},
            "packages": package_versions(), "debian": debian_versions(), "models": model_hashes(cfg, root, plan, asked)}
    (out_dir / "run.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    return info
