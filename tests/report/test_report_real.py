"""The reproduced report, as a reviewer receives it: run after ``make reproduce`` (which builds results/report/ and
results/report-<commit>.tar.gz) with

    MEMLAB_REPORT_SITE=results/report .venv/bin/python -m pytest -q -p no:xdist tests/report/test_report_real.py

Every page reachable from index.html opens in Chromium with no console error or failed request, every local link
resolves inside the site, every image loads, the summary does not scroll sideways at 1280 px, and no file of the
site or of its archive holds the checkout's absolute path, the home directory or /tmp. Without the variable the
tests are skipped: they check a report that a reproduction built, which the fixture tests (test_site.py) cannot.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SITE = os.environ.get("MEMLAB_REPORT_SITE")
pytestmark = pytest.mark.skipif(not SITE, reason="set MEMLAB_REPORT_SITE=results/report after `make reproduce`")


@pytest.fixture(scope="module")
def site() -> Path:
    path = Path(SITE).resolve()
    if not (path / "index.html").is_file():
        pytest.fail(f"MEMLAB_REPORT_SITE={SITE} has no index.html: build it with `make report`", pytrace=False)
    return path


@pytest.fixture(scope="module")
def archive(site) -> Path:
    found = sorted(site.parent.glob(f"{site.name}-*.tar.gz"))
    if len(found) != 1:
        pytest.fail(f"expected one {site.name}-<commit>.tar.gz beside {site}, found {len(found)}", pytrace=False)
    return found[0]


def test_every_page_link_and_image(site, chromium_browser, sitecheck):
    found = sitecheck.crawl(chromium_browser, site)
    assert not found.errors, found.errors[:20]
    notebooks = [p for p in found.pages if p.count("/") == 1 and not p.endswith(("/run.html", "/config.html"))]
    assert notebooks, found.pages  # the executed notebooks were reached
    assert found.summary_overflow is not None and found.summary_overflow <= 0, found.summary_overflow


def test_no_machine_path_in_the_site(site, sitecheck):
    from memlab.config import repo_root

    files = [p for p in site.rglob("*") if p.is_file()]
    hits = sitecheck.path_hits(files, sitecheck.machine_needles(repo_root()))
    assert not hits, hits[:20]


def test_no_machine_path_in_the_archive(archive, sitecheck):
    from memlab.config import repo_root

    hits = sitecheck.archive_hits(archive, sitecheck.machine_needles(repo_root()))
    assert not hits, hits[:20]


def test_every_run_shows_its_provenance(site):
    for run in sorted(site.glob("*/run.html")):
        text = run.read_text(encoding="utf-8")
        assert 'id="provenance"' in text and "<th>commit</th>" in text, run  # run.json's fields, its commit first
