"""The notebook side of a run: what a thin report notebook calls.

Cell 1 of every notebook (tagged ``parameters``) holds ``cfg = {}``; the runner injects the resolved config.
Cell 2: ``rep = Report(cfg, experiment="<name>")``. Opened by hand in JupyterLab (``cfg`` empty), the
report composes the experiment's default config itself and writes to ``results/<name>/interactive/``.

Everything a notebook writes goes through here, so paths come from config and every output lands in the run
folder: ``tables/<name>.csv``, ``figures/<name>.png``, ``metrics.json``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from memlab.config import compose
from memlab.errors import ConfigError


class Report:
    def __init__(self, cfg: Mapping | DictConfig | None, experiment: str):
        if not cfg:
            composed = compose(experiment)
            cfg = OmegaConf.to_container(composed, resolve=True)
            cfg["run"] = {"key": "interactive",
                          "out_dir": str(Path(cfg["paths"]["results"]) / experiment / "interactive")}
        self.cfg: DictConfig = OmegaConf.create(dict(cfg)) if not isinstance(cfg, DictConfig) else cfg
        if self.cfg.get("experiment_name") != experiment:
            raise ConfigError(f"notebook is for experiment '{experiment}' but the config is for "
                              f"'{self.cfg.get('experiment_name')}'")
        self.experiment = experiment
        self.out_dir = Path(self.cfg.run.out_dir)
        (self.out_dir / "tables").mkdir(parents=True, exist_ok=True)
        (self.out_dir / "figures").mkdir(parents=True, exist_ok=True)
        self._metrics_path = self.out_dir / "metrics.json"
        self._metrics: dict[str, Any] = {}
        self._catalog = None
        self._typed: dict[str, Any] = {}  # key → typed node, built once (issue 30: the config is read once)
        self._seed_everything()

    # -- config -------------------------------------------------------------------------------------------
    def typed(self, key: str):
        """The config node at dotted ``key`` (e.g. ``"method"``, ``"params"``) as the dataclass its ``_schema_``
        names — every value checked, no defaults in code (see :mod:`memlab.schema`); built once per key."""
        if key not in self._typed:
            self._typed[key] = self.typed_node(self.cfg, key)
        return self._typed[key]

    @staticmethod
    def typed_node(cfg, key: str):
        from memlab.study_run import typed_node

        return typed_node(cfg, key)

    @property
    def params(self) -> DictConfig:
        return self.cfg.params

    @property
    def seed(self) -> int:
        return positive_int(self.cfg.seed, "seed", allow_zero=True)

    @property
    def paths(self) -> DictConfig:
        return self.cfg.paths

    def _seed_everything(self) -> None:
        import numpy as np

        random.seed(self.seed)
        np.random.seed(self.seed)
        try:
            import torch

            torch.manual_seed(self.seed)
            threads = positive_int(self.cfg.get("model", {}).get("threads", 1) or 1, "model.threads")
            torch.set_num_threads(threads)
        except ImportError:  # torch is a dependency, but a metrics-only report needn't fail without it
            pass

    @property
    def method(self):
        """``cfg.method`` (conf/method/<m>.yaml plus the experiment's overrides) as its typed dataclass."""
        return self.typed("method")

    # -- the study ----------------------------------------------------------------------------------------
    def run_study(self):
        """Call the study function the experiment names (``cfg.study``, :mod:`memlab.study_run`) as
        ``f(method, params, run)``: the typed method group (``None`` without one), the typed params, the run."""
        from memlab.study_run import StudyRun, resolve_study

        fn = resolve_study(self.cfg.get("study"))
        method = self.method if self.cfg.get("method") is not None else None
        params = self.typed("params")
        run = StudyRun(cfg=self.cfg, catalog=self.models, seed=self.seed, out_dir=self.out_dir,
                       results_root=Path(self.paths.results), progress=True)
        return fn(method, params, run)

    # -- models -------------------------------------------------------------------------------------------
    @property
    def models(self):
        """The :class:`memlab.models.catalog.Catalog` of this run: named models and zoo checkpoints, opened
        through the response cache (``cache=null``: none). Their token usage and cost go into usage.json."""
        if self._catalog is None:
            from memlab.models.catalog import Catalog

            self._catalog = Catalog(self.cfg.get("model"), self.cfg.get("cache"), self.cfg.paths)
        return self._catalog

    def backend(self, model_cfg: Mapping | DictConfig | None = None):
        """A backend for ``cfg.model`` (or another model node), wrapped in the run's cache."""
        return self.models.open(model_cfg)

    def record_usage(self) -> dict:
        """Write this run's model usage (requests, tokens, dollars of real backend calls — cache hits cost
        nothing) to ``usage.json``. Kept out of metrics.json: it depends on what the cache already held, and
        metrics must be identical for the same config and seed."""
        u = self.usage()
        (self.out_dir / "usage.json").write_text(json.dumps(u, indent=2, sort_keys=True) + "\n")
        return u

    def usage(self) -> dict:
        total = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
        for b in (self._catalog.opened if self._catalog else []):
            u = b.usage
            total["requests"] += u.requests
            total["prompt_tokens"] += u.prompt_tokens
            total["completion_tokens"] += u.completion_tokens
            total["cost_usd"] += u.cost_usd
        return total

    # -- outputs ------------------------------------------------------------------------------------------
    def table(self, name: str, df, *, show: bool = True):
        """Write ``tables/<name>.csv`` (no index) and show it."""
        path = self.out_dir / "tables" / f"{_safe(name)}.csv"
        df.to_csv(path, index=False)
        if show:
            _display(df)
        return path

    def figure(self, name: str, fig, *, show: bool = True):
        """Write ``figures/<name>.png`` (deterministic metadata) and show it once."""
        import matplotlib.pyplot as plt

        path = self.out_dir / "figures" / f"{_safe(name)}.png"
        fig.savefig(path, dpi=120, bbox_inches="tight", metadata={"Software": None})
        if show:
            _display(fig)
        plt.close(fig)
        return path

    def metrics(self, **numbers: Any) -> dict:
        """Merge numbers into ``metrics.json`` (written at once, keys sorted)."""
        for k, v in numbers.items():
            self._metrics[k] = _jsonable(v)
        tmp = self._metrics_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._metrics, indent=2, sort_keys=True) + "\n")
        tmp.replace(self._metrics_path)
        return dict(self._metrics)

    def _write_captions(self, result) -> dict[str, str]:
        """``figures/captions.json``: per figure, the study's caption and, when its data is degenerate (no point,
        one point, every value the same), why — the report site and the notebook then show that sentence instead of
        the plot. Returns {figure name: why} of the degenerate ones."""
        entries = {}
        for name, fig in result.figures.items():
            entry = {"caption": getattr(result, "captions", {}).get(name) or _label(fig)}
            if why := degenerate(fig):
                entry["degenerate"] = why
            entries[_safe(name)] = entry
        if entries:
            path = self.out_dir / "figures" / "captions.json"
            path.write_text(json.dumps(entries, indent=2, sort_keys=True) + "\n")
        return {name: e["degenerate"] for name, e in entries.items() if "degenerate" in e}

    def save(self, result) -> None:
        """Write every table, figure and metric of a :class:`memlab.results.StudyResult`; display the ones the
        study marked to show, in its order — first the ``comparison`` table (paper vs ours, one row per claim of
        this experiment in conf/paper/, judged by :mod:`memlab.comparison`)."""
        from memlab.comparison import comparison_table, load_claims, sanity_table

        if load_claims(self.experiment):  # the rules judge under the settings this run used (StudyResult.method)
            result.attach(self.cfg, self._typed)
        if load_claims(self.experiment, kind="sanity"):  # checks of our setup, apart from the claims (issue 27)
            result.tables = {"sanity": sanity_table(self.experiment, result), **result.tables}
            result.shown = [("table", "sanity"), *result.shown]
        if load_claims(self.experiment, kind="claim"):
            cmp = comparison_table(self.experiment, result, profile=(self.cfg.get("profile") or {}).get("name"))
            result.tables = {"comparison": cmp, **result.tables}
            result.shown = [("table", "comparison"), *result.shown]
            result.metrics.update({f"verdict/{r.claim_id}": r.verdict for r in cmp.itertuples()})
        for name, df in result.tables.items():
            self.table(name, df, show=False)
        empty = self._write_captions(result)
        for name, fig in result.figures.items():
            self.figure(name, fig, show=False)
        for kind, name in result.shown:
            self._show(result, kind, name, empty)
        if result.metrics:
            self.metrics(**result.metrics)
        self.record_usage()


    def _show(self, result, kind: str, name: str, empty: dict[str, str]) -> None:
        """Display one shown table (its view when the study gave one) or figure (with its caption under it when the
        study asked for that)."""
        if kind == "table":
            _display(result.views.get(name, result.tables[name]))
        elif _safe(name) in empty:  # nothing to show: the sentence, not the plot (the PNG is still written)
            _display(_text(f"**{name}: nothing to show** — {empty[_safe(name)]}."))
        else:
            _display(_png(self.out_dir / "figures" / f"{_safe(name)}.png"))
        if kind == "figure" and name in result.page_captions and result.captions.get(name):
            _display(_text(f"*{name}:* {result.captions[name]}"))


