"""``memlab audit MODEL --smoke --out DIR`` as a user runs it (issue 50): the package as installed outside any checkout
(the ``installed_package`` fixture), from an empty working folder, on the micro test model (tests/conftest.py) — the
real smoke audit, every method, in about half a minute. Its console shows the audit's overall line (``part i/4``,
work units, the overall ETA), and everything it writes lands under DIR, none of it in the working folder."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pandas as pd
import pytest

PARTS = ["PEARL", "MIA", "RECAP", "SimpleTrace"]
OVERALL = re.compile(r" · part (\d+)/(\d+) (\S+) · units (\d+)/(\d+)(?: · ETA (—|\d+:\d\d(?::\d\d)?))?(?: · |$)")


@pytest.fixture(scope="module")
def smoke_audit(installed_package, micro_family, tmp_path_factory):
    work, out = tmp_path_factory.mktemp("empty"), tmp_path_factory.mktemp("out") / "audit-out"
    cmd = [sys.executable, "-m", "memlab.cli", "audit", str(micro_family.final_dir), "--smoke", "--out", str(out),
           "cache=null"]   # no response cache: every answer is generated (and nothing written into a shared cache)
    r = subprocess.run(cmd, cwd=work, env=installed_package, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    (folder,) = (out / "results" / "audit").iterdir()
    return r, work, out, folder


def overall_lines(stderr: str) -> list[tuple]:
    """(part, parts, name, units done, units in all, ETA or None) of each console line with the overall progress."""
    return [(int(m[1]), int(m[2]), m[3], int(m[4]), int(m[5]), m[6])
            for m in (OVERALL.search(line) for line in stderr.splitlines() if line.startswith("memlab: audit · "))
            if m]


def work_done(folder) -> dict[str, int]:
    """What each part of the audit did, from its own records: PEARL's scored documents (every task), the MIA's scored
    documents, RECAP's events, SimpleTrace's generations."""
    tables = folder / "tables"
    events = (folder / "recap" / "events.jsonl").read_text().splitlines()
    return {"PEARL": len(pd.read_csv(tables / "pearl_pearl_scores.csv")),
            "MIA": len(pd.read_csv(tables / "mia_scores.csv")),
            "RECAP": len([json.loads(e) for e in events if e.strip()]),
            "SimpleTrace": int(pd.read_csv(tables / "trace_capability_propensity.csv").total_generations.sum())}


def test_the_audit_line_counts_its_four_parts_in_units_of_work_with_an_overall_eta(smoke_audit):
    r, _, _, folder = smoke_audit
    lines = overall_lines(r.stderr)
    assert lines, r.stderr[-3000:]
    first = {}
    for line in lines:   # a log (stderr is no terminal) keeps a line for each part as it started
        first.setdefault(line[0], line)
    assert [(p, n, name) for p, n, name, *_ in first.values()] == [(i + 1, 4, name) for i, name in enumerate(PARTS)]
    total = {line[4] for line in lines}
    assert len(total) == 1, lines
    # each part's units are the work it did: the units done when a part starts are the parts before it, all of them
    # at the end
    done, starts = work_done(folder), [first[i + 1][3] for i in range(4)]
    assert starts == [0, done["PEARL"], done["PEARL"] + done["MIA"], done["PEARL"] + done["MIA"] + done["RECAP"]]
    assert total == {sum(done.values())} and lines[-1][3:5] == (sum(done.values()),) * 2, lines
    # the ETA field while units remain ("—" until enough units and seconds are done), none when all are done
    assert all(eta is not None for *_, units, of, eta in lines if units < of), lines
    assert all(eta is None for *_, units, of, eta in lines if units == of), lines


def test_audit_out_writes_under_the_folder_and_nothing_in_the_working_folder(smoke_audit):
    r, work, out, folder = smoke_audit
    assert list(work.iterdir()) == []   # no results/, no wandb/, no outputs/ (Hydra's log) in the working folder
    assert folder.parent == out / "results" / "audit" and f"metrics in {folder}/metrics.json" in r.stderr
    audit = pd.read_csv(folder / "tables" / "audit.csv")
    assert {"PEARL (completion)", "RECAP", "SimpleTrace"} <= set(audit.method)
    assert (folder / "audit.html").is_file() and (folder / "run.json").is_file()
    assert list(out.glob("wandb/offline-run-*")) and list(out.glob("outputs/hydra/*/run.log"))
