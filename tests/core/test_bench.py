"""`make bench` cannot rot unseen: CI runs `make bench BENCH_ARGS=--quick` (every section at minute scale); here,
every section imports, a failing section fails the command, and the two sections cheapest to run (metrics; recap,
whose objects come from conf/method/recap.yaml through the studies' constructors) run their quick mode in-process."""

from __future__ import annotations

import inspect
import json

import pytest

from memlab import bench


def test_every_section_imports_and_takes_quick(repo_root):
    areas = bench.areas(repo_root)
    assert {"backends", "metrics", "pearl", "recap", "trace", "zoo"} <= set(areas)
    for area, path in areas.items():
        run = bench._load(path).run
        assert "quick" in inspect.signature(run).parameters, area


def test_a_raising_section_fails_the_command_and_the_others_still_run(tmp_path, monkeypatch, capsys):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "bench_boom.py").write_text("def run(quick=False):\n    raise RuntimeError('boom')\n")
    (tmp_path / "bench" / "bench_fine.py").write_text("def run(quick=False):\n    return {'quick': quick}\n")
    monkeypatch.setattr(bench, "repo_root", lambda: tmp_path)
    assert bench.main(["--quick"]) == 1
    assert json.loads((tmp_path / "results" / "bench" / "fine.json").read_text())["results"] == {"quick": True}
    assert "RuntimeError: boom" in json.loads((tmp_path / "results" / "bench" / "boom.json").read_text())["results"]["error"]
    assert "FAILED: boom" in capsys.readouterr().err
    assert bench.main(["--only", "nosuch"]) == 2  # an unknown section is refused, not silently skipped


@pytest.mark.parametrize("area", ["metrics", "recap"])
def test_cheap_sections_run_their_quick_mode(repo_root, tmp_path, area):
    assert bench.run_area(area, bench.areas(repo_root)[area], True, tmp_path)
    result = json.loads((tmp_path / f"{area}.json").read_text())["results"]
    if area == "metrics":
        assert result["rouge_max_abs_diff"] == 0.0  # ours equals rouge-score on every pair
    else:
        assert result["events"] > 0 and result["warm_cache_misses"] == 0  # a rerun is served by the cache
