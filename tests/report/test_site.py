"""The reviewer report site (``make report`` → ``python -m memlab.site``), opened in a real browser.

A real tiny run of the demo (``memlab.run.execute`` on ``memorization_curve`` with a test zoo, W&B offline) plus one
synthetic run folder whose comparison table holds all three verdicts; the site built from them is opened from
``file://`` in Debian's chromium: every link resolves to a file, every image loads, one summary row per claim,
no console errors; the archive untars to the same files.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from memlab.site import build

TIMEOUT_MS = 120_000
SYNTHETIC = "synthetic_three_verdicts"
COLUMNS = ["claim_id", "paper", "where", "claim", "paper_value", "unit", "our_value", "ci_low", "ci_high", "setting",
           "verdict", "reason"]


@pytest.fixture(scope="module")
def results(tmp_path_factory, zoo_builder, two_chapter_family):
    """A results folder: the demo's real default run (key ``default``) + one synthetic run with three verdicts."""
    zoo = zoo_builder(tmp_path_factory.mktemp("zoo"), two_chapter_family)
    root = tmp_path_factory.mktemp("results")
    results = root / "results"
    overrides = [f"paths.zoo={zoo / 'conf'}", f"paths.models={zoo / 'models'}", f"paths.results={results}",
                 f"paths.cache={zoo / 'cache'}", f"logger.dir={root}", "params.family=micro", "params.n_probes=6",
                 "params.prefix_len=8", "params.cont_len=8", "params.epoch_every=1"]
    code = textwrap.dedent(f"""
        from memlab.config import compose
        from memlab.run import execute
        execute(compose("memorization_curve", {overrides!r}), "default")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    _synthetic_run(results / SYNTHETIC / "default", results / "memorization_curve" / "default")
    return results


def _synthetic_run(folder: Path, real: Path) -> None:
    (folder / "tables").mkdir(parents=True)
    (folder / "figures").mkdir()
    rows = [["syn_ok", "003_pearl", "Fig. 1", "a claim that holds", "0.2", "share", "0.31", "0.2", "0.4",
             "tiny model, n=6", "reproduced", "members above non-members"],
            ["syn_bad", "003_pearl", "Table 2", "a claim that fails, with <b>markup</b> & an ampersand", "2.35",
             "ratio", "0.9", "", "", "tiny model", "not reproduced", "the ratio is below 1"],
            ["syn_nc", "000_recap", "Table 3", "a claim about another model", "", "", "", "", "", "GPT-4.1 only",
             "not comparable", "we run tiny models"]]
    with (folder / "tables" / "comparison.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        w.writerows(rows)
    (folder / "tables" / "other table.csv").write_text("a,b\n1,2\n")  # a name that needs URL quoting
    png = next((real / "figures").glob("*.png"))
    (folder / "figures" / "curve.png").write_bytes(png.read_bytes())
    (folder / f"{SYNTHETIC}.html").write_text("<!DOCTYPE html><html><body><p>executed notebook</p></body></html>")
    (folder / "metrics.json").write_text(json.dumps({"verdict/syn_ok": "reproduced"}) + "\n")
    (folder / "config.yaml").write_text("model:\n  threads: 1\n")


def _claims(results: Path) -> list[dict]:
    out = []
    for p in sorted(results.glob("*/default/tables/comparison.csv")):
        with p.open(newline="") as f:
            out += list(csv.DictReader(f))
    return out


@pytest.fixture(scope="module")
def site(results):
    index, archive, runs = build(results, results / "report")
    return index, archive, runs


def test_real_run_records_timing_and_has_claims(results):
    run = results / "memorization_curve" / "default"
    info = json.loads((run / "run.json").read_text())
    assert info["key"] == "default" and info["seconds"] > 0 and info["started"].endswith("+00:00")
    assert info["threads"] == {"kjv": 1}  # the demo's family, at the tiny-neox template's threads
    assert info["dtypes"] == {"kjv": "float32"}  # its weight dtype as loaded
    with (run / "tables" / "comparison.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and list(rows[0]) == COLUMNS
    assert all(r["verdict"] in ("reproduced", "not reproduced", "not comparable") for r in rows)


def test_wandb_summary_carries_the_verdicts(results):
    run = results / "memorization_curve" / "default"
    with (run / "tables" / "comparison.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    (offline,) = (results.parent / "wandb").glob("offline-run-*")
    logged = b"".join(p.read_bytes() for p in offline.rglob("*.wandb"))
    for r in rows:  # a summary item: the key, then its value as JSON (the verdict string)
        item = re.escape(f"verdict/{r['claim_id']}".encode()) + rb".{1,8}" + re.escape(json.dumps(r["verdict"]).encode())
        assert re.search(item, logged, re.DOTALL), r["claim_id"]
    assert b"table/comparison" in logged


def test_site_in_a_real_browser(site, results, chromium_browser):
    index, archive, runs = site
    claims = _claims(results)
    assert len(claims) >= 4  # the demo's claim(s) + the three synthetic ones
    page = chromium_browser.new_page()
    errors: list[str] = []
    index_errors = ["not reached"]
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url} {r.failure}"))
    try:
        page.goto(index.resolve().as_uri(), wait_until="load", timeout=TIMEOUT_MS)
        # one summary row per claim, in file order per experiment
        ids = page.eval_on_selector_all("#summary tbody tr.claim", "rs => rs.map(r => r.dataset.claim)")
        assert sorted(ids) == sorted(c["claim_id"] for c in claims)
        # every experiment of conf/ (and the synthetic one) appears; those without claims in a visible row
        from memlab.config import experiment_names

        shown = set(page.eval_on_selector_all("#summary tbody tr td:first-child a", "as => as.map(a => a.textContent)"))
        assert shown >= {*experiment_names(), SYNTHETIC}
        empty = page.locator("#summary tbody tr.none")
        assert empty.count() == len(shown) - len({r.experiment for r in runs if r.claims})
        for i in range(empty.count()):
            assert empty.nth(i).is_visible()
            assert empty.nth(i).inner_text().split("\t")[-1].strip() in ("no claims yet", "no run yet")
        # coloured by verdict: three distinct backgrounds
        colours = {v: page.eval_on_selector(f'#summary tr[data-claim="{cid}"] td.verdict',
                                            "td => getComputedStyle(td).backgroundColor")
                   for cid, v in (("syn_ok", "ok"), ("syn_bad", "bad"), ("syn_nc", "nc"))}
        assert len(set(colours.values())) == 3, colours
        # text is escaped, not interpreted
        assert "<b>markup</b> & an ampersand" in page.inner_text('#summary tr[data-claim="syn_bad"]')
        # every link resolves: files exist in the site folder, fragments name an element of the page
        hrefs = page.eval_on_selector_all("a[href]", "as => as.map(a => [a.getAttribute('href'), a.href])")
        assert len(hrefs) > 10
        for raw, absolute in hrefs:
            if raw.startswith("#"):
                assert page.locator(f"[id='{raw[1:]}']").count() == 1, raw
                continue
            url = urlparse(absolute)
            assert url.scheme == "file", raw  # offline: nothing outside the folder
            target = Path(unquote(url.path))
            assert target.is_file() and index.parent.resolve() in target.resolve().parents, raw
        # every image is loaded
        images = page.eval_on_selector_all("img", "is => is.map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])")
        assert len(images) >= 2
        for src, complete, width in images:
            assert complete and width > 0, src
        # the environment section
        env = page.inner_text("#environment")
        for needle in ("git commit", "torch", "transformers", "hydra-core", "papermill", "dvc", "wandb", "pandas",
                       "CPU count", "torch threads", "data/corpora"):
            assert needle in env, needle
        assert "run.json" in env  # the demo's timing comes from run.json
        index_errors = list(errors)
        # the linked executed notebook opens
        page.click(f"#exp-memorization_curve a:has-text('executed notebook')", timeout=TIMEOUT_MS)
        page.wait_for_load_state("load", timeout=TIMEOUT_MS)
        assert page.url.endswith("memorization_curve/memorization_curve.html")
    finally:
        page.close()
    assert not index_errors, index_errors  # the index page: no console errors, no failed requests


def test_site_holds_only_run_outputs(site):
    index, _, _ = site
    kinds = {p.suffix for p in index.parent.rglob("*") if p.is_file()}
    assert kinds <= {".html", ".png", ".csv", ".json"}, kinds  # figures, tables, metrics, notebook HTML
    assert "<script" not in index.read_text() and "http://" not in index.read_text() \
        and "https://" not in index.read_text()


def test_archive_untars_to_the_same_files(site, tmp_path):
    index, archive, _ = site
    site_dir = index.parent
    assert archive.name.startswith("report-") and archive.name.endswith(".tar.gz") and archive.parent == site_dir.parent
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="data")
    out = tmp_path / site_dir.name
    files = lambda d: {p.relative_to(d).as_posix(): p.read_bytes() for p in d.rglob("*") if p.is_file()}  # noqa: E731
    assert files(out) == files(site_dir)


def test_missing_chromium_fails_in_one_line_naming_make_setup(find_chromium, monkeypatch, tmp_path):
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    with pytest.raises(pytest.fail.Exception) as err:
        find_chromium(tmp_path / "no-chromium")
    msg = str(err.value)
    assert "\n" not in msg and "make setup" in msg and "chromium" in msg


def test_a_rebuild_keeps_one_archive(site, results):
    index, archive, _ = site
    stale = archive.with_name("report-0000000.tar.gz")
    stale.write_bytes(archive.read_bytes())
    _, again, _ = build(results, results / "report")
    assert again.exists() and not stale.exists()
    assert sorted(p.name for p in archive.parent.glob("report-*.tar.gz")) == [again.name]
