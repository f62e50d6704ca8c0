"""Checks of a built report site, shared by the fixture test (test_site.py) and the reproduced-report test
(test_report_real.py): a browser crawl of every page, and a search for machine-specific paths."""

from __future__ import annotations

import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

TIMEOUT_MS = 120_000
WIDTH = 1280  # the summary must not scroll sideways in a window this wide


def own_pages(site: Path) -> list[Path]:
    """The pages memlab.site writes (not the copied executed-notebook HTML)."""
    pages = [site / "index.html", *site.glob("deviations-*.html"), *site.glob("*/run.html"),
             *site.glob("*/tables/*.html"), *site.glob("*/sweeps/*/sweep.html"), *site.glob("*/runs/*/run.html"),
             *site.glob("*/runs/*/tables/*.html")]
    return sorted(p for p in pages if p.exists())


def machine_needles(root: Path) -> list[str]:
    """What must not appear in a shared report: the checkout's absolute path, the home directory, /tmp."""
    needles = {str(root.resolve()), "/tmp/"}
    home = os.path.expanduser("~")
    if len(home) > 1:
        needles.add(home.rstrip("/") + "/")
    return sorted(needles)


def path_hits(files: list[Path], needles: list[str]) -> list[str]:
    hits = []
    for p in files:
        text = p.read_bytes().decode("utf-8", "replace")
        hits += [f"{p.name}: {n}" for n in needles if n in text]
    return hits


def archive_hits(archive: Path, needles: list[str]) -> list[str]:
    hits = []
    with tarfile.open(archive) as tar:
        for m in tar.getmembers():
            hits += [f"member name {m.name}: {n}" for n in needles if n in m.name]
            f = tar.extractfile(m) if m.isfile() else None
            if f is not None:
                text = f.read().decode("utf-8", "replace")
                hits += [f"{m.name}: {n}" for n in needles if n in text]
    return hits


@dataclass
class Crawl:
    pages: list[str] = field(default_factory=list)
    links: int = 0
    images: int = 0
    errors: list[str] = field(default_factory=list)
    summary_overflow: int | None = None   # px the summary (or the index) is wider than the window


def crawl(browser, site: Path) -> Crawl:
    """Open every page reachable from index.html in Chromium (from file://, a 1280 px window): every local link
    resolves to a file in the site, every fragment to an element, every image loads, no console error, no failed
    request; measures how far the index scrolls sideways."""
    site = site.resolve()
    out = Crawl()
    queue, seen = [site / "index.html"], set()
    page = browser.new_page(viewport={"width": WIDTH, "height": 900})
    page.on("console", lambda m: out.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda err: out.errors.append(f"page error: {err}"))
    page.on("requestfailed", lambda r: out.errors.append(f"request failed: {r.url} {r.failure}"))
    try:
        while queue:
            current = queue.pop(0)
            if current in seen:
                continue
            seen.add(current)
            out.pages.append(current.relative_to(site).as_posix())
            page.goto(current.as_uri(), wait_until="load", timeout=TIMEOUT_MS)
            queue += _check_links(page, current, site, out)
            _check_images(page, current, site, out)
            if current == site / "index.html":
                out.summary_overflow = page.evaluate(
                    "() => Math.max(document.documentElement.scrollWidth - window.innerWidth,"
                    " (s => s ? s.getBoundingClientRect().right - window.innerWidth : 0)"
                    "(document.getElementById('summary')))")
    finally:
        page.close()
    return out


def _check_links(page, current: Path, site: Path, out: Crawl) -> list[Path]:
    nxt = []
    own = current in own_pages(site)
    for raw, absolute in page.eval_on_selector_all("a[href]", "as => as.map(a => [a.getAttribute('href'), a.href])"):
        out.links += 1
        where = f"{current.relative_to(site)}: {raw}"
        if raw.startswith("#"):
            # as a browser does: the fragment as written (nbconvert's ids keep %-escapes) or decoded
            found = page.evaluate("ids => ids.some(i => document.getElementById(i) !== null)",
                                  [raw[1:], unquote(raw[1:])])
            if raw != "#" and not found:
                out.errors.append(f"fragment names no element: {where}")
            continue
        url = urlparse(absolute)
        if url.scheme != "file":
            if own:  # our pages link nothing outside the folder; a notebook's prose may cite a web page
                out.errors.append(f"link outside the site: {where}")
            continue
        target = Path(unquote(url.path))
        if not (target.is_file() and site in target.resolve().parents):
            out.errors.append(f"broken link: {where}")
        elif target.suffix == ".html":
            nxt.append(target.resolve())
    return nxt


def _check_images(page, current: Path, site: Path, out: Crawl) -> None:
    images = page.eval_on_selector_all("img", "is => is.map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])")
    for src, complete, width in images:
        out.images += 1
        if not (complete and width > 0):
            out.errors.append(f"image does not load: {current.relative_to(site)}: {str(src)[:80]}")
