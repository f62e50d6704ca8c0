"""The site on a run whose files are damaged (issue 33): a truncated metrics.json or run.json, a comparison.csv of
garbage, rows without a verdict. Each damaged file is one console warning naming it and a note on the page; a row
without a valid verdict is never shown or counted as a claim. The negative control: the same run undamaged gives
no warning and every row."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from memlab.site import build
from memlab.site.build import main

COLUMNS = ["claim_id", "paper", "claim", "verdict", "reason"]


def _run(results: Path, name: str, rows: list[list[str]]) -> Path:
    folder = results / name / "default"
    (folder / "tables").mkdir(parents=True)
    with (folder / "tables" / "comparison.csv").open("w", newline="") as f:
        csv.writer(f).writerows([COLUMNS, *rows])
    (folder / "tables" / "sanity.csv").write_text("check_id,check,passed\nctl,a control,True\n")
    (folder / "metrics.json").write_text(json.dumps({"verdict/a": "reproduced"}))
    (folder / "run.json").write_text(json.dumps({"commit": "0" * 40, "seconds": 1.0}))
    return folder


GOOD = [["a", "003_pearl", "claim a", "reproduced", "r"], ["b", "003_pearl", "claim b", "inconclusive", "r"]]


def test_an_undamaged_run_shows_every_row_and_warns_nothing(tmp_path, capsys):
    _run(tmp_path / "results", "exp_ok", GOOD)
    main(["--results", str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert "warning" not in err and "(2 claims," in err
    page = (tmp_path / "results" / "report" / "index.html").read_text()
    assert 'class="problem"' not in page


def test_damaged_files_are_named_once_each_and_bad_rows_are_not_claims(tmp_path, capsys):
    results = tmp_path / "results"
    folder = _run(results, "exp_bad", [*GOOD, ["c", "003_pearl", "claim c", "", "no verdict"],
                                       ["d", "003_pearl", "claim d", "maybe", "not a verdict"],
                                       ["", "003_pearl", "no id", "reproduced", "x"]])
    (folder / "metrics.json").write_text('{"verdict/a": "repro')      # truncated
    (folder / "run.json").write_text("[1, 2]")                         # JSON, but not an object
    garbage = _run(results, "exp_garbage", GOOD)
    (garbage / "tables" / "comparison.csv").write_bytes(b"\x00\xff\xfe garbage\n\x89PNG,,,\n")
    (garbage / "tables" / "sanity.csv").write_text("x,y\n1,2\n")

    main(["--results", str(results)])
    err = capsys.readouterr().err
    warnings = [ln for ln in err.splitlines() if ln.startswith("memlab: warning: report:")]
    assert "(2 claims," in err                                          # a and b of exp_bad only
    named = {w.split(": ")[3].split(": ")[0] for w in warnings}
    assert any("exp_bad/default/metrics.json" in w for w in warnings)
    assert any("exp_bad/default/run.json" in w for w in warnings)
    assert any("exp_bad/default/tables/comparison.csv" in w and "3 of 5 rows" in w for w in warnings)
    assert any("exp_garbage/default/tables/comparison.csv" in w for w in warnings)
    assert any("exp_garbage/default/tables/sanity.csv" in w for w in warnings)
    assert len(warnings) == 5 and len(named) == 5
    assert all("python -m memlab.run experiment=exp_" in w for w in warnings)

    index, _, runs = build(results, results / "report")
    by = {r.experiment: r for r in runs}
    assert [c["claim_id"] for c in by["exp_bad"].claims] == ["a", "b"] and by["exp_garbage"].claims == []
    page = index.read_text()
    assert page.count('class="problem"') == 2 and "claim d" not in page
    assert str(tmp_path) not in page                                    # the note names no machine path