def positive_int(value: Any, name: str, *, allow_zero: bool = False) -> int:
    """``value`` as an int >= 1 (>= 0 with allow_zero), else a one-line ConfigError naming the key."""
    try:
        n = int(value)
        if isinstance(value, float) and n != value:
            raise ValueError
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be an integer, got {value!r}") from None
    if n < (0 if allow_zero else 1):
        raise ConfigError(f"{name} must be >= {0 if allow_zero else 1}, got {n}")
    return n


def degenerate(fig) -> str:
    """Why a matplotlib figure has nothing to show ("" when it has): no data, one point, or every plotted value
    equal (e.g. all zeros). Reads lines, scatter points and bar heights of every panel; images count as data.
    Reference artists (:func:`memlab.plots.reference`: the paper's value, chance lines) and error-bar caps are not
    data: an all-zeros figure with the paper's line or Wilson bars drawn still has nothing to show."""
    import numpy as np

    from memlab.plots import is_reference

    ys: list = []
    for ax in fig.get_axes():
        if ax.images:
            return ""
        caps = {id(c) for cont in ax.containers if type(cont).__name__ == "ErrorbarContainer" for c in cont.lines[1]}
        for line in ax.get_lines():
            if not is_reference(line) and id(line) not in caps:
                ys += list(np.asarray(line.get_ydata(), dtype=float).ravel())
        for coll in ax.collections:
            if type(coll).__name__ != "PathCollection" or is_reference(coll):  # bands and bars repeat the lines
                continue
            offsets = np.asarray(coll.get_offsets(), dtype=float)
            if offsets.ndim == 2 and offsets.shape[1] == 2:
                ys += list(offsets[:, 1])
        ys += [p.get_height() for p in ax.patches if hasattr(p, "get_height") and not is_reference(p)]
    values = np.asarray([y for y in ys if np.isfinite(y)], dtype=float)
    if values.size == 0:
        return "the figure has no data points"
    if values.size == 1:
        return f"the figure has one data point ({values[0]:.4g})"
    if np.all(values == values[0]):
        return f"every plotted value is {values[0]:.4g} ({values.size} points)"
    return ""


def _label(fig) -> str:
    """A caption the figure code set as the figure's label (``fig.set_label``); matplotlib's own labels are ""."""
    label = fig.get_label() if hasattr(fig, "get_label") else ""
    return "" if not label or label.startswith("_") else str(label)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _jsonable(v: Any) -> Any:
    try:
        import numpy as np

        if isinstance(v, np.generic):
            return v.item()
        if isinstance(v, np.ndarray):
            return v.tolist()
    except ImportError:
        pass
    if isinstance(v, float) and v != v:  # NaN is not JSON; keep it explicit
        return None
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def _png(path: Path):
    try:
        from IPython.display import Image

        return Image(filename=str(path))
    except ImportError:
        return str(path)


def _text(markdown: str):
    try:
        from IPython.display import Markdown

        return Markdown(markdown)
    except ImportError:
        return markdown


def _display(obj) -> None:
    try:
        from IPython.display import display

        display(obj)
    except ImportError:
        print(obj)
