"""Sweeps as results (memlab.runner.sweeps): synthetic run folders at the keys the runner gives a sweep's points; the
summary table has one row per point (a missing point marked), the figure draws each claim's value with its
interval vs the swept key, and the report site shows the sweep with its table as a page."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest

from memlab.runner.keys import run_key
from memlab.runner.keys import sweep_key
from memlab.runner.sweeps import expand, summarize

OVERRIDES = ["experiment=pearl_mia", "params.target_fpr=0.05,0.1,0.2", "params.min_k=0.1,0.2"]


def _point(results: Path, point: list[str], value: float) -> None:
    folder = results / "pearl_mia" / run_key(point)
    (folder / "tables").mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"auc": value, "constant": 1.0, "verdict/c1": "reproduced"}))
    with (folder / "tables" / "comparison.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["claim_id", "our_value", "ci_low", "ci_high", "verdict"])
        w.writerow(["c1", value, value - 0.05, value + 0.05, "reproduced" if value > 0.5 else "inconclusive"])


@pytest.fixture()
def swept(tmp_path):
    results = tmp_path / "results"
    _, points = expand(OVERRIDES)
    for i, point in enumerate(points[:-1]):  # the last point "failed": no folder
        _point(results, point, 0.3 + 0.1 * i)
    return results, points


def test_expand_is_hydras_product():
    swept, points = expand(OVERRIDES)
    assert swept == {"params.target_fpr": ["0.05", "0.1", "0.2"], "params.min_k": ["0.1", "0.2"]}
    assert len(points) == 6 and all(p[0] == "experiment=pearl_mia" for p in points)
    assert sweep_key(OVERRIDES) == "min_k=0.1,0.2,target_fpr=0.05,0.1,0.2"


def test_runs_and_sweeps_are_named_by_one_rule():
    """A sweep's folder and a run's folder come from one rule: result-free settings (where output goes, the
    logger, the cache, Hydra's launcher, the -m flag) never enter a name, a path value enters as its last part and
    a hash, a long name is cut to a prefix and a hash."""
    point = ["experiment=pearl_mia", "params.min_k=0.2", "model.path=/home/me/ckpt/final", "logger=null"]
    flags = ["-m", "hydra/launcher=ray", "paths.results=/tmp/elsewhere", "cache=null"]
    assert run_key(point) == sweep_key(point) == run_key(point + flags) == sweep_key(point + flags)
    assert run_key(point).startswith("model.path=final-") and run_key(point).endswith(",min_k=0.2")
    assert "home" not in run_key(point)
    assert (run_key([]), sweep_key(flags)) == ("default", "sweep")
    long = [f"params.k{i}=" + "x" * 20 for i in range(12)]
    assert len(run_key(long)) == len(sweep_key(long)) == 153 and run_key(long) == sweep_key(long)


def test_summary_table_figure_and_meta(swept):
    results, points = swept
    out = summarize(results, "pearl_mia", OVERRIDES)
    assert out == results / "pearl_mia" / "sweeps" / sweep_key(OVERRIDES)
    table = pd.read_csv(out / "sweep.csv")
    assert list(table["run_key"]) == [run_key(p) for p in points]
    assert list(table["ran"]) == [True] * 5 + [False]
    assert table.loc[0, "auc"] == pytest.approx(0.3) and table.loc[4, "c1/verdict"] == "reproduced"
    assert table.loc[0, "c1/ci_high"] == pytest.approx(0.35)
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["points"] == 6 and meta["missing"] == 1 and "degenerate" not in meta
    assert meta["caption"].startswith("each claim whose value varies (band: its 95 % interval) and each metric that "
                                      "varies vs params.target_fpr")
    assert (out / "sweep.png").stat().st_size > 1000


def test_a_threshold_that_moves_metrics_but_no_claim_draws_the_metrics(tmp_path):
    """As `-m experiment=pearl_mia method.tau_b=0.1,0.3` on the reproduced run: the claim stays put (a flat line is
    not drawn), AUC of the GFD score moves and is the figure; a metric that stays put is not drawn either."""
    from memlab.runner.sweeps import _y_columns

    results = tmp_path / "results"
    overrides = ["experiment=pearl_mia", "method.tau_b=0.1,0.3"]
    _, points = expand(overrides)
    for point, auc in zip(points, (0.825, 0.625)):
        _point(results, point, 0.0)
        path = results / "pearl_mia" / run_key(point) / "metrics.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "auc_final_gfd": auc}))
    out = summarize(results, "pearl_mia", overrides)
    meta = json.loads((out / "sweep.json").read_text())
    assert "degenerate" not in meta and meta["caption"].startswith("each metric that varies vs method.tau_b")
    assert _y_columns(pd.read_csv(out / "sweep.csv"), ["method.tau_b"]) == ["auc_final_gfd"]


def test_site_shows_the_sweep(swept, tmp_path):
    from memlab.site import build

    results, _ = swept
    summarize(results, "pearl_mia", OVERRIDES)
    index, _, _ = build(results, tmp_path / "site" / "report")
    html = index.read_text()
    sid = sweep_key(OVERRIDES)
    assert f'id="sweep-pearl_mia-{sid}"' in html and "sweep.png" in html
    assert 'class="problem">Sweeping' not in html and "No figure:" not in html
    page = index.parent / "pearl_mia" / "sweeps" / sid / "sweep.html"
    assert page.read_text().count("<tr>") == 1 + 6  # header + one row per point


def test_runner_hook_finds_the_results_folder(tmp_path, capsys):
    from memlab.runner.sweeps import write_sweeps

    results = tmp_path / "results"
    overrides = [*OVERRIDES, f"paths.results={results}", "hydra/launcher=basic"]
    _, points = expand(overrides)
    for i, point in enumerate(points):
        _point(results, point, 0.3 + 0.1 * i)
    (out,) = write_sweeps(overrides)
    assert out == results / "pearl_mia" / "sweeps" / sweep_key(OVERRIDES)
    assert json.loads((out / "sweep.json").read_text())["missing"] == 0
    assert "memlab: sweep summary in" in capsys.readouterr().err
    assert write_sweeps(["experiment=pearl_mia", "params.min_k=0.1"]) == []  # one point: no sweep


def test_a_sweep_that_changed_nothing_is_a_sentence_on_the_site_not_a_flat_figure(tmp_path, capsys):
    """Every point wrote the same metrics (all 0): the runner's hook records the idle key in sweep.json, and the
    site shows that warning and a sentence in place of the flat figure; the varying sweep above (the control) keeps
    its figure and has no warning."""
    from memlab.site import build
    from memlab.runner.sweeps import write_sweeps

    results = tmp_path / "results"
    overrides = [*OVERRIDES, f"paths.results={results}", "hydra/launcher=basic"]
    _, points = expand(overrides)
    for point in points:
        _point(results, point, 0.0)
    (out,) = write_sweeps(overrides)
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["degenerate"] == "no metric varies with params.target_fpr, params.min_k"
    assert meta["idle"] == [f"sweeping {k} changed no metric in metrics.json; it changed nothing at all"
                            for k in ("params.target_fpr", "params.min_k")]
    assert "changed no metric" in capsys.readouterr().err
    index, _, _ = build(results, tmp_path / "site" / "report")
    html = index.read_text()
    block = html[html.index(f'id="sweep-pearl_mia-{sweep_key(OVERRIDES)}"'):]
    block = block[:block.index("</div>")]
    assert "<em>No figure: no metric varies with params.target_fpr" in block and "<img" not in block
    assert block.count('class="problem">Sweeping ') == 2


def test_a_real_sweep_through_the_runner(tmp_path, zoo_builder, two_chapter_family):
    """`python -m memlab.run -m` on the demo with a micro zoo (2 × 2 points): the summary finds every run folder,
    so its keys are the runner's. `params.epoch_every` is ignored when `params.epochs` lists the epochs: sweeping it
    changes nothing, and the runner says so in one warning; `params.n_probes` changes the metrics and is no warning
    (the control). (`seed` would warn too: with 6 probes of a two-chapter family every seed draws the same probes.)"""
    import subprocess
    import sys

    zoo = zoo_builder(tmp_path / "zoo", two_chapter_family)
    results = tmp_path / "results"
    args = [sys.executable, "-m", "memlab.run", "-m", "experiment=memorization_curve", "params.family=micro",
            f"paths.zoo={zoo / 'conf'}", f"paths.models={zoo / 'models'}", f"paths.results={results}",
            f"paths.cache={zoo / 'cache'}", "logger=null", "params.n_probes=4,6", "params.prefix_len=8",
            "params.cont_len=8", "params.sizes=[xs]", "params.epochs=[1,2]", "params.epoch_every=1,2"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    (folder,) = (results / "memorization_curve" / "sweeps").iterdir()
    table = pd.read_csv(folder / "sweep.csv")
    assert sorted(table["params.n_probes"]) == [4, 4, 6, 6] and table["ran"].all()
    assert (folder / "sweep.png").exists() and "memlab: sweep summary in" in r.stderr
    warnings = [line for line in r.stderr.splitlines() if "changed no metric" in line]
    assert warnings == ["memlab: warning: sweeping params.epoch_every changed no metric in metrics.json; "
                        "it changed nothing at all"], r.stderr[-3000:]
    assert json.loads((folder / "sweep.json").read_text())["idle"] == [warnings[0].removeprefix("memlab: warning: ")]


def test_sweep_summary_is_logged_to_wandb_in_the_experiments_group(swept, tmp_path):
    """The summary goes to W&B (offline here) as a `sweep` run of the experiment's group: its table and figure."""
    import subprocess
    import sys

    results, _ = swept
    out = summarize(results, "pearl_mia", OVERRIDES)
    # in its own process, as the runner logs it: W&B's files are complete once that process has exited
    code = ("import sys; from pathlib import Path; from memlab.runner.sweeps import log_wandb; "
            "log_wandb({'project': 'memlab', 'entity': None, 'mode': 'offline', 'dir': sys.argv[1]}, 'pearl_mia', "
            "Path(sys.argv[2]))")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(out)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (offline,) = (tmp_path / "wandb").glob("offline-run-*")
    logged = b"".join(p.read_bytes() for p in offline.rglob("*.wandb"))
    assert b"sweep/table" in logged and b"sweep/figure" in logged
    assert b"pearl_mia/sweeps/" + sweep_key(OVERRIDES).encode() in logged and b"pearl_mia" in logged


SEEDS = ["experiment=memorization_curve", "seed=0,1,2"]


def _curve_point(results: Path, point: list[str], member_exact: int, started: str = "2030-01-01T00:00:00+00:00"):
    """A memorization_curve run folder as the runner leaves it: count and rate of each size's exact continuations
    (the same result twice) and run.json's start."""
    folder = results / "memorization_curve" / run_key(point)
    folder.mkdir(parents=True)
    metrics = {"last_epoch": 40, "n_probes": 50}
    for size, shift in (("m", 0), ("l", 3)):
        metrics |= {f"{size}/member/last_epoch_exact": member_exact + shift,
                    f"{size}/member/last_epoch_rate": (member_exact + shift) / 50,
                    f"{size}/nonmember/last_epoch_exact": 0, f"{size}/nonmember/last_epoch_rate": 0.0}
    (folder / "metrics.json").write_text(json.dumps(metrics, sort_keys=True))
    (folder / "run.json").write_text(json.dumps({"started": started, "key": run_key(point)}))
    return folder


def test_a_seed_sweep_shows_each_draw_and_their_spread_on_categorical_ticks_and_each_rate_once(tmp_path):
    """`-m experiment=memorization_curve seed=0,1,2`: seeds are draws, not an axis — one tick per seed plus their
    mean ± range, points never joined by a line; a count and its rate (`_exact`, `_rate`) are one panel (the rate)."""
    from memlab.runner.sweeps import sweep_figure

    results = tmp_path / "results"
    _, points = expand(SEEDS)
    for point, exact in zip(points, (40, 44, 47)):
        _curve_point(results, point, exact)
    out = summarize(results, "memorization_curve", SEEDS)
    fig, caption, why = sweep_figure(pd.read_csv(out / "sweep.csv"), ["seed"])
    assert why == "" and [ax.get_ylabel() for ax in fig.axes] == ["l/member/last_epoch_rate",
                                                                  "m/member/last_epoch_rate"]
    bottom = fig.axes[-1]
    assert [t.get_text() for t in bottom.get_xticklabels()] == ["0", "1", "2", "mean ± range"]
    assert bottom.get_xlabel() == "seed"
    lines = [line for line in bottom.get_lines() if len(line.get_xdata()) > 1]
    assert lines and all(line.get_linestyle() == "None" for line in lines)  # no trend line across seeds
    mean = [line for line in bottom.get_lines() if line.get_marker() == "D"]  # the bottom panel is size m's
    assert [list(line.get_ydata()) for line in mean] == [pytest.approx([(40 + 44 + 47) / 3 / 50])]
    assert "mean ± range" in caption and "3 of 3 points ran" in caption
    assert json.loads((out / "sweep.json").read_text())["caption"] == caption


def test_a_numeric_key_keeps_its_axis_and_a_swept_seed_becomes_its_spread_names_are_categories():
    from memlab.runner.sweeps import layout

    table = pd.DataFrame({"method.alpha": ["0.1", "0.1", "0.3", "0.3"], "seed": ["0", "1", "0", "1"],
                          "ran": True, "status": "ran", "auc": [0.5, 0.6, 0.7, 0.9]})
    lay = layout(table, ["method.alpha", "seed"])
    assert (lay["x"], lay["seed"], lay["mode"], lay["ticks"]) == ("method.alpha", "seed", "spread",
                                                                  {"0.1": 0.1, "0.3": 0.3})
    models = table.assign(model=["tiny", "tiny", "gemma", "gemma"])
    lay = layout(models, ["model", "method.alpha"])
    assert (lay["mode"], lay["ticks"], lay["series"]) == ("points", {"tiny": 0, "gemma": 1}, ["method.alpha"])
    assert layout(table, ["method.alpha"])["mode"] == "line"


def test_one_point_with_numbers_is_no_claim_that_nothing_varies(tmp_path):
    """Seeds 1 and 2 failed: one point produced numbers, which shows neither that a metric varies nor that none
    does; the caption says how many points ran and why the others are not shown."""
    results = tmp_path / "results"
    _, points = expand(SEEDS)
    _curve_point(results, points[0], 40)
    for point in points[1:]:
        (results / "memorization_curve" / f"{run_key(point)}.failed").mkdir(parents=True)
    out = summarize(results, "memorization_curve", SEEDS)
    meta = json.loads((out / "sweep.json").read_text())
    assert "no metric varies" not in meta["caption"] and meta["degenerate"] == meta["caption"]
    assert meta["caption"] == ("only 1 of 3 points produced numbers (seed=1: failed; seed=2: failed): nothing to "
                               "compare")
    assert meta["missing"] == 2 and meta["failed"] == 2 and not (out / "sweep.png").exists()


def test_no_metric_varies_says_over_which_points_it_was_judged(tmp_path):
    """Seeds 0 and 1 wrote the same numbers, seed 2 failed: "no metric varies with seed" is judged on 2 of 3 points,
    and the sentence says so and names the one left out (it said "no metric varies with seed" alone)."""
    results = tmp_path / "results"
    _, points = expand(SEEDS)
    for point in points[:2]:
        _curve_point(results, point, 40)
    (results / "memorization_curve" / f"{run_key(points[2])}.failed").mkdir(parents=True)
    meta = json.loads((summarize(results, "memorization_curve", SEEDS) / "sweep.json").read_text())
    assert meta["caption"] == meta["degenerate"] == ("no metric varies with seed across the 2 of 3 points that "
                                                     "produced numbers (not shown: seed=2: failed)")


def test_a_point_that_failed_in_this_sweep_never_shows_an_older_runs_numbers(tmp_path):
    """Seed 2 ran well last week and failed in this sweep (the runner kept `<key>.failed/` and left last week's
    folder untouched); seed 1 was not run by this sweep at all (its folder is older than the sweep). Neither shows
    the old numbers: their rows are failed / stale with no metric, and one point is left: nothing to compare."""
    import time

    results = tmp_path / "results"
    _, points = expand(SEEDS)
    since = time.time()
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(since + 1))
    _curve_point(results, points[0], 40, started=now)
    _curve_point(results, points[1], 44, started="2020-01-01T00:00:00+00:00")
    old = _curve_point(results, points[2], 47, started="2020-01-01T00:00:00+00:00")
    (old.parent / f"{old.name}.failed").mkdir()
    out = summarize(results, "memorization_curve", SEEDS, since=since)
    table = pd.read_csv(out / "sweep.csv")
    assert list(table["status"]) == ["ran", "stale", "failed"] and list(table["ran"]) == [True, False, False]
    exact = table["m/member/last_epoch_exact"]
    assert exact[0] == 40 and exact[1:].isna().all()
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["caption"].startswith("only 1 of 3 points produced numbers (seed=1: stale; seed=2: failed)")
