"""Benchmark: one PEARL run batched vs one prompt at a time, on the same inputs (issue 5, item 6).

Model: the final checkpoint of the tiny GPT-NeoX zoo family ``pearl`` (size m) when it is built, else the
test suite's micro model (trained in seconds, cached). The same documents and PEARL config are run twice
through an uncached HF backend: ``batch_size`` = 32 (batched) and 1 (one prompt at a time). Reported: wall
times, the speed-up ratio, generated samples per second, and the share of outputs that are identical —
greedy decoding (temperature 0) must give identical outputs; sampled decoding should too, since sample j is a
pure function of (model, request, seed, j), up to float rounding of padded attention. Then the shared-prefix
prefill against the padded one on a pretrained model (:func:`shared_prefill`). ``quick``: everything on the micro
model, fewer documents and samples, one round — the code paths in seconds, not numbers to compare.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]


def _micro():
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import build_micro_family  # the shared test fixture's builder, usable outside pytest

    return build_micro_family()


def _model_and_docs(n_docs: int, quick: bool):
    from memlab.errors import MemlabError
    from memlab.data.sampling import sample_docs
    from memlab.models.zoo import load_family

    try:
        if quick:  # the micro model: the code paths in seconds
            raise MemlabError("quick")
        fam = load_family("pearl", REPO / "conf" / "zoo", REPO / "models")
        # fam.final raises when the checkpoint is missing (is_built() compares path-dependent fingerprints)
        fam.final("m")
        docs = sample_docs(fam.members, n_docs // 2, 0) + sample_docs(fam.nonmembers, n_docs - n_docs // 2, 0)
        return fam.model_cfg("m"), docs, "tiny-neox/pearl/m"
    except MemlabError:  # not built: fall back to the test suite's micro model
        pass
    mf = _micro()
    docs = (mf.members + mf.nonmembers)[:n_docs]
    return mf.model_cfg, docs, "micro (tests fixture)"


def _run(model_cfg: dict, batch_size: int, docs, cfg):
    from memlab.backends.factory import build_backend
    from memlab.methods.pearl.engine import run_pearl

    backend = build_backend({**model_cfg, "batch_size": batch_size, "threads": 1}, None)
    t0 = time.perf_counter()
    res = run_pearl(backend, docs, cfg, keep_outputs=True)
    return time.perf_counter() - t0, res


def _identical(a, b) -> float:
    pairs = [(x, y) for ra, rb in zip(a, b) for la, lb in zip(ra.outputs, rb.outputs) for x, y in zip(la, lb)]
    return sum(x == y for x, y in pairs) / len(pairs)


def run(quick: bool = False) -> dict:
    import torch

    from memlab.schema import method_config

    torch.set_num_threads(1)
    n_docs = 4 if quick else 8
    model_cfg, docs, model_name = _model_and_docs(n_docs, quick)
    base = ["method.task.max_input_words=60", "method.task.max_new_tokens=16"]
    out: dict = {"model": model_name, "n_docs": len(docs)}
    for mode, extra in (("greedy", ["method.samples=1", "method.temperature=0.0"]),
                        ("sampled", [f"method.samples={2 if quick else 4}", "method.temperature=0.7"])):
        cfg = method_config("pearl", [*base, *extra])
        t_batched, r_batched = _run(model_cfg, 32, docs, cfg)
        t_single, r_single = _run(model_cfg, 1, docs, cfg)
        out["levels"] = len(cfg.perturbation.levels)
        n_samples = len(docs) * len(cfg.perturbation.levels) * cfg.samples
        out.update({
            f"{mode}_samples": n_samples,
            f"{mode}_batched_s": round(t_batched, 3),
            f"{mode}_one_at_a_time_s": round(t_single, 3),
            f"{mode}_speedup": round(t_single / t_batched, 3),
            f"{mode}_batched_samples_per_s": round(n_samples / t_batched, 2),
            f"{mode}_identical_outputs": _identical(r_batched, r_single),
            f"{mode}_identical_sensitivity": all(abs(a.sensitivity - b.sensitivity) < 1e-12
                                                 for a, b in zip(r_batched, r_single)),
        })
    out.update(shared_prefill(quick))
    out.update(kv_caches(quick))
    return out


def kv_caches(quick: bool) -> dict:
    """The zoo's default decoding shape — PEARL as conf/method/pearl.yaml runs it (whole documents, i = 10 samples
    per level, 128 new tokens) — with ``kv_cache: grouped`` (rows sharing a prompt share its keys and values; the
    zoo's setting) against ``static`` (one padded copy per row; the setting before it), side by side in one
    process, alternating, two rounds, best of each. ``quick``: the micro model, one document, one round."""
    from memlab.schema import method_config

    model_cfg, docs, model_name = _model_and_docs(2, quick)
    docs = docs[:1] if quick else docs
    cfg = method_config("pearl", ["method.task.max_new_tokens=16"] if quick else [])
    times: dict[str, list[float]] = {"grouped": [], "static": []}
    outputs: dict[str, list] = {}
    for _ in range(1 if quick else 2):
        for kv in times:
            t, res = _run({**model_cfg, "kv_cache": kv}, 64, docs, cfg)
            times[kv].append(t)
            outputs.setdefault(kv, res)
    best = {kv: min(t) for kv, t in times.items()}
    rows = len(docs) * len(cfg.perturbation.levels) * cfg.samples
    return {"kv_model": model_name, "kv_docs": len(docs), "kv_sampled_rows": rows,
            "kv_grouped_s": round(best["grouped"], 2), "kv_static_s": round(best["static"], 2),
            "kv_static_over_grouped": round(best["static"] / best["grouped"], 3),
            "kv_identical_outputs": _identical(outputs["grouped"], outputs["static"])}


def shared_prefill(quick: bool) -> dict:
    """pearl_wild's shape — SmolLM2-135M-Instruct in its chat template, first 64 words, completion and
    summarization, 16 new tokens, i = 1 — with
    each row's prefill starting from the longest prefix it shares with its batch (the default) and with the padded
    batch prefilled whole, side by side in one process, alternating (two rounds). Skipped when the model is not
    built (`make models`)."""
    from memlab.backends.factory import build_backend
    from memlab.backends.hf import HFBackend
    from memlab.data.corpora import load_corpus
    from memlab.data.sampling import sample_docs
    from memlab.methods.pearl.engine import run_pearl
    from memlab.schema import method_config

    from memlab.config import compose, to_plain
    from memlab.models.catalog import Catalog

    if quick:  # the micro model in plain prompts: the code path, not the numbers
        model, style, node = "micro (tests fixture)", "raw", _micro().model_cfg
    else:
        model, style = "smollm2-135m-instruct (float32, chat)", "chat"
        node = Catalog(None, None, to_plain(compose(overrides=["cache=null"]).paths)).named_cfg("smollm2-135m-instruct")
        if not (Path(node["path"]) / "config.json").is_file():
            return {"prefill_skipped": "smollm2-135m-instruct is not built (make models)"}
    docs = sample_docs([d for d in load_corpus("kjv", unit="chapter") if len(d.text.split()) >= 64],
                       2 if quick else 6, 0)
    cfgs = [method_config("pearl", ["method.task.max_input_words=64", "method.task.max_new_tokens=16",
                                    "method.samples=1", "method.verbatim_words=0", f"method.task.style={style}",
                                    f"method.task.name=text_{task}"]) for task in ("completion", "summarization")]
    backend = build_backend({**node, "dtype": "float32"}, None)  # conf/model's batch size and threads
    shared = HFBackend._shared_prefill
    times: dict[str, list[float]] = {"shared": [], "padded": []}
    outputs: dict[str, list] = {}
    try:
        for _ in range(1 if quick else 2):
            for mode in ("shared", "padded"):
                HFBackend._shared_prefill = shared if mode == "shared" else (lambda self, prompts, width, max_new: None)
                t0 = time.perf_counter()
                res = [r for cfg in cfgs for r in run_pearl(backend, docs, cfg, keep_outputs=True)]
                times[mode].append(time.perf_counter() - t0)
                outputs.setdefault(mode, res)
    finally:
        HFBackend._shared_prefill = shared
    best = {mode: min(t) for mode, t in times.items()}
    return {"prefill_model": model, "prefill_docs": len(docs),
            "prefill_shared_s": round(best["shared"], 2), "prefill_padded_s": round(best["padded"], 2),
            "prefill_shared_over_padded": round(best["shared"] / best["padded"], 3),
            "prefill_identical_outputs": _identical(outputs["shared"], outputs["padded"])}


if __name__ == "__main__":
    import json

    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
