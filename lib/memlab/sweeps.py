"""Sweeps as results: after ``python -m memlab.run -m experiment=<e> a=1,2,3 …``, one summary of every point.

Each point of a sweep is its own run folder (``results/<e>/<run-key>/``, :func:`memlab.keys.run_key`). This module
expands the command line's overrides the way Hydra's basic sweeper does, finds every point's folder and writes
``results/<e>/sweeps/<sweep-id>/``:

* ``sweep.csv`` — one row per point: its run key, the swept keys' values, whether it ran, every numeric metric
  of its ``metrics.json`` and, per claim of its ``tables/comparison.csv``, our value, its interval and the verdict;
* ``sweep.png`` — each claim whose value varies (with its 95 % interval), then each other metric that varies, vs
  the first swept key, one line per combination of the other swept keys (at most ``MAX_PANELS`` panels); when
  nothing varies, no figure but a sentence saying so;
* ``sweep.json`` — what was swept, the command, the number of points and of missing ones, the figure's caption.

A swept key that changed no byte of any point's ``metrics.json`` is one warning naming the tables it did change
(:mod:`memlab.sweep_effects`).

The report site (:mod:`memlab.site.sweep_pages`) shows every sweep present.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

from memlab.errors import MemlabError
from memlab.keys import NON_RESULT_KEYS, expand, experiment_of, run_key

MAX_PANELS = 6  # panels of the sweep figure (varying claims first, then varying metrics): more would not be read


def sweep_id(overrides: list[str]) -> str:
    """A folder name for the sweep from the overrides that can change a result (as the run key keeps them: no
    experiment, paths, logger, cache or hydra), shortened with a hash when long."""
    kept = sorted(o for o in overrides
                  if not o.startswith("-") and o.lstrip("+~").split("=", 1)[0].split(".", 1)[0].split("/", 1)[0]
                  not in NON_RESULT_KEYS)
    text = re.sub(r"[^A-Za-z0-9=,._+\-\[\]]", "_", ";".join(kept).replace(";", "__")) or "sweep"
    if len(text) > 100:
        text = f"{text[:80]}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    return text


def point_row(folder: Path, key: str, values: dict[str, str]) -> dict:
    """One table row: the point's key and swept values, then its metrics and claims (when it ran)."""
    import pandas as pd

    row = {"run_key": key, **values, "ran": (folder / "metrics.json").exists()}
    if not row["ran"]:
        return row
    metrics = json.loads((folder / "metrics.json").read_text())
    row.update({k: v for k, v in sorted(metrics.items())
                if isinstance(v, (int, float)) and not isinstance(v, bool)})
    cmp = folder / "tables" / "comparison.csv"
    if cmp.exists():
        for c in pd.read_csv(cmp, dtype=str, keep_default_na=False).to_dict("records"):
            for col in ("our_value", "ci_low", "ci_high", "verdict"):
                row[f"{c['claim_id']}/{col}"] = c.get(col, "")
    return row


