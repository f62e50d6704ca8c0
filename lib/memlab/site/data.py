"""Reading what the site shows: run folders (tables, figures, captions, run.json), papers' titles, the checkout.

Nothing here writes or renders; :mod:`memlab.site.pages` turns these records into HTML.
"""

from __future__ import annotations

import csv
import json
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from memlab.errors import MemlabError
from memlab.site.markup import VERDICT_CLASS

# the file kinds a run folder contributes to the site: figures, tables, metrics, its config and the notebook's HTML
COPIED = ("figures/*.png", "figures/captions.json", "tables/*.csv", "metrics.json", "config.yaml", "run.json")
# changes that `make reproduce` itself makes to a clean checkout: not "dirty" for the report's title
REPRODUCE_WRITES = ("dvc.lock",)
# paper ids that name the same paper as another's conf/paper file: seed 001 is the published version of seed 003,
# and conf/paper/003_pearl.yaml holds the claims of both
SAME_PAPER = {"001_pearl": "003_pearl"}
PASSED = ("True", "False", "true", "false")  # a sanity row's `passed` as pandas and as hand-written tables spell it


@dataclass
class Run:
    """What the site shows of one experiment's default run."""

    experiment: str
    folder: Path | None                      # results/<exp>/<key>, None when it has not run
    key: str = "default"                     # the run shown: default, or the newest of an experiment run by hand
    claims: list[dict] = field(default_factory=list)
    has_comparison: bool = False
    sanity: list[dict] | None = None         # tables/sanity.csv rows (None: the run has none)
    figures: list[Path] = field(default_factory=list)
    captions: dict = field(default_factory=dict)  # figure name → caption / {"caption", "degenerate"}
    tables: list[Path] = field(default_factory=list)
    notebook_html: Path | None = None
    metrics: Path | None = None
    info: dict = field(default_factory=dict)     # run.json (empty for runs made before it existed)
    timing: dict = field(default_factory=dict)   # started, seconds, source
    threads: object = None                       # model.threads of the run's config
    dtypes: str = ""                             # weight dtype of each model, as loaded (run.json)
    problems: list[str] = field(default_factory=list)  # files of the run the site could not use, and why


