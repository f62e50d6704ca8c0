"""Building the site folder and its archive (``python -m memlab.site``)."""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tarfile
from pathlib import Path

from memlab.errors import MemlabError, one_line_errors
from memlab.site import deviations, sweep_pages
from memlab.site.data import (COPIED, Checkout, Run, experiments, finished_folders, git_state, paper_titles, read_lock,
                              read_run)
from memlab.site.markup import csv_page, e, href
from memlab.site.pages import (config_page, csv_rows_html, environment_section, experiment_section, index_page,
                               other_runs, run_page)


def _copy_run(r: Run, dest: Path) -> None:
    assert r.folder is not None
    for pattern in COPIED:
        for src in sorted(r.folder.glob(pattern)):
            target = dest / src.relative_to(r.folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    if r.notebook_html:
        shutil.copy2(r.notebook_html, dest / r.notebook_html.name)


def _table_pages(r: Run, site_run: Path) -> dict[str, str]:
    """Write ``tables/<name>.html`` beside each CSV; return each table's inline HTML for the run page."""
    inline = {}
    for p in r.tables:
        page = site_run / "tables" / f"{p.stem}.html"
        title = f"{r.experiment}: {p.stem}"
        page.write_text(csv_page(site_run / "tables" / p.name, title, href(site_run / "run.html", page)),
                        encoding="utf-8")
        inline[p.stem] = csv_rows_html(site_run / "tables" / p.name)
    return inline


def _deviation_pages(conf: Path, work: Path, titles: dict) -> str:
    """Write one page per paper's deviations; return the index's links to them."""
    links = []
    for paper, entries in deviations.load(conf).items():
        title = titles.get(paper, {}).get("title") or paper
        (work / deviations.file_name(paper)).write_text(deviations.page(paper, title, entries), encoding="utf-8")
        links.append(f'<a href="{e(deviations.file_name(paper))}">{e(title)}</a> ({len(entries)})')
    return " · ".join(links) or '<span class="muted">none listed (conf/deviations/)</span>'


# an absolute path outside the checkout (a GGUF, a cache, a server's file): not after a word, a dot, a colon (a URL),
# a slash, or base64's + and =; a data: URI (a notebook's inline image) is matched first and kept whole
ABSOLUTE_PATH = re.compile(r"(data:[^\s\"')<>]+)|(?<![\w.:/~+=-])/(?:[\w.@+-]+/)+([\w.@+-]+)")
TEXT_SUFFIXES = (".html", ".json", ".yaml", ".csv")


def _cut(m: re.Match) -> str:
    return m.group(1) or f"…/{m.group(2)}"


def no_machine_paths(site: Path, root: Path) -> None:
    """Every text file of the site without a machine path: the checkout's made relative, any other absolute path
    cut to ``…/<its last component>`` (a model file outside the checkout, the user's cache, what a server reported);
    a shared report names no folder of the machine it was made on."""
    from memlab.provenance import portable

    for p in sorted(site.rglob("*")):
        if p.is_file() and p.suffix in TEXT_SUFFIXES:
            text = p.read_bytes().decode("utf-8", "surrogateescape")   # a damaged file keeps its bytes
            clean = ABSOLUTE_PATH.sub(_cut, portable(text, str(root.resolve())))
            if clean != text:
                p.write_bytes(clean.encode("utf-8", "surrogateescape"))


def _run_pages(r: Run, site_run: Path, index: Path, checkout: Checkout) -> None:
    """Copy a run into the site and write its run page, a page per table and its config page."""
    _copy_run(r, site_run)
    tables = _table_pages(r, site_run)
    (site_run / "run.html").write_text(run_page(r, site_run, index, checkout, tables), encoding="utf-8")
    if (site_run / "config.yaml").exists():
        (site_run / "config.html").write_text(config_page(r, site_run), encoding="utf-8")


def _write_site(results: Path, work: Path, root: Path, checkout: Checkout) -> list[Run]:
    runs = [read_run(results, name) for name in experiments(results)]
    titles = paper_titles(root / "conf")
    index = work / "index.html"
    sections = []
    for r in runs:
        site_run = None
        if r.folder is not None:
            site_run = work / r.experiment
            _run_pages(r, site_run, index, checkout)
        others = []  # every other finished run (a run by hand, a sweep's points): a page each, listed under the shown one
        for folder in finished_folders(results, r.experiment):
            if folder != r.folder:
                other = read_run(results, r.experiment, folder)
                _run_pages(other, work / r.experiment / "runs" / folder.name, index, checkout)
                others.append(other)
        listed = other_runs(others, work / r.experiment / "runs", index)
        sweeps = sweep_pages.section(results, r.experiment, work, index)
        sections.append(experiment_section(r, site_run, index, checkout, listed + sweeps))
    links = _deviation_pages(root / "conf", work, titles)
    env = environment_section(root, runs, checkout)
    index.write_text(index_page(runs, sections, env, checkout, titles, links), encoding="utf-8")
    return runs


def build(results: Path, out: Path, root: Path | None = None) -> tuple[Path, Path, list[Run]]:
    """Build the site into ``out`` (replaced whole) and its archive beside it; returns (index.html, archive, the
    runs shown)."""
    from memlab.config import repo_root

    root = root or repo_root()
    results, out = Path(results), Path(out)
    if out.resolve() in (results.resolve(), root.resolve()) or out.resolve() in results.resolve().parents:
        raise MemlabError(f"--out {out} would replace {results}; pick a folder of its own (default results/report)")
    read_lock(root)  # a corrupt dvc.lock is one line before anything is written
    checkout = git_state(root)
    work = out.with_name(f".{out.name}.partial")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    runs = _write_site(results, work, root, checkout)
    no_machine_paths(work, root)
    if out.exists():
        if not (out / "index.html").exists() and any(out.iterdir()):
            shutil.rmtree(work, ignore_errors=True)
            raise MemlabError(f"{out} exists and is not a report folder (no index.html); remove it or pick --out")
        shutil.rmtree(out)
    work.rename(out)
    archive = out.with_name(f"{out.name}-{checkout.short}.tar.gz")
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

    ap = argparse.ArgumentParser(prog="python -m memlab.site", description="Build the reviewer report site.")
    ap.add_argument("--results", default=None, help="the results folder (default: results/ of the checkout)")
    ap.add_argument("--out", default=None, help="the site folder (default: <results>/report)")
    args = ap.parse_args(argv)
    results = Path(args.results) if args.results else repo_root() / "results"
    out = Path(args.out) if args.out else results / "report"
    index, archive, runs = build(results, out)
    n_claims = sum(len(r.claims) for r in runs)
    for r in runs:
        for problem in r.problems:
            print(f"memlab: warning: report: {problem} (rerun: python -m memlab.run experiment={r.experiment})",
                  file=sys.stderr)
    print(f"memlab: report in {index} ({n_claims} claims, {len(runs)} experiments; open it in a browser: "
          f"file://{index.resolve()}); archive {archive}", file=sys.stderr)
