"""``make reproduce``: run every out-of-date DVC stage, side by side on the machine's cores, saying which
stage of how many is running.

    python -m memlab.reproduce              # = dvc repro, stages packed onto all cores (nproc)
    python -m memlab.reproduce --jobs 1     # one stage at a time, its output on the console

The plan: the stages ``dvc status`` reports changed plus everything downstream, in topological order. Each
stage says in ``dvc.yaml`` how many cores it keeps busy (``meta.cores``, written by ``memlab.pipeline``); a
stage starts as soon as its upstream stages are done and its cores fit beside the running ones (a stage wanting
more cores than there are runs alone). Among ready stages, the one heading the longest chain of expected minutes
(``meta.minutes``, measured; 1 when unknown) goes first, and none overtakes a better one that waits for cores.
``meta.after`` orders a stage after others that run in the same plan (it reuses their cached model responses)
without making them DVC dependencies. Each runs as ``dvc --wait-for-lock repro --single-item <stage>``: DVC
releases its repo lock while a stage's command runs and records every stage in ``dvc.lock`` as usual. With more
than one job, each stage's output goes to ``.cache/reproduce/<stage>.log``.
Every stage runs with ``OMP_NUM_THREADS=1`` (torch threads are set from config by the code itself): two stages
on two cores must not each spawn a thread per core. A final plain ``dvc repro`` settles anything the plan
missed (a no-op normally). A failed stage stops new stages from starting, lets the running ones finish (their
work is kept) and ends the run with one line naming it and its log; finished stages are not rerun.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
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


UNTIMED_MINUTES = 1.0  # what a stage without ``meta.minutes`` is assumed to take when ranking chains


def stage_meta(dvc_yaml: Path) -> tuple[dict[str, int], dict[str, set[str]], dict[str, float]]:
    """Each stage's ``meta.cores`` (default 1), ``meta.after`` (stages it should follow when both run) and
    ``meta.minutes`` (its expected one-core wall minutes; default :data:`UNTIMED_MINUTES`)."""
    import yaml

    stages = yaml.safe_load(dvc_yaml.read_text())["stages"]
    meta = {n: s.get("meta") or {} for n, s in stages.items()}
    return ({n: max(1, int(m.get("cores", 1))) for n, m in meta.items()},
            {n: set(m.get("after") or []) for n, m in meta.items()},
            {n: float(m.get("minutes", UNTIMED_MINUTES)) for n, m in meta.items()})


def _priority(plan: list[str], downs: dict[str, set[str]], minutes: dict[str, float]) -> dict[str, float]:
    """Each planned stage's critical path: its expected minutes plus the longest chain of planned stages below it
    (the stage that heads the longest chain starts first, so a long run does not end up last)."""
    chain: dict[str, float] = {}
    for n in reversed(plan):  # reverse topological: a stage's downstream is known before it
        chain[n] = minutes[n] + max((chain[m] for m in downs[n] if m in chain), default=0.0)
    return chain


def next_stages(ready: list[str], busy: int, slots: int, cores: dict[str, int]) -> list[str]:
    """Which ready stages (best first) start now: in order, while their cores fit in the free slots. A stage
    that does not fit holds back the ones after it (no starvation: a two-core stage is not overtaken for ever
    by one-core stages); a stage wanting more than the machine has starts when nothing else runs."""
    start = []
    for n in ready:
        want = min(cores[n], slots)
        if busy + want > slots:
            break
        start.append(n)
        busy += want
    return start


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _interrupt(signum, frame):  # SIGTERM (a CI timeout, `kill`) ends the run like Ctrl-C does
    raise KeyboardInterrupt


def _stop(procs: list[subprocess.Popen], grace: float = 15.0) -> None:
    """SIGTERM each stage's process group, then SIGKILL what is still there after ``grace`` seconds."""
    import os

    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.time() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    """``python -m memlab.reproduce [--jobs N]`` (see the module docstring)."""
    slots = _jobs(argv)
    dvc = _dvc()
    t0 = time.time()
    plan = planned_stages(dvc)
    n = len(plan)
    print(f"memlab: {n} stage(s) to run on {slots} core(s)" + (f": {', '.join(plan)}" if n else
          " (everything is up to date)"), file=sys.stderr, flush=True)
    ups, cores, prio = _plan_dependencies(plan)
    logs = Path(".cache/reproduce")
    if slots > 1 and n:
        logs.mkdir(parents=True, exist_ok=True)
        print(f"memlab: each stage's output goes to {logs}/<stage>.log", file=sys.stderr, flush=True)
    _run_plan(dvc, plan, ups, cores, prio, slots, logs, t0)
    settle(dvc)
    print(f"memlab: reproduced in {_clock(time.time() - t0)}", file=sys.stderr, flush=True)
    from memlab.audit.ground_truth import ZOO_RATES, ship

    if ship(Path.cwd()):
        print(f"memlab: the audit's ground-truth tables copied into {ZOO_RATES} (committed: the installed `memlab "
              "audit` prints them)", file=sys.stderr, flush=True)
    from memlab.summary import summary

    print(summary(Path.cwd()), file=sys.stderr, flush=True)


def _jobs(argv: list[str] | None) -> int:
    """The ``--jobs`` argument: how many cores to fill with stages (≥ 1)."""
    import argparse
    import os

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("MEMLAB_JOBS") or os.cpu_count() or 1),
                    help="cores to fill with stages (default: MEMLAB_JOBS or all cores)")
    slots = ap.parse_args(argv).jobs
    if slots < 1:
        raise MemlabError(f"--jobs must be ≥ 1 (got {slots})")
    return slots


