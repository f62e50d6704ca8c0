"""Sweeps as results: after ``python -m memlab.run -m experiment=<e> a=1,2,3 …``, one summary of every point.

Each point of a sweep is its own run folder (``results/<e>/<run-key>/``, :func:`memlab.runner.keys.run_key`). This module
expands the command line's overrides the way Hydra's basic sweeper does, finds every point's folder and writes
``results/<e>/sweeps/<sweep-id>/``:

* ``sweep.csv`` — one row per point: its run key, the swept keys' values, its status in this sweep (ran, failed,
  missing, stale: :func:`memlab.runner.sweep_effects.point_status`) and, only when it ran, every numeric metric of its
  ``metrics.json`` and, per claim of its ``tables/comparison.csv``, our value, its interval and the verdict;
* ``sweep.png`` — each claim whose value varies (with its 95 % interval), then each other metric that varies (a
  count beside its rate drawn once, as the rate), at most ``MAX_PANELS`` panels, against the first swept key that
  is not a seed: a numeric key on a numeric axis, a key of names on categorical ticks; a swept seed is the spread
  of its draws (each draw, their mean and range), never a trend (:func:`layout`); when fewer than two points ran
  or nothing varies, no figure but a sentence saying so;
* ``sweep.json`` — what was swept, the command, the number of points, of missing and of failed ones, the
  figure's caption.

A swept key that changed no byte of any point's ``metrics.json`` is one warning naming the tables it did change
(:mod:`memlab.runner.sweep_effects`).

The report site (:mod:`memlab.site.sweep_pages`) shows every sweep present.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from memlab.errors import MemlabError
from memlab.runner.keys import expand, experiment_of, run_key, sweep_key
from memlab.runner.sweep_effects import point_status

MAX_PANELS = 6  # panels of the sweep figure (varying claims first, then varying metrics): more would not be read


def point_row(folder: Path, key: str, values: dict[str, str], since: float | None = None) -> dict:
    """One table row: the point's key and swept values, its status in this sweep (:func:`point_status`), then its
    metrics and claims — only when this sweep's run of it succeeded: a failed or older run's numbers are not it."""
    import pandas as pd

    status = point_status(folder, since)
    row = {"run_key": key, **values, "status": status, "ran": status == "ran"}
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


def summarize(results: Path, experiment: str, overrides: list[str], idle: list[str] | None = None,
              since: float | None = None) -> Path:
    """Write the sweep summary of ``experiment`` for the command-line ``overrides``; returns its folder. ``idle``:
    the lines naming swept keys that changed no metric (:mod:`memlab.runner.sweep_effects`), kept in sweep.json;
    ``since``: when the sweep started (epoch seconds), so that a point's run from before it is not shown as its."""
    import pandas as pd

    swept, points = expand(overrides)
    rows = []
    for point in points:
        if experiment_of(point) not in (None, experiment):
            continue
        values = {k: v.split("=", 1)[1] for k, v in ((o.split("=", 1)[0], o) for o in point) if k in swept}
        key = run_key(point)
        rows.append(point_row(results / experiment / key, key, values, since))
    out = results / experiment / "sweeps" / sweep_key(overrides)
    out.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(rows)
    table.to_csv(out / "sweep.csv", index=False)
    keys = [k for k in swept if k != "experiment"]
    caption, why = figure(table, keys, out / "sweep.png")
    meta = {"experiment": experiment, "swept": {k: swept[k] for k in keys}, "points": len(rows),
            "missing": int((~table["ran"]).sum()) if len(table) else 0, "caption": caption,
            "failed": int((table["status"] == "failed").sum()) if len(table) else 0,
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


SEED_KEY = re.compile(r"(^|[._])seed$")  # a key naming a random draw: its values are replicates, not amounts
COUNT_TWIN = re.compile(r"(.*?[_/]|)(count|exact|k|n|hits|flagged)")  # a count whose rate may be a column too
RATE_WORDS = ("rate", "share", "fraction", "frac")


def categorical(key: str, values) -> bool:
    """Whether ``key`` is drawn as categories, not on a numeric axis: a seed (its values name draws, not amounts)
    or a key with a non-numeric value (model names)."""
    return bool(SEED_KEY.search(key)) or not _numeric(values)


def count_twins(columns) -> set[str]:
    """The count columns whose rate twin is among ``columns`` (``x_exact`` or ``x_count`` beside ``x_rate``, ``k``
    beside ``share``): the same result twice, drawn once, as the rate."""
    cols = set(columns)
    return {c for c in cols if (m := COUNT_TWIN.fullmatch(c)) and any(m[1] + r in cols for r in RATE_WORDS)}


def _y_columns(table, keys: list[str]) -> list[str]:
    """The columns worth a panel: every claim whose value varies across the points, then every other metric that
    varies (a claim that stays put is a flat line; the metrics a swept threshold moves are what the reader wants),
    a count whose rate also varies left out (:func:`count_twins`)."""
    import pandas as pd

    skip = {"run_key", "ran", "status", *keys}
    numeric = [c for c in table.columns if c not in skip and not c.endswith(("/ci_low", "/ci_high", "/verdict"))
               and pd.to_numeric(table[c], errors="coerce").notna().any()]
    varying = [c for c in numeric if table.loc[table["ran"], c].nunique(dropna=True) > 1]
    varying = [c for c in varying if c not in count_twins(varying)]
    claims = [c for c in varying if c.endswith("/our_value")]
    return (claims + [c for c in varying if c not in claims])[:MAX_PANELS]


def layout(table, keys: list[str]) -> dict:
    """How a sweep is drawn. ``x``: the key on the x axis — the first key that is not a seed, else the seed;
    ``seed``: a swept seed key summarised as the spread of its draws at each x (None when x is the seed itself or
    no seed is swept); ``series``: the other keys, one series per combination; ``mode``: "line" (numeric x),
    "points" (categorical x), "seeds" (x is the seed: each draw, then their mean ± range) or "spread" (mean ±
    range over the seeds at each x); ``ticks``: x value → position (categories in the sweep's order)."""
    seed = next((k for k in keys if SEED_KEY.search(k)), None)
    rest = [k for k in keys if k != seed]
    x = rest[0] if rest else seed
    cat = categorical(x, table[x])
    values = list(dict.fromkeys(table[x].astype(str)))
    mode = ("spread" if seed and rest else "seeds" if seed else "points" if cat else "line")
    return {"x": x, "seed": seed if rest else None, "series": [k for k in rest[1:] if k != x] if rest else [],
            "mode": mode, "categorical": cat,
            "ticks": {v: (i if cat else float(v)) for i, v in enumerate(values)}}


def sweep_figure(table, keys: list[str]):
    """(matplotlib figure or None, caption, degenerate reason or "") of a sweep's table (:func:`summarize`): one
    panel per column of :func:`_y_columns`, drawn as :func:`layout` says. No figure from fewer than two points that
    produced numbers: one point cannot show that anything varies, or that nothing does."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from memlab.report import degenerate

    ran = table[table["ran"]] if len(table) else table
    if not keys or ran.empty:
        return None, "no point of the sweep has run", "no point of the sweep has run"
    if len(ran) < 2:
        why = f"only 1 of {len(table)} points produced numbers ({_not_shown(table, keys)}): nothing to compare"
        return None, why, why
    ys = _y_columns(table, keys)
    if not ys:  # judged on the points that ran: said so when others did not
        why = f"no metric varies with {', '.join(keys)}" + (
            f" across the {len(ran)} of {len(table)} points that produced numbers (not shown: "
            f"{_not_shown(table, keys)})" if len(ran) < len(table) else "")
        return None, why, why
    lay = layout(table, keys)
    fig, axes = plt.subplots(len(ys), 1, figsize=(6.4, 2.6 * len(ys)), squeeze=False, sharex=True)
    for ax, y in zip(axes[:, 0], ys):
        _panel(ax, ran, y, lay)
        ax.set_ylabel(y.removesuffix("/our_value"), fontsize=8)
    _x_axis(axes[-1, 0], table, lay)
    fig.tight_layout()
    return fig, _caption(table, keys, ys, lay), degenerate(fig)


def _panel(ax, ran, y: str, lay: dict) -> None:
    """One panel: every series of ``lay`` (one per combination of its series keys) of column ``y``."""
    import pandas as pd

    groups = list(ran.groupby(lay["series"], sort=False)) if lay["series"] else [((), ran)]
    for i, (label, g) in enumerate(groups):
        label = ", ".join(f"{k}={v}" for k, v in zip(lay["series"], label if isinstance(label, tuple) else (label,)))
        x = g[lay["x"]].astype(str).map(lay["ticks"]).astype(float)
        shift = (i - (len(groups) - 1) / 2) * (0.1 if lay["categorical"] else 0.0)  # side by side, bars apart
        order = x.argsort()
        x, g = x.iloc[order] + shift, g.iloc[order]
        v = pd.to_numeric(g[y], errors="coerce")
        stem = y.removesuffix("/our_value")
        low, high = (pd.to_numeric(g[f"{stem}/{c}"], errors="coerce") if f"{stem}/{c}" in g else None
                     for c in ("ci_low", "ci_high"))
        style = {"color": f"C{i}", "label": label or None}
        if lay["mode"] == "line":
            ax.plot(x, v, marker="o", **style)
            if low is not None and high is not None and low.notna().any():
                ax.fill_between(x, low, high, alpha=0.2, color=style["color"])
        elif lay["mode"] == "spread":
            _spread(ax, x, v, lay["categorical"], style)
        else:  # one point per category (each seed, each model), its interval as bars; no line joins categories
            ax.errorbar(x, v, yerr=_yerr(v, low, high), ls="", marker="o", capsize=3, **style)
            if lay["mode"] == "seeds":
                ax.errorbar([len(lay["ticks"]) + shift], [v.mean()], yerr=[[v.mean() - v.min()], [v.max() - v.mean()]],
                            marker="D", capsize=5, color=style["color"])
    if any(label for label, _ in groups) and lay["series"]:
        ax.legend(fontsize=7)


def _spread(ax, x, v, cat: bool, style: dict) -> None:
    """At each x: the mean over the seeds (joined by a line on a numeric axis), bars from their min to their max,
    and each seed's value as a faint dot."""
    agg = v.groupby(x.to_numpy()).agg(["mean", "min", "max"])
    ax.errorbar(agg.index, agg["mean"], yerr=[agg["mean"] - agg["min"], agg["max"] - agg["mean"]], marker="o",
                capsize=4, ls="" if cat else "-", **style)
    ax.plot(x, v, ls="", marker=".", alpha=0.4, color=style["color"])


def _yerr(v, low, high):
    """Error-bar lengths from an interval's bounds (None when there is none)."""
    if low is None or high is None or not low.notna().any():
        return None
    return [(v - low).clip(lower=0).fillna(0), (high - v).clip(lower=0).fillna(0)]


def _x_axis(ax, table, lay: dict) -> None:
    """The x axis: the key's name; on a categorical axis one tick per value (a value no point of which ran says
    why: failed, missing, stale) and, for a seed sweep, the mean ± range tick."""
    ax.set_xlabel(lay["x"])
    if not lay["categorical"]:
        return
    labels = []
    for v in lay["ticks"]:
        status = set(table.loc[table[lay["x"]].astype(str) == v, "status"])
        labels.append(v if "ran" in status else f"{v}\n({', '.join(sorted(status))})")
    positions = list(lay["ticks"].values())
    if lay["mode"] == "seeds":
        positions.append(len(positions))
        labels.append("mean ± range")
    ax.set_xticks(positions, labels)


def _caption(table, keys: list[str], ys: list[str], lay: dict) -> str:
    n_claims = sum(y.endswith("/our_value") for y in ys)
    mode, x = lay["mode"], lay["x"]
    interval = {"line": " (band: its 95 % interval)", "spread": ""}.get(mode, " (bars: its 95 % interval)")
    what = " and ".join(w for w, n in ((f"each claim whose value varies{interval}", n_claims),
                                       ("each metric that varies", len(ys) - n_claims)) if n)
    how = {"line": f" vs {x}", "points": f" per {x} (categories)",
           "seeds": f" per {x} (each draw) and their mean ± range (diamond: mean, bars: min to max)",
           "spread": f" vs {x}: the mean over the {lay['seed']} values that ran, bars from their min to their max, "
                     "dots each draw"}[mode]
    series = f", one {'line' if mode == 'line' else 'colour'} per {', '.join(lay['series'])}" if lay["series"] else ""
    text = f"{what}{how}{series}; {int(table['ran'].sum())} of {len(table)} points ran, each its own run folder"
    return text + (f"; not shown: {_not_shown(table, keys)}" if (~table["ran"]).any() else "")


def _not_shown(table, keys: list[str]) -> str:
    """The points that produced no numbers in this sweep, each with why ("seed=2: failed")."""
    return "; ".join(f"{', '.join(f'{k}={r[k]}' for k in keys)}: {r['status']}"
                     for r in table[~table["ran"]].to_dict("records")) or "none missing"


def figure(table, keys: list[str], path: Path) -> tuple[str, str]:
    """Draw ``sweep.png`` (:func:`sweep_figure`; a figure of an earlier summary of the same sweep is removed when
    this one has none); returns (caption, degenerate reason or "")."""
    import matplotlib.pyplot as plt

    fig, caption, why = sweep_figure(table, keys)
    path.unlink(missing_ok=True)
    if fig is not None:
        fig.savefig(path, dpi=110, metadata={"Software": None})
        plt.close(fig)
    return caption, why


def _numeric(col) -> bool:
    import pandas as pd

    return bool(pd.to_numeric(col, errors="coerce").notna().all())


def write_sweeps(overrides: list[str], since: float | None = None) -> list[Path]:
    """The runner's hook after a ``-m`` sweep that started at ``since`` (epoch seconds): one summary per swept
    experiment (a failure prints one line and does not fail the sweep, whose runs are already written)."""
    from omegaconf import OmegaConf

    from memlab.config import compose
    from memlab.runner.sweep_effects import warn_idle_keys

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
            # a swept key that changed no metric: where it acted
            idle = warn_idle_keys(results, experiment, overrides, since)
            out.append(summarize(results, experiment, overrides,
                                 [line.removeprefix("memlab: warning: ") for line in idle], since))
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
