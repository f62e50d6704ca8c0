"""Benchmark of the HF backend (issue 2): batched vs one-at-a-time greedy generation.

``run(quick=False) -> dict``: the same prompts generated (a) one request per ``generate`` call and (b) all in
one call (batches of ``len(prompts)``, left padding). Reports completion tokens/s for each, the ratio
batched/single, and whether the greedy outputs (token ids) are identical. Model: SmolLM2-135M-Instruct from
``models/smollm2-135m-instruct/`` (built by the zoo stage); if absent, the first tiny GPT-NeoX found under
``models/tiny-neox/`` or the test micro model under ``.cache/test-models/`` — ``model`` in the result says
which. One torch thread (what the machine has to spare).

``batch_sizes`` (the pretrained models under ``models/``, each if built): 32 PEARL-sized prompts (120 words of an
installed licence text each) × 16 new tokens, generated in rows of 8 and then of 32, side by side — seconds per
prompt for each, their ratio, and whether the greedy outputs agree (each model at its configured ``dtype``). This
is what sets Gemma's ``batch_size``.

``dtypes`` (the same models, each if built): the weights in float32 and in bfloat16, side by side — the same 32
prompts × 16 new tokens at the model's configured rows, and 16 of them scored; seconds per prompt and per text,
speed ratios, greedy outputs identical (count), mean |Δ log-prob| per token and the largest |Δ| of a text's mean
log-prob (bf16 vs fp32), and whether a second bf16 pass gives identical token ids and log-probs (determinism).
This is what sets the pretrained models' ``dtype`` (bf16 matrix units: AMX on this CPU).

``kv_cache`` (a PEARL zoo model, pearl/m if built, else the first tiny GPT-NeoX): 64 distinct prompts (200 words of
licence text each) × 128 greedy new tokens in one batch, decoded with transformers' DynamicCache, which grows by
concatenation (what generation used before), and with the in-place cache (``memlab.backends.hf_kv``), alternating;
median seconds of each, their ratio, and whether the tokens are identical (they must be).

``score_stats_memory``: Min-K%++'s per-position vocabulary statistics for one 512-token text at Gemma-3's 262k
vocabulary, computed ``hf.STATS_ROWS`` positions at a time (what scoring does) and in one pass, each in a fresh
process: the extra peak RSS and seconds of each, side by side, and the log-probs alone (``vocab=False``: a reference
model's loss). Measured here under a test run's load: steps 823 MB / 9.1 s, one pass 6,279 MB / 24.8 s, log-probs
alone 388 MB / 2.4 s.

``quick``: every section on the test suite's micro GPT-NeoX with fewer prompts, one output-layer shape — the code
paths in seconds, not numbers to compare.
"""

from __future__ import annotations

import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PRETRAINED = ("smollm2-135m-instruct", "gemma-3-270m")  # conf/model names of the converted pretrained models

# Our own short prompts of different lengths (so batching needs padding).
PROMPTS = [
    "The printing press changed how ideas travelled because",
    "Write one sentence about rivers.",
    "A good scientific experiment needs",
    "In the small harbour town, every morning the fishermen would gather near the old lighthouse and",
    "Three facts about the moon:",
    "The recipe for bread begins with flour, water, salt and",
    "Once upon a time",
    "Explain in simple words why the sky looks blue during the day and red at sunset:",
]


def _catalog():
    """The models as every run names them: ``conf/model/<name>.yaml`` composed against this checkout's paths."""
    from memlab.config import compose, to_plain
    from memlab.models.catalog import Catalog

    cfg = compose(overrides=["cache=null", "logger=null"])
    return Catalog(cfg.model, None, to_plain(cfg.paths))


def _built(name: str) -> bool:
    return (Path(_catalog().named_cfg(name)["path"]) / "config.json").is_file()


def _pick_model() -> tuple[str, dict]:
    """SmolLM2 if built, else the first tiny GPT-NeoX or test micro model found, as a node of the run's model
    template (``conf/model/tiny-neox.yaml``) pointed at it."""
    catalog = _catalog()
    if _built(PRETRAINED[0]):
        return PRETRAINED[0], catalog.named_cfg(PRETRAINED[0])
    tiny = sorted(p.parent for p in (Path(catalog.paths["models"]) / "tiny-neox").glob("*/*/final/config.json"))
    micro = sorted((REPO / ".cache" / "test-models").glob("*/final/config.json"))
    for name, path in [(f"tiny-neox/{t.parent.name}/{t.name}", t / "final") for t in tiny] + \
                      [(f"micro-neox (test model {m.parent.parent.name})", m.parent) for m in micro]:
        return name, {**catalog.template, "name": name, "path": str(path), "revision": "auto"}
    raise FileNotFoundError("no model for the backend benchmark: run `make models` (or `make test` once)")


