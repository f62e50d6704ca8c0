"""``make reproduce``: run every out-of-date DVC stage, one at a time, saying which stage of how many it is on.

    python -m memlab.reproduce          # = dvc repro, with "[3/12] exp-pearl_mia" and timings on the console

The plan: the stages ``dvc status`` reports changed plus everything downstream, in topological order; each
stage runs with ``dvc repro --single-item``, so DVC still records every stage in ``dvc.lock``. A final plain ``dvc repro`` settles anything the plan missed (it
is a no-op normally). A failed stage stops the run with one line naming it; finished stages are not rerun.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from memlab.errors import MemlabError, one_line_errors

def _dvc() -> str:
    here = Path(sys.executable).with_name("dvc")
    found = str(here) if here.exists() else shutil.which("dvc")
    if not found:
        raise MemlabError("dvc is not installed in this environment; run `make setup`")
    return found


def _paths(entries) -> list[str]:
    out = []
    for e in entries or []:
        out.extend(e.keys() if isinstance(e, dict) else [e])
    return [str(p).rstrip("/") for p in out]


def stage_graph(dvc_yaml: Path) -> tuple[list[str], dict[str, set[str]]]:
    """Stages in topological order (dvc.yaml order among equals) and each stage's downstream stages."""
    import yaml

    stages = yaml.safe_load(dvc_yaml.read_text())["stages"]
    outs = {n: _paths(s.get("outs")) + _paths(s.get("metrics")) + _paths(s.get("plots")) for n, s in stages.items()}
    under = lambda a, b: a == b or a.startswith(b + "/") or b.startswith(a + "/")  # noqa: E731
    ups = {n: {m for m in stages if m != n and any(under(d, o) for d in _paths(s.get("deps")) for o in outs[m])}
           for n, s in stages.items()}
    order: list[str] = []
    while len(order) < len(stages):
        ready = [n for n in stages if n not in order and ups[n] <= set(order)]
        if not ready:
            raise MemlabError("dvc.yaml has a cycle; regenerate it with `make dvc.yaml`")
        order.append(ready[0])
    downs = {n: {m for m in stages if n in ups[m]} for n in stages}
    return order, downs


def planned_stages(dvc: str, root: Path = Path(".")) -> list[str]:
    """The stages `dvc repro` will run: those `dvc status` reports changed, plus everything downstream of them
    (``dvc repro --dry`` can't plan a fresh clone: it fails on inputs that upstream stages have yet to make)."""
    import json

    r = subprocess.run([dvc, "status", "--json"], capture_output=True, text=True, cwd=root)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
        raise MemlabError(f"`dvc status` failed: {tail[0]}")
    changed = {k.split(":")[-1] for k in json.loads(r.stdout or "{}")}
    order, downs = stage_graph(root / "dvc.yaml")
    todo = set(changed)
    for n in order:  # topological: a stage's upstream is settled before it is looked at
        if n in todo:
            todo |= downs[n]
    return [n for n in order if n in todo]


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60}:{s % 60:02d}"


@one_line_errors
def main() -> None:
    dvc = _dvc()
    t0 = time.time()
    plan = planned_stages(dvc)
    n = len(plan)
    print(f"memlab: {n} stage(s) to run" + (f": {', '.join(plan)}" if n else " (everything is up to date)"),
          file=sys.stderr, flush=True)
    for i, stage in enumerate(plan, 1):
        ts = time.time()
        print(f"memlab: [{i}/{n}] {stage} — starting at {_clock(ts - t0)}", file=sys.stderr, flush=True)
        if subprocess.call([dvc, "repro", "--single-item", stage]) != 0:
            raise MemlabError(f"stage {stage} failed ([{i}/{n}], its output is above); fix it and rerun "
                              "`make reproduce` — finished stages are not rerun")
        print(f"memlab: [{i}/{n}] {stage} done in {_clock(time.time() - ts)} (total {_clock(time.time() - t0)})",
              file=sys.stderr, flush=True)
    if subprocess.call([dvc, "repro"]) != 0:
        raise MemlabError("the final `dvc repro` failed (its output is above)")
    print(f"memlab: reproduced in {_clock(time.time() - t0)}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
