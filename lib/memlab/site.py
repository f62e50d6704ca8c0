"""The reviewer report: one static site that puts every paper number beside ours (``make report``).

    python -m memlab.site [--results results] [--out results/report]

Builds ``<out>/index.html`` from the default run of every experiment (``results/<exp>/default/``):

* a summary table of every claim (``tables/comparison.csv`` of each run, see :mod:`memlab.comparison`), coloured
  by verdict: paper value, our value with its 95 % interval, setting, reason. An experiment whose run has no
  comparison table shows one "no claims yet" row; one that has not run shows "no run yet";
* one section per experiment: its figures inline, its tables and metrics linked, its executed notebook (HTML);
* an environment section: git commit and dirty flag, Python and key package versions, torch threads, the machine,
  the data and model hashes from ``dvc.lock``, and when each run ran and how long it took (``run.json``, which
  :func:`memlab.run.execute` writes; file times for runs made before it did).

Everything the page links to is copied into ``<out>/`` (figures, CSV tables, metrics.json, the executed-notebook
HTML — the outputs the runs already produce, redacted where the data is copyright-category; no document text is
added here), so the folder opens from ``file://`` with no server, no JavaScript, no external fonts. The same folder
is packed as ``<out>-<short commit>.tar.gz`` beside it (``results/report-<commit>.tar.gz``; the archives of
earlier builds are removed, so there is one).
"""

from __future__ import annotations

import argparse
import csv
import html
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from memlab.errors import MemlabError, one_line_errors

