"""Benchmark of the model zoo (issue 2): build time per model and the kjv family's memorization.

``run(quick=False) -> dict`` (flat):

- ``build_<model>_s`` — wall seconds to build each model from scratch into a temporary folder
  (``python -m memlab.models.build --jobs 2``: the two GGUF conversions + every size of ``conf/zoo/kjv.yaml``),
  and ``build_total_s``. ``train_<size>_cpu_s`` = the CPU seconds of training (sum over epochs), which do not
  depend on how busy the machine is. Quick mode skips the rebuild and reads timings of the existing
  ``models/`` build.
- ``exact32_<size>_member`` / ``exact32_<size>_nonmember`` — exact 32-token greedy continuation rate of
  ``n_probes`` random 32-token prefixes at the last epoch (definition:
  :mod:`memlab.methods.memorization_curve`), members vs non-members.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _train_stats(model_dir: Path) -> dict:
    log = {}
    for line in (model_dir / "train_log.jsonl").read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            log[r["epoch"]] = r  # a resumed run may log an epoch twice: the last one counts
    return {"wall_s": round(sum(r["seconds"] for r in log.values()), 1),
            "cpu_s": round(sum(r.get("cpu_seconds", r["seconds"]) for r in log.values()), 1),
            "final_loss": round(log[max(log)]["loss"], 4)}


def run(quick: bool = False, n_probes: int = 50) -> dict:
    import torch

    torch.set_num_threads(1)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from memlab.methods.memorization_curve import family_curve
    from memlab.models.build import build
    from memlab.models.zoo import load_family

    out: dict = {}
    models = REPO / "models"
    tmp = None
    if not quick:  # time a from-scratch build in a temp folder (wheels/sdists come from the cache)
        tmp = Path(tempfile.mkdtemp(prefix="bench-zoo-"))
        models = tmp / "models"
        t0 = time.time()
        lines = build(str(REPO / "conf" / "zoo"), str(models), only=["smollm2-135m-instruct", "gemma-3-270m", "kjv"],
                      jobs=2)
        out["build_total_s"] = round(time.time() - t0, 1)
        for line in lines:
            name, secs = line.split()[0], [w for w in line.split() if w.endswith("s") and w[:-1].replace(".", "").isdigit()]
            if secs:
                out[f"build_{name.replace('/', '_')}_s"] = float(secs[0][:-1])
    else:
        build(str(REPO / "conf" / "zoo"), str(models), only=["kjv"], jobs=1, convert=False)
    fam = load_family("kjv", REPO / "conf" / "zoo", models)
    for size in fam.sizes:
        st = _train_stats(fam.model_dir(size))
        out[f"train_{size}_wall_s"], out[f"train_{size}_cpu_s"] = st["wall_s"], st["cpu_s"]
        out[f"train_{size}_final_loss"] = st["final_loss"]
        out[f"params_{size}"] = json.loads((fam.model_dir(size) / "done.json").read_text())["params"]
    model_cfg = {"backend": "hf", "gguf_file": None, "revision": "auto", "device": "cpu", "dtype": "float32",
                 "threads": 1, "batch_size": 50, "chat_template": "none"}
    df = family_curve(fam, model_cfg=model_cfg, cache_cfg=None, n_probes=n_probes, prefix_len=32, cont_len=32,
                      seed=0, epochs=[fam.epochs], progress=False)
    for r in df.itertuples():
        out[f"exact32_{r.size}_{r.split}"] = round(float(r.rate), 3)
    out["epochs"] = fam.epochs
    out["member_tokens_per_epoch"] = json.loads((fam.model_dir(fam.sizes[0]) / "done.json").read_text())["tokens_per_epoch"]
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


if __name__ == "__main__":
    import sys

    print(json.dumps(run(quick="--quick" in sys.argv), indent=1))
