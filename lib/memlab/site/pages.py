"""The site's pages: the index (summary of every claim, one section per experiment, the environment) and one page
per run (provenance, config, every table inline, figures with captions)."""

from __future__ import annotations

import os
import platform
import time
from collections import Counter
from pathlib import Path

from memlab.provenance import package_versions
from memlab.summary import lock_stamp
from memlab.site import provenance
from memlab.site.data import Checkout, Run, dvc_hashes, iso
from memlab.site.markup import (VERDICT_CLASS, VERDICT_ORDER, duration, e, href, num, rows_table, shell,
                                verdict_span, when)

# the optional comparison.csv columns (contract 1) a summary row opens, with their labels
DETAIL_COLUMNS = (("rule", "Rule"), ("paper_quote", "The paper"), ("setting", "Our setting"),
                  ("statistic", "Our value is"), ("p_value", "p-value"), ("paper_n", "paper n"),
                  ("our_n", "our n"), ("n_needed", "n needed"), ("profile", "profile"),
                  ("deviations", "deviations"))
SANITY_COLUMNS = ("check_id", "check", "value", "control", "control_value", "passed", "reason")


def paper_name(paper: str | None, titles: dict) -> str:
    meta = titles.get(paper or "", {})
    return meta.get("title") or paper or "?"


# -- summary ----------------------------------------------------------------------------------------------------
def _ours(c: dict) -> str:
    ours = num(c.get("our_value"))
    lo, hi = num(c.get("ci_low")), num(c.get("ci_high"))
    if lo != "" and hi != "":
        return f"{ours} [{lo}, {hi}]" if ours else f"[{lo}, {hi}]"
    return ours or "—"


def _details(c: dict) -> str:
    items = []
    for col, label in DETAIL_COLUMNS:
        text = (c.get(col) or "").strip()
        if not text:
            continue
        shown = f"<blockquote>{e(text)}</blockquote>" if col in ("rule", "paper_quote") else f" {e(text)}"
        items.append(f"<div><b>{e(label)}:</b>{shown}</div>")
    if not items:
        return ""
    return f"<details><summary>rule, the paper's sentence, setting</summary>{''.join(items)}</details>"


def _claim_row(r: Run, c: dict, titles: dict) -> str:
    verdict = c.get("verdict", "")
    unit = f'<br><span class="muted">{e(c.get("unit"))}</span>' if c.get("unit") else ""
    return (f'<tr class="claim {VERDICT_CLASS.get(verdict, "nc")}" data-claim="{e(c.get("claim_id"))}">'
            f'<td><a href="#exp-{e(r.experiment)}">{e(r.experiment)}</a></td>'
            f"<td>{e(paper_name(c.get('paper'), titles))}<br><span class=\"muted\">{e(c.get('where'))}</span></td>"
            f"<td><code>{e(c.get('claim_id'))}</code> {e(c.get('claim'))}{_details(c)}</td>"
            f'<td class="num">{e(num(c.get("paper_value")) or "—")}{unit}</td>'
            f'<td class="num">{e(_ours(c))}</td><td class="verdict">{e(verdict)}</td>'
            f"<td>{e(c.get('reason'))}</td></tr>")


def summary_table(runs: list[Run], titles: dict) -> str:
    rows = []
    for r in runs:
        if r.folder is None or not r.claims:
            why = "no run yet" if r.folder is None else "no claims yet"
            rows.append(f'<tr class="none" data-experiment="{e(r.experiment)}"><td>'
                        f'<a href="#exp-{e(r.experiment)}">{e(r.experiment)}</a></td><td colspan="6">{why}</td></tr>')
            continue
        rows += [_claim_row(r, c, titles) for c in r.claims]
    widths = (11, 14, 30, 9, 12, 10, 14)
    cols = "".join(f'<col style="width:{w}%">' for w in widths)
    head = ("<tr><th>experiment</th><th>paper, where</th><th>claim</th><th>paper value</th>"
            "<th>our value [95 % CI]</th><th>verdict</th><th>reason</th></tr>")
    return (f'<table id="summary" class="wrap"><colgroup>{cols}</colgroup>\n<thead>{head}</thead>\n<tbody>\n'
            + "\n".join(rows) + "\n</tbody></table>")