def _micro() -> tuple[str, dict]:
    """The test suite's micro GPT-NeoX (trained in seconds, cached) as a node of the run's model template."""
    import sys

    sys.path.insert(0, str(REPO / "tests"))
    from conftest import build_micro_family

    fam = build_micro_family()
    return fam.model_cfg["name"], {**_catalog().template, **fam.model_cfg, "chat_template": "none"}


def _models(quick: bool) -> list[tuple[str, dict | str]]:
    """(name, model node) of the models the batch-size and dtype sections compare: the pretrained ones (a note when
    one is not built); quick: the micro model only (the code paths, in seconds)."""
    if quick:
        return [_micro()]
    return [(name, _model_cfg(name) if _built(name) else "not built (make models)") for name in PRETRAINED]


def _licence_prompts(n: int, words: int) -> list[str]:
    text = " ".join(p.read_text(errors="replace") for p in sorted(Path("/usr/share/common-licenses").glob("*"))
                    if p.is_file())
    ws = text.split()
    return [" ".join(ws[i * words:(i + 1) * words]) for i in range(n)]


def _batch_sizes(quick: bool) -> dict:
    from memlab.backends.base import GenerationRequest
    from memlab.backends.factory import build_backend

    n, rows = (8, (4, 8)) if quick else (32, (8, 32))
    prompts = _licence_prompts(n, 120)
    out: dict = {}
    for name, node in _models(quick):
        if isinstance(node, str):
            out[name] = node
            continue
        res: dict = {"n_prompts": n, "max_new_tokens": 16, "dtype": node["dtype"]}
        texts = {}
        for b in rows:
            backend = build_backend({**node, "threads": 1, "batch_size": b})
            backend.generate([GenerationRequest(prompt="Hello", max_new_tokens=2)])  # warm-up
            t0 = time.perf_counter()
            gens = backend.generate([GenerationRequest(prompt=p, max_new_tokens=16) for p in prompts])
            res[f"rows{b}_s_per_prompt"] = round((time.perf_counter() - t0) / n, 3)
            texts[b] = [g.samples[0].token_ids for g in gens]
            del backend
        lo, hi = rows
        res[f"rows{hi}_over_rows{lo}_speed"] = round(res[f"rows{lo}_s_per_prompt"] / res[f"rows{hi}_s_per_prompt"], 2)
        res["greedy_outputs_identical_count"] = sum(a == b for a, b in zip(texts[lo], texts[hi]))
        out[name] = res
    return out


def _model_cfg(name: str) -> dict:
    """The model's own config (``conf/model/<name>.yaml``, composed as a run does), plain prompts."""
    return {**_catalog().named_cfg(name), "chat_template": "none"}


