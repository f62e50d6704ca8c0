"""The reviewer report site (``make report`` → ``python -m memlab.site``), opened in a real browser.

A real tiny run of the demo (``memlab.runner.execute.execute`` on ``memorization_curve`` with a test zoo, W&B offline) plus one
synthetic run folder whose comparison table holds every verdict (today's and the older vocabulary), the optional
columns (rule, paper's sentence), a sanity table, a run.json from another commit and a degenerate figure; the site
built from them is opened from ``file://`` in Debian's chromium at 1280 px: every page, link and image, one summary
row per claim, no sideways scroll, no console errors; no machine path in our pages or the archive; the archive
untars to the same files.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from memlab.site import build

TIMEOUT_MS = 120_000
SYNTHETIC = "synthetic_verdicts"
OTHER_KEY = "alphas=[0.1,0.3],seed=1"   # another run of it: the site lists it and gives it a page
OLD_AND_NEW = ("reproduced", "contradicted", "inconclusive", "not testable here", "not reproduced", "not comparable")
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
        from memlab.runner.execute import execute
        execute(compose("memorization_curve", {overrides!r}), "default")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    _synthetic_run(results / SYNTHETIC / "default", results / "memorization_curve" / "default")
    _synthetic_run(results / SYNTHETIC / OTHER_KEY, results / "memorization_curve" / "default")  # a run by hand
    return results


def _synthetic_run(folder: Path, real: Path) -> None:
    (folder / "tables").mkdir(parents=True)
    (folder / "figures").mkdir()
    rows = [["syn_ok", "003_pearl", "Fig. 1", "a claim that holds", "0.2", "share", "0.31", "0.2", "0.4",
             "tiny model, n=6", "reproduced", "members above non-members",
             "H1: members are flagged more often than non-members; reproduced when the interval excludes 0.",
             "4.3 RQ1: \"PEARL flags an order of magnitude more members\""],
            ["syn_bad", "003_pearl", "Table 2", "a claim that fails, with <b>markup</b> & an ampersand", "2.35",
             "ratio", "0.9", "", "", "tiny model", "contradicted", "the ratio is below 1", "", ""],
            ["syn_inc", "002_propme", "Table 1", "a claim with too few samples", "0.5", "share", "0.4", "0.1",
             "0.7", "n=6", "inconclusive", "the interval holds both", "", ""],
            ["syn_nc", "000_recap", "Table 3", "a claim about another model", "", "", "", "", "", "GPT-4.1 only",
             "not testable here", "we run tiny models", "", ""],
            ["syn_old", "000_recap", "Table 3", "an older run's verdict", "", "", "", "", "", "",
             "not comparable", "older vocabulary", "", ""]]
    with (folder / "tables" / "comparison.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*COLUMNS, "rule", "paper_quote"])
        w.writerows(rows)
    (folder / "tables" / "sanity.csv").write_text(
        "check_id,check,value,control,control_value,passed,reason\n"
        "members_vs_shuffled,members flagged,0.5,shuffled text,0.0,true,control flags none\n"
        "base_model,base model flags members,0.4,,,false,the base model already memorized\n")
    (folder / "run.json").write_text(json.dumps({"commit": "0" * 40, "dirty": True, "dirty_files": ["conf/x.yaml"],
                                                 "config_sha256": "f" * 64, "seed": 0, "started": "2026-01-01T00:00:00+00:00",
                                                 "seconds": 3.0, "numerics": {"cpu": "test cpu", "isa": "avx2"},
                                                 "packages": {"torch": "0"}, "models": {}}))
    (folder / "tables" / "other table.csv").write_text("a,b\n1,2\n")  # a name that needs URL quoting
    png = next((real / "figures").glob("*.png"))
    (folder / "figures" / "curve.png").write_bytes(png.read_bytes())
    (folder / "figures" / "flat.png").write_bytes(png.read_bytes())
    (folder / "figures" / "captions.json").write_text(json.dumps(
        {"curve": {"caption": "share flagged vs epoch, n = 6"},
         "flat": {"caption": "feedback gain per round", "degenerate": "every plotted value is 0 (4 points)"}}))
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


def test_real_run_records_timing_provenance_and_its_sanity_checks(results):
    """The demo's claims are all sanity checks of the setup (members extractable, non-members not): they go to
    sanity.csv, not to comparison.csv; run.json records when, what and on which numeric path."""
    run = results / "memorization_curve" / "default"
    info = json.loads((run / "run.json").read_text())
    assert info["key"] == "default" and info["seconds"] > 0 and info["started"].endswith("+00:00")
    # the family that ran (params.family=micro of the test zoo at paths.zoo), at the tiny-neox template's threads
    assert info["numerics"]["threads"] == {"micro": 1}
    assert info["numerics"]["dtypes"] == {"micro": "float32"}  # its weight dtype as loaded
    assert info["numerics"]["profile"] == "pinned" and info["config_sha256"] and info["commit"]
    assert info["packages"]["torch"] and set(info["debian"]) >= {"bible-kjv", "fortunes"}
    assert not (run / "tables" / "comparison.csv").exists()
    with (run / "tables" / "sanity.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and {"check_id", "passed"} <= set(rows[0])


def test_wandb_run_carries_the_tables_and_the_verdicts_of_a_run(results, tmp_path):
    """The demo's W&B run (offline) logs its tables, sanity checks included; the verdicts it would log come from
    comparison.csv (checked on the synthetic run's table, the one with claims)."""
    from memlab.wandb_log import verdicts as comparison_verdicts

    (offline,) = (results.parent / "wandb").glob("offline-run-*")
    logged = b"".join(p.read_bytes() for p in offline.rglob("*.wandb"))
    assert b"table/sanity" in logged
    verdicts = comparison_verdicts({}, results / SYNTHETIC / "default")
    assert verdicts and all(k.startswith("verdict/") and v in OLD_AND_NEW for k, v in verdicts.items())


def test_every_page_link_and_image_in_a_real_browser(site, chromium_browser, sitecheck):
    index, _, _ = site
    found = sitecheck.crawl(chromium_browser, index.parent)
    assert not found.errors, found.errors[:10]
    pages = set(found.pages)
    assert {"index.html", f"{SYNTHETIC}/run.html", f"{SYNTHETIC}/tables/comparison.html",
            f"{SYNTHETIC}/tables/other table.html", "memorization_curve/memorization_curve.html",
            "deviations-003_pearl.html", f"{SYNTHETIC}/runs/{OTHER_KEY}/run.html",
            f"{SYNTHETIC}/runs/{OTHER_KEY}/tables/comparison.html"} <= pages, sorted(pages)
    assert found.images >= 3 and found.links > 30
    assert found.summary_overflow is not None and found.summary_overflow <= 0, found.summary_overflow


def test_index_in_a_real_browser(site, results, chromium_browser):
    index, _, runs = site
    claims = _claims(results)
    page = chromium_browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(index.resolve().as_uri(), wait_until="load", timeout=TIMEOUT_MS)
        ids = page.eval_on_selector_all("#summary tbody tr.claim", "rs => rs.map(r => r.dataset.claim)")
        assert sorted(ids) == sorted(c["claim_id"] for c in claims)
        from memlab.config import experiment_names

        shown = set(page.eval_on_selector_all("#summary tbody tr td:first-child a", "as => as.map(a => a.textContent)"))
        assert shown >= {*experiment_names(), SYNTHETIC}
        empty = page.locator("#summary tbody tr.none")
        assert empty.count() == len(shown) - len({r.experiment for r in runs if r.claims})
        for i in range(empty.count()):
            assert empty.nth(i).inner_text().split("\t")[-1].strip() in ("no claims yet", "no run yet")
        colours = {cid: page.eval_on_selector(f'#summary tr[data-claim="{cid}"] td.verdict',
                                              "td => getComputedStyle(td).backgroundColor")
                   for cid in ("syn_ok", "syn_bad", "syn_inc", "syn_nc")}
        assert len(set(colours.values())) == 4, colours
        assert "<b>markup</b> & an ampersand" in page.inner_text('#summary tr[data-claim="syn_bad"]')
        row = page.locator('#summary tr[data-claim="syn_ok"]')
        assert "Memorization or Interpolation?" in row.inner_text()  # the paper by title (conf/paper)
        assert not row.locator("blockquote").first.is_visible()
        row.locator("details summary").click()
        opened = row.inner_text()
        assert "H1: members are flagged" in opened and "4.3 RQ1" in opened
        section = page.inner_text(f"#exp-{SYNTHETIC}")
        assert "Sanity checks" in section and "members_vs_shuffled" in section
        assert "made at commit 0000000" in section  # the stale run.json is flagged
        assert "nothing to show" in section and "share flagged vs epoch, n = 6" in section
        assert page.locator(f"#exp-{SYNTHETIC} table.sanity td.bad").count() == 1
        assert "Other runs (1)" in section and OTHER_KEY in section  # a run by hand reaches the report
        assert "1 contradicted, 1 inconclusive, 1 not comparable, 1 not testable here, 1 reproduced" in section
        env = page.inner_text("#environment")
        for needle in ("git commit", "working tree", "numpy", "scikit-learn", "data/corpora"):
            assert needle in env, needle
        page.goto((index.parent / SYNTHETIC / "run.html").as_uri(), wait_until="load", timeout=TIMEOUT_MS)
        prov = page.inner_text("#run-provenance")
        assert "made with uncommitted changes (conf/x.yaml)" in prov and "numerics.isa" in prov
        assert "config.yaml" in page.inner_text("#run-config")
        assert page.locator("#run-tables table").count() == 3  # comparison, sanity, other table
    finally:
        page.close()


def test_no_machine_path_in_our_pages_or_their_archive(site, sitecheck):
    from memlab.config import repo_root

    index, archive, _ = site
    needles = sitecheck.machine_needles(repo_root())
    pages = sitecheck.own_pages(index.parent)
    assert len(pages) >= 8
    assert not sitecheck.path_hits(pages, needles)
    ours = {p.relative_to(index.parent.parent).as_posix() for p in pages}
    assert not [h for h in sitecheck.archive_hits(archive, needles) if h.split(":")[0] in ours]
    # the copied run files too: the real run's config.yaml names its zoo and cache under pytest's /tmp folder
    copied = [p for p in index.parent.rglob("*") if p.suffix in (".json", ".yaml", ".csv", ".html")]
    assert any(p.name == "config.yaml" for p in copied)
    assert not sitecheck.path_hits(copied, needles)


def test_a_path_outside_the_checkout_keeps_only_its_last_component(tmp_path):
    """A GGUF given as model.path, the user's cache, the file a server reported: cut to …/<name> in every text
    file; URLs, relative links, fractions and the checkout's own paths (made relative) are kept."""
    from memlab.config import repo_root
    from memlab.site.build import no_machine_paths

    root = repo_root()
    (tmp_path / "run.json").write_text(json.dumps({"models": {"llama-cpp": (
        "served local at http://127.0.0.1:8080/v1 (server lists /srv/models/SmolLM2.Q4_1.gguf; file "
        f"{tmp_path}/gguf/SmolLM2.Q4_1.gguf)")}}))
    (tmp_path / "config.yaml").write_text(f"model:\n  path: /home/someone/m.gguf\npaths:\n  results: {root}/results\n")
    inline = ('<img src="data:image/png;base64,iVBORw0KGgo+/9j/4AAQSk+/Zm9v/YmFy=">'   # base64 holds "+/x/y"
              '<img src="data:image/jpeg;base64,/9j/4AAQSkZJRg/AB/Cg==">')        # and may start with "/x/y"
    (tmp_path / "run.html").write_text(f'<td>4/10 · 0.5 tok/s · <a href="../x/run.html">x</a></td>{inline}')
    no_machine_paths(tmp_path, root)
    assert "served local at http://127.0.0.1:8080/v1 (server lists …/SmolLM2.Q4_1.gguf; file …/SmolLM2.Q4_1.gguf)" in (
        tmp_path / "run.json").read_text()
    assert (tmp_path / "config.yaml").read_text() == "model:\n  path: …/m.gguf\npaths:\n  results: results\n"
    assert (tmp_path / "run.html").read_text() == f'<td>4/10 · 0.5 tok/s · <a href="../x/run.html">x</a></td>{inline}'


def test_site_holds_only_run_outputs(site, sitecheck):
    index, _, _ = site
    kinds = {p.suffix for p in index.parent.rglob("*") if p.is_file()}
    assert kinds <= {".html", ".png", ".csv", ".json", ".yaml"}, kinds  # + the runs' config.yaml
    for p in sitecheck.own_pages(index.parent):
        text = p.read_text()
        assert "<script" not in text and "http://" not in text and "https://" not in text, p


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


def test_a_table_with_an_infinite_value_renders_it_as_infinity(tmp_path):
    """A per-document log-probability can be −∞ (a suffix the sampler can never emit: mia_low_fpr's extraction
    table); its page shows −∞ instead of failing the whole site (CI73's make reproduce stopped there)."""
    from memlab.site.markup import csv_page, num

    assert (num("-inf"), num("inf"), num("nan"), num("2.0"), num("0.12345")) == ("−∞", "∞", "", "2", "0.1235")
    table = tmp_path / "extraction.csv"
    table.write_text("split,median_log10_p_z\nmember,-inf\nnonmember,-3.5\n")
    page = csv_page(table, "extraction", "index.html")
    assert "−∞" in page and "-3.5" in page