def counts_line(runs: list[Run]) -> str:
    counts = {v: 0 for v in VERDICT_ORDER}
    for r in runs:
        for c in r.claims:
            v = c.get("verdict") or "no verdict"
            counts[v] = counts.get(v, 0) + 1
    parts = [verdict_span(v, f"{n} {v}") for v, n in counts.items() if n or v in VERDICT_ORDER]
    missing = [r.experiment for r in runs if not r.claims]
    line = f"{sum(counts.values())} claims: " + ", ".join(parts)
    if missing:
        line += f"; {len(missing)} experiment(s) without claims yet"
    return f"<p>{line}.</p>"


# -- figures and tables -----------------------------------------------------------------------------------------
def caption_of(r: Run, fig: Path) -> tuple[str, str]:
    """(caption, degenerate reason or "") of a figure, from the run's figures/captions.json."""
    entry = r.captions.get(fig.stem)
    if isinstance(entry, dict):
        return str(entry.get("caption") or ""), str(entry.get("degenerate") or "")
    return (str(entry) if entry else ""), ""


def figure_block(r: Run, fig: Path, site_fig: Path, page: Path) -> str:
    caption, degenerate = caption_of(r, fig)
    text = e(caption) if caption else '<span class="muted">no caption from the study</span>'
    img = f'<img src="{href(site_fig, page)}" alt="{e(r.experiment)}: {e(caption or fig.stem)}">'
    if degenerate:
        return (f'<figure class="degenerate"><p><b>{e(fig.stem)}: nothing to show</b> — {e(degenerate)}.</p>'
                f"<details><summary>the figure as drawn</summary>{img}</details>"
                f"<figcaption>{text}</figcaption></figure>")
    return f"<figure>{img}<figcaption><b>{e(fig.stem)}.</b> {text}</figcaption></figure>"


def sanity_table(rows: list[dict]) -> str:
    header = [c for c in SANITY_COLUMNS if any(c in r for r in rows)] or list(rows[0]) if rows else []
    body = []
    for r in rows:
        passed = str(r.get("passed", "")).strip().lower()
        cls = {"true": "ok", "false": "bad"}.get(passed, "")
        cells = [f'<td class="{cls}">{e(r.get(h))}</td>' if h == "passed" else f"<td>{e(num(r.get(h)))}</td>"
                 for h in header]
        body.append("<tr>" + "".join(cells) + "</tr>")
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    return (f'<div class="scroll"><table class="sanity"><thead><tr>{head}</tr></thead><tbody>'
            + "".join(body) + "</tbody></table></div>")


def _table_links(r: Run, site_run: Path, page: Path) -> str:
    items = "".join(f'<li><a href="{href(site_run / "tables" / (p.stem + ".html"), page)}">{e(p.stem)}</a> '
                    f'(<a href="{href(site_run / "tables" / p.name, page)}" download>CSV</a>)</li>' for p in r.tables)
    return f"<h3>Tables</h3><ul>{items}</ul>"


# -- index ------------------------------------------------------------------------------------------------------
def problem_text(problem: str, r: Run) -> str:
    """A problem line with the run folder's machine path cut to ``<exp>/<key>/…`` (the site names no machine path)."""
    return problem.replace(str(r.folder), f"{r.experiment}/{r.key}") if r.folder else problem


def experiment_section(r: Run, site_run: Path | None, index: Path, checkout: Checkout, sweeps: str) -> str:
    out = [f'<section id="exp-{e(r.experiment)}"><h2>{e(r.experiment)}</h2>']
    if r.folder is None or site_run is None:
        out.append('<p class="muted">no run yet (<code>python -m memlab.run experiment='
                   f"{e(r.experiment)}</code>)</p>{sweeps}</section>")
        return "\n".join(out)
    t = r.timing
    ran = f"ran {e(when(t.get('started')))}" + (f", took {e(duration(t['seconds']))}"
                                                 if t.get("seconds") is not None else "")
    flag = provenance.short_flag(r, checkout)
    out.append(f"<p>Run <code>{e(r.key)}</code>: {ran}. {flag}</p>")
    links = [f'<a href="{href(site_run / "run.html", index)}">run page: provenance, config, every table</a>']
    if r.notebook_html:
        links.append(f'<a href="{href(site_run / r.notebook_html.name, index)}">executed notebook (HTML)</a>')
    out.append("<p>" + " · ".join(links) + "</p>")
    if r.problems:
        items = "".join(f"<li>{e(problem_text(p, r))}</li>" for p in r.problems)
        out.append(f'<div class="problem"><p>Files of this run the report could not use (rerun '
                   f'<code>python -m memlab.run experiment={e(r.experiment)}</code>):</p><ul>{items}</ul></div>')
    if not r.has_comparison:
        out.append('<p class="muted">no claims yet (this run has no <code>tables/comparison.csv</code>)</p>')
    elif r.claims:
        verdicts = ", ".join(verdict_span(c.get("verdict"), f"{c.get('claim_id')}: {c.get('verdict')}")
                             for c in r.claims)
        out.append(f"<p>Verdicts: {verdicts}</p>")
    if r.sanity is not None:
        out.append("<h3>Sanity checks</h3>" + (sanity_table(r.sanity) if r.sanity else
                                                '<p class="muted">sanity.csv has no rows</p>'))
    if r.tables:
        out.append(_table_links(r, site_run, index))
    if r.figures:
        out.append("<h3>Figures</h3>")
        out += [figure_block(r, p, site_run / "figures" / p.name, index) for p in r.figures]
    out.append(sweeps + "</section>")
    return "\n".join(out)


