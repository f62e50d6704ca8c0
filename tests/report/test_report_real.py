"""The reproduced report, as a reviewer receives it: run after ``make reproduce`` (which builds results/report/ and
results/report-<commit>.tar.gz) with

    MEMLAB_REPORT_SITE=results/report .venv/bin/python -m pytest -q -p no:xdist tests/report/test_report_real.py

Every page reachable from index.html opens in Chromium with no console error or failed request, every local link
resolves inside the site, every image loads, the summary does not scroll sideways at 1280 px, and no file of the
site or of its archive holds the checkout's absolute path, the home directory or /tmp; the README's pearl_sizes
figure and the numbers its caption states are this reproduction's. Without the variable the tests are skipped: they
check a report that a reproduction built, which the fixture tests (test_site.py) cannot.
"""

from __future__ import annotations

import os
import re
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


# -- the README's pearl_sizes figure and its caption: what this reproduction drew and counted -----------------------
README_FIGURE = "docs/img/pearl_sizes_fpr_by_size.png"
NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5}


def pearl_sizes_caption(readme: str) -> str:
    """The README's caption of the pearl_sizes figure (the paragraph under its image), on one line."""
    after = readme.split(f"]({README_FIGURE})", 1)[1]
    return " ".join(after.strip().split("\n\n", 1)[0].split())


def stated(pattern: str, caption: str) -> tuple[str, ...]:
    """The groups of ``pattern`` in the caption (a caption reworded fails here, naming what it no longer says)."""
    m = re.search(pattern, caption)
    assert m, f"the README's pearl_sizes caption no longer says /{pattern}/ (update it and this test): {caption}"
    return m.groups()


def flagged_column(table, alpha: float) -> str:
    """The column of ``flagged_counts_by_size`` counting the documents flagged at threshold ``alpha``."""
    (col,) = [c for c in table.columns if c.startswith("flagged_") and float(c.rsplit(">", 1)[1]) == alpha]
    return col


def test_the_readmes_pearl_sizes_figure_and_caption_are_this_reproductions(site, repo_root):
    """README.md shows the default pearl_sizes run's figure and states its numbers by hand: the thresholds drawn, the
    held-out non-members per size, the non-members flagged at every threshold and the members each size flags at
    one. Each is read from the README and compared with the run `make reproduce` wrote beside the site."""
    import pandas as pd
    import yaml

    run = site.parent / "pearl_sizes" / "default"
    caption = pearl_sizes_caption((repo_root / "README.md").read_text(encoding="utf-8"))
    assert (repo_root / README_FIGURE).read_bytes() == (run / "figures" / "fpr_vs_threshold_by_size.png").read_bytes()
    alphas = [float(a) for a in stated(r"`params\.alphas=\[([^\]]+)\]`", caption)[0].split(",")]
    assert alphas == list(yaml.safe_load((run / "config.yaml").read_text())["params"]["alphas"])
    flagged = pd.read_csv(run / "tables" / "flagged_counts_by_size.csv").set_index(["split", "size"])
    fpr = pd.read_csv(run / "tables" / "fpr_vs_threshold_by_size.csv")
    (held_out,) = stated(r"FPR on the (\d+) held-out non-members per size", caption)
    assert set(fpr.groupby("size").n.unique().explode()) == {int(held_out)}
    (count,) = stated(r"At each of the (\w+) thresholds no size flags a non-member", caption)
    assert NUMBER_WORDS[count] == len(alphas)
    assert (flagged.loc["nonmember", [flagged_column(flagged, a) for a in alphas]] == 0).all(axis=None)
    alpha, s, m, l, members = stated(r"at ([\d.]+) the sizes flag (\d+) \(s\), (\d+) \(m\) and (\d+) \(l\) of (\d+) "
                                     r"members", caption)
    at = flagged.loc["member", flagged_column(flagged, float(alpha))]
    assert {size: int(at[size]) for size in ("s", "m", "l")} == {"s": int(s), "m": int(m), "l": int(l)}
    scores = pd.read_csv(run / "tables" / "pearl_scores.csv")
    assert set(scores[scores.split == "member"].groupby("size").doc_id.nunique()) == {int(members)}