def _plan_dependencies(plan: list[str]) -> tuple[dict[str, set[str]], dict[str, int], dict[str, float]]:
    """For the planned stages: the planned stages each waits for, each stage's cores (``meta.cores``) and its
    priority (:func:`_priority`, ``meta.after`` counting as a downstream edge)."""
    _, downs = stage_graph(Path("dvc.yaml"))
    cores, after, minutes = stage_meta(Path("dvc.yaml"))
    # a stage waits for its upstream stages and, when they run too, for the ones it should follow (meta.after)
    ups = {m: {u for u in plan if m in downs[u]} | (after[m] & set(plan)) for m in plan}
    for m in plan:
        for a in after[m] & set(plan):
            downs[a] = downs[a] | {m}
    return ups, cores, _priority(plan, downs, minutes)


def _run_plan(dvc: str, plan: list[str], ups: dict[str, set[str]], cores: dict[str, int], prio: dict[str, float],
              slots: int, logs: Path, t0: float) -> None:
    """Run the planned stages on ``slots`` cores (best ready stage first, as their cores fit). After a failure no
    stage starts; once the running ones end, the first failed stage is raised. An interrupt stops them all."""
    import os

    n = len(plan)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    number = {s: i for i, s in enumerate(plan, 1)}
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    done: set[str] = set()
    failed: list[str] = []
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        while len(done) < n and not (failed and not running):
            ready = sorted((s for s in plan if s not in done and s not in running and ups[s] <= done),
                           key=lambda s: (-prio[s], number[s]))
            busy = sum(min(cores[s], slots) for s in running)
            for stage in ([] if failed else next_stages(ready, busy, slots, cores)):
                running[stage] = (_start_stage(dvc, stage, env, logs / f"{stage}.log" if slots > 1 else None),
                                  time.time())
                others = f" (beside {', '.join(s for s in running if s != stage)})" if len(running) > 1 else ""
                print(f"memlab: [{number[stage]}/{n}] {stage} — starting at {_clock(time.time() - t0)}{others}",
                      file=sys.stderr, flush=True)
            if not running:
                break
            time.sleep(0.2)
            _collect_finished(running, done, failed, number, logs if slots > 1 else None, t0)
    except KeyboardInterrupt:
        _stop([proc for proc, _ in running.values()])
        raise MemlabError(f"interrupted: stopped {', '.join(running) or 'nothing'} ({len(done)}/{n} stages "
                          "done and kept); rerun `make reproduce` to go on") from None
    if failed:
        stage = failed[0]
        where = f", log: {logs / f'{stage}.log'}" if slots > 1 else ", its output is above"
        raise MemlabError(f"stage {stage} failed ([{number[stage]}/{n}]{where}); fix it and rerun "
                          "`make reproduce` — finished stages are not rerun")


def _start_stage(dvc: str, stage: str, env: dict, log: Path | None) -> subprocess.Popen:
    """``dvc repro`` of one stage in its own process group, its output into ``log`` (None: the console)."""
    out = open(log, "w") if log is not None else None
    # its own process group: on an interrupt the whole stage (dvc, runner, kernel) is stopped
    proc = subprocess.Popen([dvc, "--wait-for-lock", "repro", "--single-item", stage], env=env,
                            stdout=out, stderr=subprocess.STDOUT if out else None,
                            start_new_session=True)
    if out:
        out.close()  # the child holds its own copy
    return proc


def _collect_finished(running: dict[str, tuple[subprocess.Popen, float]], done: set[str], failed: list[str],
                      number: dict[str, int], logs: Path | None, t0: float) -> None:
    """Move the stages that ended from ``running`` to ``done`` or ``failed``, saying so (a failed stage's log
    tail too, when stages log to ``logs``)."""
    n = len(number)
    for stage, (proc, ts) in list(running.items()):
        if proc.poll() is None:
            continue
        del running[stage]
        if proc.returncode != 0:
            failed.append(stage)
            if logs is not None:
                log = logs / f"{stage}.log"
                print(f"memlab: {stage} failed; the end of {log}:\n{_tail(log)}", file=sys.stderr, flush=True)
            continue
        done.add(stage)
        print(f"memlab: [{number[stage]}/{n}] {stage} done in {_clock(time.time() - ts)} "
              f"(total {_clock(time.time() - t0)}; {len(done)}/{n} done)", file=sys.stderr, flush=True)


def settle(dvc: str) -> None:
    """The final plain ``dvc repro`` (a no-op normally): its output in one line per stage that ran, one line for
    the rest, instead of a "didn't change, skipping" line per stage."""
    r = subprocess.run([dvc, "repro"], capture_output=True, text=True)
    lines = (r.stdout + r.stderr).splitlines()
    if r.returncode != 0:
        print("\n".join(lines[-20:]), file=sys.stderr)
        raise MemlabError("the final `dvc repro` failed (the end of its output is above)")
    ran = [line for line in lines if line.startswith("Running stage")]
    skipped = sum("didn't change, skipping" in line for line in lines)
    for line in ran:
        print(f"memlab: settle: {line}", file=sys.stderr)
    print(f"memlab: settle: `dvc repro` ran {len(ran)} stage(s), {skipped} unchanged", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