def read_csv(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def checked_rows(path: Path, key: str, column: str, allowed: tuple[str, ...], problems: list[str]) -> list[dict]:
    """The rows of a run's CSV table that the site can show: each names its ``key`` and has a ``column`` value in
    ``allowed``. Every other row, or the whole file when it can't be read as such a table, goes into ``problems``
    (one line each, naming the file), never onto the page as a row without a verdict."""
    try:
        rows = read_csv(path)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        problems.append(f"{path}: unreadable ({exc.__class__.__name__}); its rows are not shown")
        return []
    header = set(rows[0]) if rows else set()
    if rows and not {key, column} <= header:
        problems.append(f"{path}: not a results table (no {key!r} / {column!r} column); its rows are not shown")
        return []
    good = [r for r in rows if r.get(key) and str(r.get(column, "")).strip() in allowed and None not in r]
    if len(good) < len(rows):
        problems.append(f"{path}: {len(rows) - len(good)} of {len(rows)} rows without a valid {column!r} "
                        f"(one of {', '.join(allowed)}) or with extra cells; those rows are not shown")
    return good


def read_json(path: Path) -> dict:
    """A JSON object from ``path``; {} when missing or unreadable (older runs)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _json_object(path: Path) -> bool:
    try:
        return isinstance(json.loads(path.read_text(encoding="utf-8")), dict)
    except (OSError, ValueError):
        return False


def experiments(results: Path) -> list[str]:
    """Every experiment in conf/experiment/, plus any other that has a results folder (sorted)."""
    from memlab.config import experiment_names

    names = set(experiment_names())
    if results.is_dir():
        names |= {p.name for p in results.iterdir() if (p / "default").is_dir()}
    return sorted(names)


def shown_folder(results: Path, experiment: str) -> Path | None:
    """The run the site shows: ``default`` (what make reproduce writes); for an experiment that is not a pipeline
    stage (``requires.stage: false``, e.g. the audit of a user's model), the newest finished run of any key."""
    from memlab.config import experiment_names
    from memlab.pipeline import stage_wanted

    default = results / experiment / "default"
    if default.is_dir() or experiment not in experiment_names() or stage_wanted(experiment):
        return default if default.is_dir() else None
    return next(iter(finished_folders(results, experiment)), None)


def finished_folders(results: Path, experiment: str) -> list[Path]:
    """Every finished run of ``experiment`` (its run.json written; not a failed run's folder, a partial one or the
    sweep summaries), newest first."""
    root = results / experiment
    done = [p for p in root.iterdir() if (p / "run.json").is_file() and not p.name.startswith(".")
            and not p.name.endswith(".failed")] if root.is_dir() else []
    return sorted(done, key=lambda p: (read_json(p / "run.json").get("started") or "", p.name), reverse=True)


def read_run(results: Path, experiment: str, folder: Path | None = None) -> Run:
    """What the site shows of the run in ``folder`` (default: the experiment's shown run, :func:`shown_folder`)."""
    folder = folder or shown_folder(results, experiment)
    if folder is None:
        return Run(experiment, None)
    run = Run(experiment, folder, key=folder.name)
    cmp = folder / "tables" / "comparison.csv"
    if cmp.exists():
        run.has_comparison = True
        run.claims = checked_rows(cmp, "claim_id", "verdict", tuple(VERDICT_CLASS), run.problems)  # + older vocabulary
    if (folder / "tables" / "sanity.csv").exists():
        run.sanity = checked_rows(folder / "tables" / "sanity.csv", "check_id", "passed", PASSED, run.problems)
    run.figures = sorted((folder / "figures").glob("*.png"))
    run.captions = read_json(folder / "figures" / "captions.json")
    first = {"comparison.csv": 0, "sanity.csv": 1}
    run.tables = sorted((folder / "tables").glob("*.csv"), key=lambda p: (first.get(p.name, 2), p.name))
    nb = folder / f"{experiment}.html"
    run.notebook_html = nb if nb.exists() else next(iter(sorted(folder.glob("*.html"))), None)
    run.metrics = folder / "metrics.json" if (folder / "metrics.json").exists() else None
    for name in ("metrics.json", "run.json"):
        if (folder / name).exists() and not _json_object(folder / name):
            run.problems.append(f"{folder / name}: not a JSON object (truncated?); the site shows the run without it")
    run.info = read_json(folder / "run.json")
    run.timing = run_timing(folder, run.info)
    run.threads = _per_model(run.info, "threads") or _model_threads(folder / "config.yaml")
    run.dtypes = _per_model(run.info, "dtypes") or ""
    return run


def run_timing(folder: Path, info: dict) -> dict:
    """When a run started and how long it took: its ``run.json``; for older runs, file times (config.yaml is
    written just before the notebook starts, the executed notebook when it ends)."""
    if info:
        return {"started": info.get("started"), "seconds": info.get("seconds"), "source": "run.json"}
    start = folder / "config.yaml"
    ends = [p for p in (*folder.glob("*.ipynb"), folder / "metrics.json") if p.exists()]
    if not start.exists():
        return {}
    t0 = start.stat().st_mtime
    t1 = max((p.stat().st_mtime for p in ends), default=None)
    return {"started": iso(t0), "seconds": round(t1 - t0, 1) if t1 and t1 >= t0 else None,
            "source": "file times"}


def _per_model(info: dict, key: str) -> str | None:
    """A per-model entry of ``run.json`` as text: the value when all models agree, else "model value, …"."""
    per_model = info.get(key)
    if not per_model or not isinstance(per_model, dict):
        return None
    values = {str(v) for v in per_model.values()}
    return values.pop() if len(values) == 1 else ", ".join(f"{m} {v}" for m, v in sorted(per_model.items()))


def _model_threads(config: Path):
    if not config.exists():
        return None
    import yaml

    try:
        cfg = yaml.safe_load(config.read_text()) or {}
    except yaml.YAMLError:
        return None
    model = cfg.get("model") if isinstance(cfg, dict) else None
    return model.get("threads") if isinstance(model, dict) else None


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="seconds")


# -- papers -----------------------------------------------------------------------------------------------------
def paper_titles(conf: Path) -> dict[str, dict]:
    """paper id → {title, authors, url} from the top-level keys of ``conf/paper/*.yaml`` (absent keys omitted)."""
    import yaml

    out = {}
    for p in sorted((conf / "paper").glob("*.yaml")):
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        meta = {k: data[k] for k in ("title", "authors", "url") if data.get(k)}
        out[str(data.get("paper", p.stem))] = meta
    out.update({alias: out[paper] for alias, paper in SAME_PAPER.items() if paper in out})
    return out


# -- the checkout -----------------------------------------------------------------------------------------------
@dataclass
class Checkout:
    commit: str                 # full commit, "unknown" outside git
    short: str                  # 7 characters, "nogit" outside git
    changed: list[str] | None   # tracked files that differ from the commit (None: not a git checkout)

    @property
    def dirty(self) -> bool | None:
        """Dirty beyond what `make reproduce` writes (dvc.lock): None outside git."""
        if self.changed is None:
            return None
        return any(f not in REPRODUCE_WRITES for f in self.changed)


def git_state(root: Path) -> Checkout:
    try:
        full = _git(root, "rev-parse", "HEAD").strip()
        status = _git(root, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return Checkout("unknown", "nogit", None)
    changed = sorted(line[3:].split(" -> ")[-1] for line in status.splitlines() if line.strip())
    return Checkout(full, full[:7], changed)


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True, timeout=60).stdout


def read_lock(root: Path) -> dict:
    """``dvc.lock`` of ``root`` parsed ({} when there is none); a corrupt one (cut, not YAML, not a mapping of stages)
    is one MemlabError line naming it and how to get a whole one back."""
    import yaml

    from memlab import yaml_text

    lock = Path(root) / "dvc.lock"
    if not lock.exists():
        return {}
    fix = ("restore it (`git checkout -- dvc.lock`) or rewrite it with `make reproduce`")
    try:
        data = yaml_text.safe_load(lock.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        why = getattr(err, "problem", None) or type(err).__name__
        raise MemlabError(f"{lock} is not valid YAML ({why}{where}): it is cut or corrupt; {fix}") from None
    if not isinstance(data, dict) or not isinstance(data.get("stages", {}), dict) or \
            not all(isinstance(b, dict) for b in data.get("stages", {}).values()):
        raise MemlabError(f"{lock} is not a DVC lock file (no mapping of stages); {fix}")
    return data


def dvc_hashes(root: Path) -> list[tuple[str, str, str]]:
    """(stage, path, md5) of every ``outs`` entry of dvc.lock under data/corpora and models/."""
    stages = read_lock(root).get("stages", {})
    out = []
    for stage, body in stages.items():
        for o in body.get("outs", []) or []:
            path = str(o.get("path", ""))
            if path == "data/corpora" or path.startswith(("data/corpora/", "models/")):
                out.append((stage, path, str(o.get("md5", "?"))))
    return sorted(out, key=lambda r: r[1])