def other_runs(others: list[Run], runs_dir: Path, index: Path) -> str:
    """The experiment's other finished runs (by hand, or a sweep's points), newest first: each one's key linking
    to its run page, when it ran, and its verdicts counted."""
    if not others:
        return ""
    rows = []
    for r in others:
        counts = Counter(str(c.get("verdict")) for c in r.claims)
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "no claims"
        page = href(runs_dir / r.folder.name / "run.html", index)
        rows.append(f'<tr><td><a href="{page}"><code>{e(r.key)}</code></a></td>'
                    f"<td>{e(when(r.timing.get('started')))}</td><td>{e(verdicts)}</td></tr>")
    return (f"<h3>Other runs ({len(others)})</h3><p>Besides the run above, these runs of this experiment are in the "
            "results folder (newest first; each page has its config, tables and figures):</p>"
            f"<table><tr><th>run</th><th>ran</th><th>verdicts</th></tr>{''.join(rows)}</table>")


def checkout_text(checkout: Checkout) -> str:
    if checkout.changed is None:
        return "not a git checkout"
    if not checkout.changed:
        return "clean"
    files = ", ".join(checkout.changed)
    if not checkout.dirty:
        return f"clean but for {files}, which make reproduce rewrites"
    return f"dirty: uncommitted changes to {files}"


def numeric_paths(runs: list[Run]) -> str:
    """The numeric path(s) the runs computed on (their run.json): profile, kernels, CPU and instruction sets."""
    seen = set()
    for r in runs:
        num = r.info.get("numerics")  # run.json as read safely (a damaged one is {} and a problem of the run)
        if isinstance(num, dict) and "profile" in num:
            seen.add(f"{num['profile']} — kernels {num.get('kernels')}; CPU {num.get('cpu')} "
                     f"[{', '.join(num.get('isa') or [])}]")
        else:
            seen.add("not recorded (a run older than conf/numerics)")
    return "; ".join(sorted(seen)) or "no runs"


def environment_section(root: Path, runs: list[Run], checkout: Checkout) -> str:
    rows = [("git commit", checkout.commit), ("working tree", checkout_text(checkout)),
            ("dvc.lock", lock_stamp(root)), ("numeric path (as the runs record it)", numeric_paths(runs)),
            ("report built", when(iso(time.time()))),
            ("Python (report builder)", f"{platform.python_version()} ({platform.python_implementation()})"),
            *((f"{name} (report builder)", v) for name, v in package_versions().items()),
            ("CPU count (report builder)", str(os.cpu_count()))]
    env = "".join(f"<tr><th>{e(k)}</th><td><code>{e(v)}</code></td></tr>" for k, v in rows)
    hashes = "".join(f"<tr><td><code>{e(p)}</code></td><td>{e(s)}</td><td><code>{e(m)}</code></td></tr>"
                     for s, p, m in dvc_hashes(root)) or '<tr><td colspan="3">no dvc.lock</td></tr>'
    run_rows = []
    for r in runs:
        if r.folder is None:
            run_rows.append(f'<tr class="none"><td>{e(r.experiment)}</td><td colspan="6">no run yet</td></tr>')
            continue
        t = r.timing
        secs = duration(t["seconds"]) if t.get("seconds") is not None else "?"
        run_rows.append(f"<tr><td>{e(r.experiment)}</td><td>{e(when(t.get('started')))}</td>"
                        f'<td class="num">{e(secs)}</td><td class="num">{e(r.threads if r.threads is not None else "")}'
                        f"</td><td>{e(r.dtypes)}</td><td>{e(t.get('source', ''))}</td>"
                        f"<td>{provenance.short_flag(r, checkout) or 'this commit, clean'}</td></tr>")
    return ("<section id=\"environment\"><h2>Environment</h2>"
            "<p>Each run's own provenance (commit, config hash, numerics, packages, models) is on its run page; "
            "this table describes the checkout and the process that built the report.</p>"
            f'<table class="wrap"><colgroup><col style="width:18em"><col></colgroup>{env}</table>'
            "<h3>Data and model hashes (dvc.lock)</h3>"
            f"<table><tr><th>path</th><th>stage</th><th>md5</th></tr>{hashes}</table>"
            "<h3>Runs</h3><div class=\"scroll\"><table><tr><th>experiment</th><th>started</th><th>took</th>"
            "<th>model threads</th><th>model dtypes</th><th>from</th><th>provenance</th></tr>"
            f"{''.join(run_rows)}</table></div></section>")


