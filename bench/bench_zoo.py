"""Benchmark of the model zoo (issue 2): build time per model and the kjv family's memorization.

``run(quick=False) -> dict`` (flat):

- ``build_<model>_s`` — wall seconds to build each model from scratch into a temporary folder
  (``python -m memlab.models.build --jobs 2``: the two GGUF conversions + every size of the memorization_curve
  experiment's family, ``conf/zoo/kjv.yaml``), and ``build_total_s``; ``train_<size>_final_loss`` and
  ``train_<size>_epochs`` from each size's train_log.jsonl (which keeps no times: it is a DVC output and must hash
  the same on every rerun). Quick mode trains the family's smallest size for 2 epochs into a temporary folder
  instead (``build_quick_s``).
- ``exact32_<size>_member`` / ``exact32_<size>_nonmember`` — exact 32-token greedy continuation rate of
  the experiment's ``n_probes`` (quick: 10) random prefixes at the last epoch (definition:
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
    """The final training loss from ``train_log.jsonl`` (it keeps losses only: a DVC output must hash the same on
    every rerun, so epoch times go to the console; the build's wall time is measured around it here)."""
    log = {}
    for line in (model_dir / "train_log.jsonl").read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            log[r["epoch"]] = r  # a resumed run may log an epoch twice: the last one counts
    return {"final_loss": round(log[max(log)]["loss"], 4), "epochs_logged": len(log)}


def _curve_setup(models_dir: Path):
    """The memorization_curve experiment as a run composes it: its typed params and a Catalog whose models live in
    ``models_dir`` (the run's model node is the checkpoints' template)."""
    from memlab.config import compose, to_plain
    from memlab.models.catalog import Catalog
    from memlab.schema import SCHEMA_KEY, schema_class, typed

    cfg = compose("memorization_curve", ["cache=null", "logger=null"])
    node = to_plain(cfg.params)
    params = typed(schema_class(node[SCHEMA_KEY], "params"), node, "params")
    return cfg, params, Catalog(cfg.model, None, {**to_plain(cfg.paths), "models": str(models_dir)})


def _quick_family(fam):
    """The family shrunk for a minute-scale check: its smallest size, 2 epochs (same data, tokenizer, recipe)."""
    import dataclasses

    from memlab.models.zoo import Family

    size = fam.sizes[0]
    recipe = dataclasses.replace(fam.recipe, sizes={size: fam.shapes[size]},
                                 train=dataclasses.replace(fam.recipe.train, epochs=2))
    return Family(name=fam.name, recipe=recipe, models_dir=fam.models_dir, zoo_dir=fam.zoo_dir)


def run(quick: bool = False) -> dict:
    """Full: time a from-scratch build of the two conversions and the curve family in a temp folder, then its
    curve at the last epoch. Quick: the curve family shrunk by :func:`_quick_family`, built in a temp folder."""
    import torch

    torch.set_num_threads(1)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from memlab.methods.memorization_curve import family_curve
    from memlab.models.build import build

    out: dict = {}
    tmp = Path(tempfile.mkdtemp(prefix="bench-zoo-"))
    try:
        cfg, p, catalog = _curve_setup(tmp / "models")
        fam = catalog.family(p.family)
        t0 = time.time()
        if quick:
            fam = _quick_family(fam)
            fam.build(fam.sizes[0], progress=False)
            out["build_quick_s"] = round(time.time() - t0, 1)
        else:  # wheels/sdists come from the cache
            lines = build(catalog.paths["zoo"], catalog.paths["models"],
                          only=["smollm2-135m-instruct", "gemma-3-270m", p.family], jobs=2)
            out["build_total_s"] = round(time.time() - t0, 1)
            for line in lines:
                name, secs = line.split()[0], [w for w in line.split() if w.endswith("s") and w[:-1].replace(".", "").isdigit()]
                if secs:
                    out[f"build_{name.replace('/', '_')}_s"] = float(secs[0][:-1])
        for size in fam.sizes:
            st = _train_stats(fam.model_dir(size))
            out[f"train_{size}_final_loss"], out[f"train_{size}_epochs"] = st["final_loss"], st["epochs_logged"]
            out[f"params_{size}"] = json.loads((fam.model_dir(size) / "done.json").read_text())["params"]
        df = family_curve(fam, open_backend=catalog.open, n_probes=10 if quick else p.n_probes,
                          prefix_len=p.prefix_len, cont_len=p.cont_len, seed=int(cfg.seed), sizes=None,
                          epochs=[fam.epochs], epoch_every=p.epoch_every, template=catalog.template, progress=False)
        for r in df.itertuples():
            out[f"exact{p.cont_len}_{r.size}_{r.split}"] = round(float(r.rate), 3)
        out["epochs"] = fam.epochs
        out["member_tokens_per_epoch"] = json.loads((fam.model_dir(fam.sizes[0]) / "done.json").read_text())["tokens_per_epoch"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


if __name__ == "__main__":
    import sys

    print(json.dumps(run(quick="--quick" in sys.argv), indent=1))