PACKAGES = ("torch", "transformers", "hydra-core", "papermill", "dvc", "wandb", "pandas")
VERDICT_CLASS = {"reproduced": "ok", "not reproduced": "bad", "not comparable": "nc"}
# the file kinds a run folder contributes to the site: figures, tables, metrics and the executed notebook's HTML
COPIED = ("figures/*.png", "tables/*.csv", "metrics.json")

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 78em; padding: 0 1em; color: #1b1b1b; line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.1em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 0.3em 0.5em; vertical-align: top; text-align: left; }
th { background: #eee; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.text { min-width: 16em; } td.ours { min-width: 9em; } td.verdict { white-space: nowrap; font-weight: 600; }
tr.ok td.verdict { background: #c8e6c9; } tr.bad td.verdict { background: #ffcdd2; }
tr.nc td.verdict { background: #e0e0e0; } tr.none td { color: #666; font-style: italic; background: #fafafa; }
span.ok, span.bad, span.nc { padding: 0 0.4em; border-radius: 3px; }
span.ok { background: #c8e6c9; } span.bad { background: #ffcdd2; } span.nc { background: #e0e0e0; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
code { font-size: 0.95em; } .muted { color: #666; }
"""


@dataclass
class Run:
    """What the site shows of one experiment's default run."""

    experiment: str
    folder: Path | None                      # results/<exp>/default, None when it has not run
    claims: list[dict] = field(default_factory=list)
    has_comparison: bool = False
    figures: list[Path] = field(default_factory=list)
    tables: list[Path] = field(default_factory=list)
    notebook_html: Path | None = None
    metrics: Path | None = None
    timing: dict = field(default_factory=dict)  # started, seconds, source
    threads: object = None                       # model.threads of the run's config
    dtypes: str = ""                             # weight dtype of each model, as loaded (run.json)


# -- reading run folders ----------------------------------------------------------------------------------------
def experiments(results: Path) -> list[str]:
    """Every experiment in conf/experiment/, plus any other that has a results folder (sorted)."""
    from memlab.config import experiment_names

    names = set(experiment_names())
    if results.is_dir():
        names |= {p.name for p in results.iterdir() if (p / "default").is_dir()}
    return sorted(names)


def read_run(results: Path, experiment: str) -> Run:
    folder = results / experiment / "default"
    if not folder.is_dir():
        return Run(experiment, None)
    run = Run(experiment, folder)
    cmp = folder / "tables" / "comparison.csv"
    if cmp.exists():
        run.has_comparison = True
        with cmp.open(newline="", encoding="utf-8") as f:
            run.claims = list(csv.DictReader(f))
    run.figures = sorted((folder / "figures").glob("*.png"))
    tables = sorted((folder / "tables").glob("*.csv"))
    run.tables = sorted(tables, key=lambda p: p.name != "comparison.csv")  # the comparison first
    nb = folder / f"{experiment}.html"
    run.notebook_html = nb if nb.exists() else next(iter(sorted(folder.glob("*.html"))), None)
    run.metrics = folder / "metrics.json" if (folder / "metrics.json").exists() else None
    run.timing = run_timing(folder)
    run.threads = _run_threads(folder)
    run.dtypes = _per_model(folder, "dtypes") or ""
    return run


def run_timing(folder: Path) -> dict:
    """When a run started and how long it took: its ``run.json``; for older runs, file times (config.yaml is
    written just before the notebook starts, the executed notebook when it ends)."""
    info = folder / "run.json"
    if info.exists():
        try:
            data = json.loads(info.read_text())
            return {"started": data.get("started"), "seconds": data.get("seconds"), "source": "run.json"}
        except (OSError, ValueError):
            pass
    start = folder / "config.yaml"
    ends = [p for p in (*folder.glob("*.ipynb"), folder / "metrics.json") if p.exists()]
    if not start.exists():
        return {}
    t0 = start.stat().st_mtime
    t1 = max((p.stat().st_mtime for p in ends), default=None)
    return {"started": _iso(t0), "seconds": round(t1 - t0, 1) if t1 and t1 >= t0 else None,
            "source": "file times"}


def _per_model(folder: Path, key: str) -> str | None:
    """A per-model entry of ``run.json`` as text: the value when all models agree, else "model value, …"."""
    try:
        per_model = json.loads((folder / "run.json").read_text()).get(key)
    except (OSError, ValueError):
        per_model = None
    if not per_model:
        return None
    values = set(per_model.values())
    return str(values.pop()) if len(values) == 1 else ", ".join(f"{m} {v}" for m, v in sorted(per_model.items()))


def _run_threads(folder: Path):
    """Torch threads per model from ``run.json`` ("1" when all agree); older runs: the config's model.threads."""
    return _per_model(folder, "threads") or _model_threads(folder / "config.yaml")


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


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="seconds")


def _when(started: str | None) -> str:
    """An ISO 8601 time as ``2026-11-23 12:54:21 UTC`` (as given when it does not parse)."""
    if not started:
        return "?"
    try:
        return datetime.fromisoformat(started).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except ValueError:
        return str(started)


# -- environment ------------------------------------------------------------------------------------------------
def git_state(root: Path) -> tuple[str, str, bool | None]:
    """(full commit, short commit, dirty) — ("unknown", "nogit", None) outside a git checkout."""
    try:
        full = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown", "nogit", None
    return full, full[:7], bool(status.strip())


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def torch_threads() -> str:
    try:
        import torch

        return str(torch.get_num_threads())
    except ImportError:
        return "torch not installed"


def dvc_hashes(root: Path) -> list[tuple[str, str, str]]:
    """(stage, path, md5) of every ``outs`` entry of dvc.lock under data/corpora and models/."""
    lock = root / "dvc.lock"
    if not lock.exists():
        return []
    import yaml

    stages = (yaml.safe_load(lock.read_text()) or {}).get("stages", {})
    out = []
    for stage, body in stages.items():
        for o in body.get("outs", []) or []:
            path = str(o.get("path", ""))
            if path == "data/corpora" or path.startswith(("data/corpora/", "models/")):
                out.append((stage, path, str(o.get("md5", "?"))))
    return sorted(out, key=lambda r: r[1])


# -- HTML -------------------------------------------------------------------------------------------------------
def _e(x) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _num(text: str | None) -> str:
    """A number from a CSV cell, shortened to 4 significant digits; other text as is."""
    if text is None or str(text).strip() == "":
        return ""
    try:
        v = float(text)
    except ValueError:
        return str(text)
    if v != v:
        return ""
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.4g}"


def _ours(c: dict) -> str:
    ours = _num(c.get("our_value"))
    lo, hi = _num(c.get("ci_low")), _num(c.get("ci_high"))
    if lo != "" and hi != "":
        return f"{ours} [{lo}, {hi}]" if ours else f"[{lo}, {hi}]"
    return ours or "—"


def _href(path: Path, site: Path) -> str:
    from urllib.parse import quote

    return quote(path.relative_to(site).as_posix())


def summary_table(runs: list[Run]) -> str:
    rows = []
    for r in runs:
        anchor = f'<a href="#exp-{_e(r.experiment)}">{_e(r.experiment)}</a>'
        if r.folder is None or not r.claims:
            why = "no run yet" if r.folder is None else "no claims yet"
            rows.append(f'<tr class="none" data-experiment="{_e(r.experiment)}"><td>{anchor}</td>'
                        f'<td colspan="8">{why}</td></tr>')
            continue
        for c in r.claims:
            verdict = c.get("verdict", "")
            cls = VERDICT_CLASS.get(verdict, "nc")
            paper_value = _num(c.get("paper_value")) or "—"
            unit = c.get("unit") or ""
            rows.append(
                f'<tr class="claim {cls}" data-claim="{_e(c.get("claim_id"))}">'
                f"<td>{anchor}</td><td><code>{_e(c.get('claim_id'))}</code><br>"
                f"<span class=\"muted\">{_e(c.get('paper'))}, {_e(c.get('where'))}</span></td>"
                f"<td class=\"text\">{_e(c.get('claim'))}</td>"
                f'<td class="num">{_e(paper_value)}</td><td class="num ours">{_e(_ours(c))}</td><td>{_e(unit)}</td>'
                f"<td>{_e(c.get('setting'))}</td><td class=\"verdict\">{_e(verdict)}</td>"
                f"<td class=\"text\">{_e(c.get('reason'))}</td></tr>")
    head = ("<tr><th>experiment</th><th>claim (paper, where)</th><th>claim</th><th>paper value</th>"
            "<th>our value [95 % CI]</th><th>unit</th><th>setting</th><th>verdict</th><th>reason</th></tr>")
    return f'<table id="summary">\n<thead>{head}</thead>\n<tbody>\n' + "\n".join(rows) + "\n</tbody></table>"


def counts_line(runs: list[Run]) -> str:
    counts = {v: 0 for v in VERDICT_CLASS}
    other = 0
    for r in runs:
        for c in r.claims:
            if c.get("verdict") in counts:
                counts[c["verdict"]] += 1
            else:
                other += 1
    parts = [f'<span class="{VERDICT_CLASS[v]}">{n} {_e(v)}</span>' for v, n in counts.items()]
    if other:
        parts.append(f"{other} with another verdict")
    missing = [r.experiment for r in runs if not r.claims]
    line = f"{sum(counts.values()) + other} claims: " + ", ".join(parts)
    if missing:
        line += f"; {len(missing)} experiment(s) without claims yet"
    return f"<p>{line}.</p>"


def experiment_section(r: Run, site_run: Path | None, site: Path) -> str:
    out = [f'<section id="exp-{_e(r.experiment)}"><h2>{_e(r.experiment)}</h2>']
    if r.folder is None or site_run is None:
        out.append('<p class="muted">no run yet (<code>python -m memlab.run experiment='
                   f'{_e(r.experiment)}</code>)</p></section>')
        return "\n".join(out)
    t = r.timing
    when = f"ran {_e(_when(t.get('started')))}"
    if t.get("seconds") is not None:
        when += f", took {_e(_duration(t['seconds']))}"
    if t.get("source"):
        when += f' <span class="muted">({_e(t["source"])})</span>'
    out.append(f"<p>Run <code>default</code>: {when}.</p>")
    links = []
    if r.notebook_html:
        links.append(f'<a href="{_href(site_run / r.notebook_html.name, site)}">executed notebook (HTML)</a>')
    if r.metrics:
        links.append(f'<a href="{_href(site_run / "metrics.json", site)}">metrics.json</a>')
    if links:
        out.append("<p>" + " · ".join(links) + "</p>")
    if not r.has_comparison:
        out.append('<p class="muted">no claims yet (this run has no <code>tables/comparison.csv</code>)</p>')
    elif r.claims:
        verdicts = ", ".join(f'<span class="{VERDICT_CLASS.get(c.get("verdict"), "nc")}">'
                             f'{_e(c.get("claim_id"))}: {_e(c.get("verdict"))}</span>' for c in r.claims)
        out.append(f"<p>Verdicts: {verdicts}</p>")
    if r.tables:
        items = "".join(f'<li><a href="{_href(site_run / "tables" / p.name, site)}">{_e(p.name)}</a></li>'
                        for p in r.tables)
        out.append(f"<h3>Tables</h3><ul>{items}</ul>")
    if r.figures:
        out.append("<h3>Figures</h3>")
        for p in r.figures:
            src = _href(site_run / "figures" / p.name, site)
            out.append(f'<figure><img src="{src}" alt="{_e(r.experiment)}: {_e(p.stem)}">'
                       f"<figcaption><code>{_e(p.name)}</code></figcaption></figure>")
    out.append("</section>")
    return "\n".join(out)


def _duration(seconds) -> str:
    s = float(seconds)
    return f"{s:.0f} s" if s < 120 else f"{int(s // 60)} min {int(s % 60):02d} s"


def environment_section(root: Path, runs: list[Run], commit: str, dirty: bool | None) -> str:
    rows = [("git commit", commit),
            ("working tree", {True: "dirty (uncommitted changes to tracked files)", False: "clean",
                              None: "not a git checkout"}[dirty]),
            ("Python", f"{platform.python_version()} ({platform.python_implementation()})"),
            *((name, v) for name, v in package_versions().items()),
            ("torch threads (report builder)", torch_threads()),
            ("machine", f"{platform.platform()} · {platform.machine()}"),
            ("CPU count", str(os.cpu_count())),
            ("report built", _when(_iso(time.time())))]
    env = "".join(f"<tr><th>{_e(k)}</th><td><code>{_e(v)}</code></td></tr>" for k, v in rows)
    hashes = dvc_hashes(root)
    hash_rows = "".join(f"<tr><td><code>{_e(p)}</code></td><td>{_e(s)}</td><td><code>{_e(m)}</code></td></tr>"
                        for s, p, m in hashes) or '<tr><td colspan="3">no dvc.lock</td></tr>'
    run_rows = []
    for r in runs:
        if r.folder is None:
            run_rows.append(f'<tr class="none"><td>{_e(r.experiment)}</td><td colspan="5">no run yet</td></tr>')
            continue
        t = r.timing
        secs = _duration(t["seconds"]) if t.get("seconds") is not None else "?"
        run_rows.append(f"<tr><td>{_e(r.experiment)}</td><td>{_e(_when(t.get('started')))}</td>"
                        f'<td class="num">{_e(secs)}</td><td class="num">{_e(r.threads if r.threads is not None else "")}'
                        f"</td><td>{_e(r.dtypes)}</td><td>{_e(t.get('source', ''))}</td></tr>")
    return ("<section id=\"environment\"><h2>Environment</h2>"
            f"<table>{env}</table>"
            "<h3>Data and model hashes (dvc.lock)</h3>"
            f"<table><tr><th>path</th><th>stage</th><th>md5</th></tr>{hash_rows}</table>"
            "<h3>Runs</h3>"
            "<table><tr><th>experiment</th><th>started</th><th>took</th><th>model threads</th>"
            f"<th>model dtypes</th><th>from</th></tr>{''.join(run_rows)}</table></section>")


def page(runs: list[Run], sections: list[str], env: str, commit: str, dirty: bool | None) -> str:
    toc = " · ".join(f'<a href="#exp-{_e(r.experiment)}">{_e(r.experiment)}</a>' for r in runs)
    state = " (dirty)" if dirty else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>memlab report — {_e(commit[:7])}{state}</title>
<style>{CSS}</style>
</head>
<body>
<h1>memlab: the papers' numbers beside ours</h1>
<p>Commit <code>{_e(commit)}</code>{_e(state)}. Each row is one published claim (<code>conf/paper/</code>) judged
by a rule written in code on the default run of its experiment: <span class="ok">reproduced</span> (the claim holds
in our setting), <span class="bad">not reproduced</span> (it fails; the reason says what we see),
<span class="nc">not comparable</span> (different model or data; the reason says why). Intervals are 95 %
bootstrap intervals. <a href="#environment">Environment</a>.</p>
<h2 id="summary-heading">Summary</h2>
{counts_line(runs)}
{summary_table(runs)}
<p>Experiments: {toc}</p>
{chr(10).join(sections)}
{env}
</body>
</html>
"""


# -- building ---------------------------------------------------------------------------------------------------
def _copy_run(r: Run, dest: Path) -> None:
    assert r.folder is not None
    for pattern in COPIED:
        for src in sorted(r.folder.glob(pattern)):
            target = dest / src.relative_to(r.folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    if r.notebook_html:
        shutil.copy2(r.notebook_html, dest / r.notebook_html.name)


def build(results: Path, out: Path, root: Path | None = None) -> tuple[Path, Path, list[Run]]:
    """Build the site into ``out`` (replaced whole) and its archive beside it; returns (index.html, archive, the
    runs shown)."""
    from memlab.config import repo_root

    root = root or repo_root()
    results, out = Path(results), Path(out)
    if out.resolve() in (results.resolve(), root.resolve()) or out.resolve() in results.resolve().parents:
        raise MemlabError(f"--out {out} would replace {results}; pick a folder of its own (default results/report)")
    commit, short, dirty = git_state(root)
    runs = [read_run(results, name) for name in experiments(results)]
    work = out.with_name(f".{out.name}.partial")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    sections = []
    for r in runs:
        site_run = None
        if r.folder is not None:
            site_run = work / r.experiment
            _copy_run(r, site_run)
        sections.append(experiment_section(r, site_run, work))
    env = environment_section(root, runs, commit, dirty)
    (work / "index.html").write_text(page(runs, sections, env, commit, dirty), encoding="utf-8")
    if out.exists():
        if not (out / "index.html").exists() and any(out.iterdir()):
            shutil.rmtree(work, ignore_errors=True)
            raise MemlabError(f"{out} exists and is not a report folder (no index.html); remove it or pick --out")
        shutil.rmtree(out)
    work.rename(out)
    archive = out.with_name(f"{out.name}-{short}.tar.gz")
    pack(out, archive)
    for old in out.parent.glob(f"{out.name}-*.tar.gz"):  # one archive: the site as built now
        if old != archive and re.fullmatch(rf"{re.escape(out.name)}-([0-9a-f]{{7}}|nogit)\.tar\.gz", old.name):
            old.unlink()
    return out / "index.html", archive, runs


def pack(site: Path, archive: Path) -> None:
    """``archive``: the site folder as ``<site name>/...``, entries sorted, owner and group neutral."""
    tmp = archive.with_name(archive.name + ".tmp")

    def neutral(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(site, arcname=site.name, recursive=False, filter=neutral)
        for p in sorted(site.rglob("*")):
            tar.add(p, arcname=f"{site.name}/{p.relative_to(site).as_posix()}", recursive=False, filter=neutral)
    tmp.replace(archive)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    from memlab.config import repo_root

    ap = argparse.ArgumentParser(prog="python -m memlab.site", description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=None, help="the results folder (default: results/ of the checkout)")
    ap.add_argument("--out", default=None, help="the site folder (default: <results>/report)")
    args = ap.parse_args(argv)
    results = Path(args.results) if args.results else repo_root() / "results"
    out = Path(args.out) if args.out else results / "report"
    index, archive, runs = build(results, out)
    n_claims = sum(len(r.claims) for r in runs)
    print(f"memlab: report in {index} ({n_claims} claims, {len(runs)} experiments; open it in a browser: "
          f"file://{index.resolve()}); archive {archive}", file=sys.stderr)


if __name__ == "__main__":
    main()