def index_page(runs: list[Run], sections: list[str], env: str, checkout: Checkout, titles: dict,
               deviation_links: str) -> str:
    toc = " · ".join(f'<a href="#exp-{e(r.experiment)}">{e(r.experiment)}</a>' for r in runs)
    state = f" (dirty: {', '.join(f for f in checkout.changed or [])})" if checkout.dirty else ""
    verdicts = ", ".join(verdict_span(v) for v in VERDICT_ORDER)
    body = f"""<h1>memlab: the papers' numbers beside ours</h1>
<p>Commit <code>{e(checkout.commit)}</code>{e(state)}. Each row is one published claim (<code>conf/paper/</code>)
judged by a rule written in code on the default run of its experiment: {verdicts}. Open a row's claim for the rule
and the paper's sentence. Each rule states its own interval (Wilson or exact for a proportion, Newcombe's for a
difference of proportions, a bootstrap of a difference kept only where a permutation or sign-flip test agrees;
<code>memlab.metrics.intervals</code>),
at 95 % unless its row says it corrects for several tests. <a href="#environment">Environment</a>.</p>
<p>Departures from each paper's setup: {deviation_links}</p>
<h2 id="summary-heading">Summary</h2>
{counts_line(runs)}
{summary_table(runs, titles)}
<p>Experiments: {toc}</p>
{chr(10).join(sections)}
{env}"""
    return shell(f"memlab report — {checkout.short}{state}", body)


# -- run page ---------------------------------------------------------------------------------------------------
def run_page(r: Run, site_run: Path, index: Path, checkout: Checkout, tables_html: dict[str, str]) -> str:
    """``<exp>/run.html`` (another run's: ``<exp>/runs/<key>/run.html``): provenance, config.yaml, every table inline
    (collapsible), figures with captions."""
    page = site_run / "run.html"
    out = [f"<h1>{e(r.experiment)}: run <code>{e(r.key)}</code></h1>", provenance.section(r, checkout)]
    if (site_run / "config.yaml").exists():
        out.append('<section id="run-config"><h2>Config</h2><p>The resolved config the run was made with: '
                   '<a href="config.html">config.yaml as a page</a> · <a href="config.yaml" download>config.yaml</a>'
                   "</p></section>")
    out.append('<section id="run-tables"><h2>Tables</h2>')
    for p in r.tables:
        out.append(f'<details{" open" if p.stem == "comparison" else ""}><summary>{e(p.stem)} '
                   f'(<a href="{href(site_run / "tables" / (p.stem + ".html"), page)}">page</a> · '
                   f'<a href="{href(site_run / "tables" / p.name, page)}" download>CSV</a>)</summary>'
                   f"{tables_html.get(p.stem, '')}</details>")
    out.append("</section>")
    if r.figures:
        out.append('<section id="run-figures"><h2>Figures</h2>')
        out += [figure_block(r, p, site_run / "figures" / p.name, page) for p in r.figures]
        out.append("</section>")
    return shell(f"{r.experiment} — memlab run", "\n".join(out), href(index, page))


def config_page(r: Run, site_run: Path) -> str:
    """``<exp>/config.html``: the run's config.yaml as text (the run's own content, shown as written)."""
    text = (site_run / "config.yaml").read_text(encoding="utf-8", errors="replace")
    body = (f"<h1>{e(r.experiment)}: config.yaml</h1><p>As the run wrote it "
            f'(<a href="config.yaml" download>download</a>).</p><pre>{e(text)}</pre>')
    return shell(f"{r.experiment} — config.yaml", body, "run.html")


def csv_rows_html(path: Path) -> str:
    """A CSV file as an inline HTML table (for run pages)."""
    import csv

    with path.open(newline="", encoding="utf-8", errors="replace") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    return rows_table(list(reader.fieldnames or []), rows)