def summarize(results: Path, experiment: str, overrides: list[str], idle: list[str] | None = None) -> Path:
    """Write the sweep summary of ``experiment`` for the command-line ``overrides``; returns its folder. ``idle``:
    the lines naming swept keys that changed no metric (:mod:`memlab.sweep_effects`), kept in sweep.json."""
    import pandas as pd

    swept, points = expand(overrides)
    rows = []
    for point in points:
        if experiment_of(point) not in (None, experiment):
            continue
        values = {k: v.split("=", 1)[1] for k, v in ((o.split("=", 1)[0], o) for o in point) if k in swept}
        key = run_key(point)
        rows.append(point_row(results / experiment / key, key, values))
    out = results / experiment / "sweeps" / sweep_id(overrides)
    out.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(rows)
    table.to_csv(out / "sweep.csv", index=False)
    keys = [k for k in swept if k != "experiment"]
    caption, why = figure(table, keys, out / "sweep.png")
    meta = {"experiment": experiment, "swept": {k: swept[k] for k in keys}, "points": len(rows),
            "missing": int((~table["ran"]).sum()) if len(table) else 0, "caption": caption,
            "command": "python -m memlab.run -m " + " ".join(overrides)}
    if why:
        meta["degenerate"] = why
    if idle:  # the site shows it beside the sweep, not only the console
        meta["idle"] = list(idle)
    (out / "sweep.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return out


def log_wandb(logger: dict, experiment: str, folder: Path) -> None:
    """Log a sweep summary to W&B as one run of job type ``sweep`` in the experiment's group (where its points'
    runs are): the swept keys as config, ``sweep.csv`` as a table, ``sweep.png`` as an image."""
    import os

    import pandas as pd
    import wandb

    meta = json.loads((folder / "sweep.json").read_text())
    os.environ.setdefault("WANDB_SILENT", "true")
    run = wandb.init(project=logger["project"], entity=logger["entity"], mode=logger["mode"], dir=logger["dir"],
                     group=experiment, job_type="sweep", name=f"{experiment}/sweeps/{folder.name}",
                     config={"swept": meta["swept"], "command": meta["command"]}, reinit="finish_previous")
    try:
        run.log({"sweep/table": wandb.Table(dataframe=pd.read_csv(folder / "sweep.csv"))})
        if (folder / "sweep.png").exists():
            run.log({"sweep/figure": wandb.Image(str(folder / "sweep.png"), caption=meta["caption"])})
        run.summary.update({"points": meta["points"], "missing": meta["missing"]})
    finally:
        run.finish()


def _series(table, keys: list[str], ys: list[str]):
    """(panel name, [(label, x, y, low, high)]) per y column: x the first swept key, one series per other key set."""
    import pandas as pd

    x_key, others = keys[0], keys[1:]
    ran = table[table["ran"]].copy()
    x = pd.to_numeric(ran[x_key], errors="coerce")
    ran["_x"] = x if x.notna().all() else ran[x_key].map({v: i for i, v in enumerate(dict.fromkeys(ran[x_key]))})
    groups = ran.groupby(others, sort=False) if others else [((), ran)]
    panels = []
    for y in ys:
        series = []
        for label, g in groups:
            g = g.sort_values("_x")
            label = ", ".join(f"{k}={v}" for k, v in zip(others, label if isinstance(label, tuple) else (label,)))
            stem = y.removesuffix("/our_value")
            low, high = (pd.to_numeric(g.get(f"{stem}/{c}"), errors="coerce") if f"{stem}/{c}" in g else None
                         for c in ("ci_low", "ci_high"))
            series.append((label, g["_x"], pd.to_numeric(g[y], errors="coerce"), low, high))
        panels.append((y, series))
    return panels, ran


def _y_columns(table, keys: list[str]) -> list[str]:
    """The columns worth a panel: every claim whose value varies across the points, then every other metric that
    varies (a claim that stays put is a flat line; the metrics a swept threshold moves are what the reader wants)."""
    import pandas as pd

    skip = {"run_key", "ran", *keys}
    numeric = [c for c in table.columns if c not in skip and not c.endswith(("/ci_low", "/ci_high", "/verdict"))
               and pd.to_numeric(table[c], errors="coerce").notna().any()]
    varying = [c for c in numeric if table.loc[table["ran"], c].nunique(dropna=True) > 1]
    claims = [c for c in varying if c.endswith("/our_value")]
    return (claims + [c for c in varying if c not in claims])[:MAX_PANELS]


def figure(table, keys: list[str], path: Path) -> tuple[str, str]:
    """Draw ``sweep.png``; returns (caption, degenerate reason or "")."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from memlab.report import degenerate

    if not keys or table.empty or not table["ran"].any():
        return "no point of the sweep has run", "no point of the sweep has run"
    ys = _y_columns(table, keys)
    if not ys:
        return f"no metric varies with {', '.join(keys)}", f"no metric varies with {', '.join(keys)}"
    panels, ran = _series(table, keys, ys)
    fig, axes = plt.subplots(len(panels), 1, figsize=(6.4, 2.6 * len(panels)), squeeze=False)
    for ax, (name, series) in zip(axes[:, 0], panels):
        for label, x, y, low, high in series:
            ax.plot(x, y, marker="o", label=label or None)
            if low is not None and high is not None and low.notna().any():
                ax.fill_between(x, low, high, alpha=0.2)
        ax.set_ylabel(name.removesuffix("/our_value"), fontsize=8)
        if any(label for label, *_ in series):
            ax.legend(fontsize=7)
    axes[-1, 0].set_xlabel(keys[0])
    if ran["_x"].dtype.kind in "iu" and not _numeric(ran[keys[0]]):
        axes[-1, 0].set_xticks(sorted(set(ran["_x"])), list(dict.fromkeys(ran[keys[0]])))
    fig.tight_layout()
    why = degenerate(fig)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    n_claims = sum(y.endswith("/our_value") for y in ys)
    what = " and ".join(w for w, n in (("each claim whose value varies (band: its 95 % interval)", n_claims),
                                       ("each metric that varies", len(ys) - n_claims)) if n)
    caption = (f"{what} vs {keys[0]}" + (f", one line per {', '.join(keys[1:])}" if keys[1:] else "")
               + f"; {int(table['ran'].sum())} of {len(table)} points ran, each its own run folder")
    return caption, why


def _numeric(col) -> bool:
    import pandas as pd

    return bool(pd.to_numeric(col, errors="coerce").notna().all())


def write_sweeps(overrides: list[str]) -> list[Path]:
    """The runner's hook after a ``-m`` sweep: one summary per swept experiment (a failure prints one line and
    does not fail the sweep, whose runs are already written)."""
    from omegaconf import OmegaConf

    from memlab.config import compose
    from memlab.sweep_effects import warn_idle_keys

    swept, points = expand(overrides)
    if not points or len(points) < 2:
        return []
    out = []
    try:
        for experiment in dict.fromkeys(experiment_of(p) for p in points):
            if experiment is None:
                continue
            first = next(p for p in points if experiment_of(p) == experiment)
            cfg = compose(experiment, [o for o in first if not o.startswith(("experiment=", "hydra"))])
            results = Path(OmegaConf.select(cfg, "paths.results"))
            idle = warn_idle_keys(results, experiment, overrides)  # a swept key that changed no metric: where it acted
            out.append(summarize(results, experiment, overrides,
                                 [line.removeprefix("memlab: warning: ") for line in idle]))
            print(f"memlab: sweep summary in {out[-1]}", file=sys.stderr)
            if OmegaConf.select(cfg, "logger.name") == "wandb":
                try:
                    log_wandb(OmegaConf.to_container(cfg.logger, resolve=True), experiment, out[-1])
                except Exception as err:  # W&B's own errors have no common base; the summary is written anyway
                    print(f"memlab: warning: sweep summary not logged to W&B: {err.__class__.__name__}: {err}",
                          file=sys.stderr)
    except (MemlabError, OSError, ValueError, KeyError) as err:
        print(f"memlab: warning: no sweep summary: {err}", file=sys.stderr)
    return out