def _dtypes(quick: bool) -> dict:
    import math

    from memlab.backends.base import GenerationRequest
    from memlab.backends.factory import build_backend

    n = 4 if quick else 32
    prompts = _licence_prompts(n, 120)
    reqs = [GenerationRequest(prompt=p, max_new_tokens=16) for p in prompts]
    texts = prompts[: n // 2]
    out: dict = {}
    for name, node in _models(quick):
        if isinstance(node, str):
            out[name] = node
            continue
        res: dict = {"n_prompts": n, "max_new_tokens": 16, "n_scored": len(texts)}
        got = {}
        for dtype in ("float32", "bfloat16", "bfloat16"):
            backend = build_backend({**node, "dtype": dtype, "threads": 1})
            backend.generate([GenerationRequest(prompt="Hello", max_new_tokens=2)])  # warm-up
            t0 = time.perf_counter()
            ids = [g.samples[0].token_ids for g in backend.generate(reqs)]
            gen_s = (time.perf_counter() - t0) / n
            t0 = time.perf_counter()
            lps = [s.logprobs[1:] for s in backend.score(texts)]
            score_s = (time.perf_counter() - t0) / len(texts)
            if dtype in got:  # the second bf16 pass: determinism only
                res["bfloat16_rerun_identical"] = (ids, lps) == got[dtype]
            else:
                got[dtype] = (ids, lps)
                res[f"{dtype}_s_per_prompt"], res[f"{dtype}_score_s_per_text"] = round(gen_s, 3), round(score_s, 3)
            del backend
        res["bfloat16_generate_speed"] = round(res["float32_s_per_prompt"] / res["bfloat16_s_per_prompt"], 2)
        res["bfloat16_score_speed"] = round(res["float32_score_s_per_text"] / res["bfloat16_score_s_per_text"], 2)
        (ids32, lp32), (ids16, lp16) = got["float32"], got["bfloat16"]
        res["greedy_outputs_identical_count"] = sum(a == b for a, b in zip(ids32, ids16))
        diffs = [abs(a - b) for x, y in zip(lp32, lp16) for a, b in zip(x, y)]
        res["mean_abs_logprob_diff_per_token"] = round(sum(diffs) / len(diffs), 4)
        res["max_abs_mean_logprob_diff_per_text"] = round(max(abs(math.fsum(x) / len(x) - math.fsum(y) / len(y))
                                                              for x, y in zip(lp32, lp16)), 4)
        out[name] = res
    return out


def run(quick: bool = False, model_path: str | None = None) -> dict:
    """``model_path`` (a folder or .gguf file) overrides the automatic choice."""
    import torch

    from memlab.backends.base import GenerationRequest
    from memlab.backends.factory import build_backend

    torch.set_num_threads(1)
    if model_path:  # the run's model template (conf/model/tiny-neox.yaml) pointed at the given weights
        name, node = Path(model_path).name, {**_catalog().template, "path": model_path, "revision": "auto"}
    else:
        name, node = _micro() if quick else _pick_model()
    prompts = PROMPTS[:4] if quick else PROMPTS
    max_new = 16 if quick else 32
    cfg = {**node, "name": name, "dtype": "float32", "threads": 1, "batch_size": len(prompts)}
    t0 = time.perf_counter()
    backend = build_backend(cfg)
    load_s = time.perf_counter() - t0
    reqs = [GenerationRequest(prompt=p, max_new_tokens=max_new) for p in prompts]
    backend.generate([GenerationRequest(prompt="Hello", max_new_tokens=2)])  # warm-up (lazy init)

    t0 = time.perf_counter()
    single = [backend.generate([r])[0] for r in reqs]
    single_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    batched = backend.generate(reqs)
    batched_s = time.perf_counter() - t0

    single_tok = sum(g.completion_tokens for g in single)
    batched_tok = sum(g.completion_tokens for g in batched)
    same = [a.samples[0].token_ids == b.samples[0].token_ids for a, b in zip(single, batched)]
    return {
        "model": name,
        "n_prompts": len(prompts),
        "max_new_tokens": max_new,
        "threads": 1,
        "load_s": round(load_s, 2),
        "single_s": round(single_s, 3),
        "batched_s": round(batched_s, 3),
        "single_tokens": single_tok,
        "batched_tokens": batched_tok,
        "single_tok_per_s": round(single_tok / single_s, 2),
        "batched_tok_per_s": round(batched_tok / batched_s, 2),
        "batched_over_single_throughput": round((batched_tok / batched_s) / (single_tok / single_s), 2),
        "greedy_outputs_identical": all(same),
        "greedy_outputs_identical_count": sum(same),
        "batch_sizes": {} if model_path else _batch_sizes(quick),
        "dtypes": {} if model_path else _dtypes(quick),
        "output_layer": _output_layer(quick),
        "kv_cache": {} if model_path else _kv_cache(quick),
        "score_stats_memory": _score_stats_memory(quick),
    }


_STATS_CHILD = """
import resource, sys, time, torch
from memlab.backends import hf
rows, vocab, step, stats = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
g = torch.Generator().manual_seed(0)
logits, targets = torch.randn(rows, vocab, generator=g), torch.randint(0, vocab, (rows,), generator=g)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
hf.STATS_ROWS = step
t0 = time.perf_counter()
hf.position_stats(logits, targets, stats)
print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.perf_counter() - t0)
"""


def _score_stats_memory(quick: bool) -> dict:
    """Min-K%++'s vocabulary statistics (``hf.position_stats``) for one text of Gemma-3's size (512 positions × 262,144
    tokens; quick: 200 × 8,192), in steps of ``hf.STATS_ROWS`` positions and in one pass over all positions, each in a
    fresh process: peak RSS above what the logits already take (MB), seconds, and their ratios; and the log-probs
    alone (``vocab=False``, a reference model's loss) in the same steps."""
    import subprocess
    import sys

    from memlab.backends import hf

    rows, vocab = (200, 8192) if quick else (512, 262_144)
    out = {"positions": rows, "vocabulary": vocab, "step": hf.STATS_ROWS}
    for name, step, stats in (("steps", hf.STATS_ROWS, 1), ("one_pass", rows, 1), ("loss_only", hf.STATS_ROWS, 0)):
        r = subprocess.run([sys.executable, "-c", _STATS_CHILD, str(rows), str(vocab), str(step), str(stats)],
                           capture_output=True, text=True, check=True, env={**__import__("os").environ,
                                                                             "OMP_NUM_THREADS": "1"})
        before, peak, seconds = r.stdout.split()
        out[f"{name}_extra_peak_mb"] = round((int(peak) - int(before)) / 1024, 1)
        out[f"{name}_s"] = round(float(seconds), 3)
    out["one_pass_over_steps_extra_peak"] = round(out["one_pass_extra_peak_mb"] / max(out["steps_extra_peak_mb"], 0.1), 2)
    out["one_pass_over_steps_s"] = round(out["one_pass_s"] / out["steps_s"], 2)
    out["steps_over_loss_only_s"] = round(out["steps_s"] / out["loss_only_s"], 2)
    return out


def _zoo_model() -> tuple[str, dict]:
    """pearl/m of the zoo if built, else any built tiny GPT-NeoX, else the test micro model."""
    catalog = _catalog()
    built = sorted(p.parent for p in (Path(catalog.paths["models"]) / "tiny-neox").glob("*/*/final/config.json"))
    for t in sorted(built, key=lambda t: (t.parent.parent.name, t.parent.name) != ("pearl", "m")):
        name = f"tiny-neox/{t.parent.parent.name}/{t.parent.name}"
        return name, {**catalog.template, "name": name, "path": str(t), "revision": "auto"}
    return _micro()


def _kv_cache(quick: bool) -> dict:
    """The growing DynamicCache vs the in-place cache on one batch of distinct prompts (module doc)."""
    import statistics

    from transformers import DynamicCache

    from memlab.backends import hf
    from memlab.backends.base import GenerationRequest
    from memlab.backends.factory import build_backend

    rows, words, new, repeats = (8, 40, 16, 2) if quick else (64, 200, 128, 3)
    name, node = _micro() if quick else _zoo_model()
    backend = build_backend({**node, "threads": 1, "batch_size": rows, "kv_cache": "dynamic", "dtype": "float32"})
    reqs = [GenerationRequest(prompt=p, max_new_tokens=new) for p in _licence_prompts(rows, words)]
    factories = {"growing": lambda n_layers, capacity: DynamicCache(config=backend.model.config),
                 "in_place": hf.PreallocatedCache}
    times: dict[str, list[float]] = {mode: [] for mode in factories}
    tokens: dict[str, list] = {}
    try:
        for _ in range(repeats):
            for mode, factory in factories.items():
                hf.PreallocatedCache = factory
                t0 = time.perf_counter()
                tokens[mode] = [g.samples[0].token_ids for g in backend.generate(reqs)]
                times[mode].append(time.perf_counter() - t0)
    finally:
        hf.PreallocatedCache = factories["in_place"]
    growing, in_place = statistics.median(times["growing"]), statistics.median(times["in_place"])
    return {"model": name, "rows": rows, "prompt_tokens": len(backend.prompt_ids(reqs[0])), "max_new_tokens": new,
            "growing_s": round(growing, 2), "in_place_s": round(in_place, 2),
            "in_place_speed": round(growing / in_place, 2),
            "tokens_identical": tokens["growing"] == tokens["in_place"]}


def _output_layer(quick: bool) -> dict:
    """A wide output layer as the backend computes it for few rows (weight @ rows.T, :func:`memlab.backends.hf.
    _transposed_output_layer`) vs the plain rows @ weight.T, random float32 weights of Gemma-3's and SmolLM2's
    shapes, one thread, the two alternating; medians in ms."""
    import statistics

    import torch
    import torch.nn.functional as F

    out = {}
    shapes = {"gemma3_262144x640": (262144, 640), "smollm2_49152x576": (49152, 576)}
    for label, (words, hidden) in list(shapes.items())[-1:] if quick else shapes.items():
        weight = torch.randn(words, hidden)
        for rows in (1, 8) if quick else (1, 8, 32):
            x = torch.randn(rows, hidden)
            times: dict[str, list[float]] = {"plain": [], "transposed": []}
            for _ in range(3 if quick else 7):
                for mode, f in (("plain", lambda: F.linear(x, weight)),
                                ("transposed", lambda: torch.mm(weight, x.T).T.contiguous())):
                    t0 = time.perf_counter()
                    f()
                    times[mode].append(time.perf_counter() - t0)
            plain, transposed = statistics.median(times["plain"]), statistics.median(times["transposed"])
            out[f"{label}_rows{rows}"] = {"plain_ms": round(plain * 1e3, 1), "transposed_ms": round(transposed * 1e3, 1),
                                          "transposed_over_plain": round(transposed / plain, 3)}
    return out


if __name__ == "__main__":
    import json
    import sys

    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    print(json.dumps(run(quick="--quick" in sys.argv, model_path=paths[0] if paths else None), indent=1))
