"""Progress reaches the console from inside the notebook kernel, also when stderr is not a terminal (issue 9)."""

from __future__ import annotations

import io
import json
import time

from memlab.progress import ENV, Progress, Relay, format_line


def test_format_names_cell_items_elapsed_eta_requests_and_hits():
    rec = {"label": "generate m", "done": 30, "total": 120, "t0": 0.0, "t": 60.0, "requests": 20, "hits": 10}
    line = format_line("pearl_mia", 5, 12, rec, 75)
    assert line == ("memlab: pearl_mia · cell 5/12 · 1:15 elapsed · generate m 30/120 · ETA 3:00 · "
                    "20 requests, 10 cache hits")


def test_relay_prints_what_the_library_reports_without_a_tty(monkeypatch):
    out = io.StringIO()  # not a terminal
    with Relay("toy", cells=4, stream=out, every=0.05) as relay:
        import os

        assert os.environ[ENV] == str(relay.path)
        with Progress("generate toy", total=3) as p:
            for _ in range(3):
                p.advance(1, requests=1)
                time.sleep(1.05)
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert lines and all(line.startswith("memlab: toy · ") for line in lines)
    assert any("generate toy 3/3" in line and "3 requests, 0 cache hits" in line for line in lines), lines
    # 3 items in ~3 s: too few seconds for an ETA (ETA_MIN_SECONDS), so none is shown
    assert not any("ETA" in line for line in lines), lines
    assert not relay.path.exists()


def test_eta_waits_for_enough_items_and_seconds():
    """The ETA appears from ETA_MIN_DONE completed items and ETA_MIN_SECONDS on the task, not before (a 2-minute job
    once showed "ETA 2:20:33" after its first, slow item)."""
    from memlab.progress import ETA_MIN_DONE, ETA_MIN_SECONDS

    def line(done: int, seconds: float) -> str:
        rec = {"label": "generate m", "done": done, "total": 100, "t0": 0.0, "t": seconds, "requests": 0, "hits": 0}
        return format_line("x", None, None, rec, seconds)

    assert "ETA" not in line(1, 60.0)                                  # one slow first item: no ETA
    assert "ETA" not in line(ETA_MIN_DONE - 1, 60.0)
    assert "ETA" not in line(50, ETA_MIN_SECONDS - 0.1)               # many fast items in the first seconds
    assert "ETA" in line(ETA_MIN_DONE, ETA_MIN_SECONDS)
    assert line(50, 10.0).endswith("ETA 0:10")                          # 50 left at 0.2 s each
    assert "ETA" not in line(100, 60.0)                                 # done: nothing left to estimate


def test_relay_log_keeps_cells_over_before_it_woke():
    """Cells that start and end between two wake-ups of the relay still get their line in a log (the runner
    test once missed cell 1, which finished in milliseconds)."""
    out = io.StringIO()
    relay = Relay("toy", cells=3, stream=out, every=60)
    for cell in (1, 2, 3):  # all three before the relay's thread first looks
        relay.start_cell(cell)
    with relay:
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert [line.split(" · ")[1] for line in lines] == ["cell 1/3", "cell 2/3", "cell 3/3"], lines


def test_relay_prints_the_last_record_when_the_run_ends():
    """A task that ends just before the run does still shows its n/n (the relay reads and prints once more when
    stopped)."""
    out = io.StringIO()
    with Relay("toy", cells=2, stream=out, every=60):
        with Progress("score toy", total=12) as p:
            p.advance(12, requests=12)
    assert "score toy 12/12" in out.getvalue().splitlines()[-1], out.getvalue()


def test_a_record_caught_half_written_is_read_whole_at_the_next_wake_up():
    """The relay may read the progress file while the kernel is still appending a line; that half line must wait for
    the rest, not be dropped (an audit's last ``units 28/28`` line once went missing from a CI log this way)."""
    out = io.StringIO()
    relay = Relay("toy", cells=1, stream=out, every=60)
    rec = {"label": "score toy", "done": 7, "total": 7, "t0": 0.0, "t": 1.0, "requests": 0, "hits": 0, "cell": None}
    line = (json.dumps(rec) + "\n").encode()
    with relay.path.open("ab") as f:
        f.write(line[:20])
    relay._read()
    assert relay.rec is None   # nothing whole yet
    with relay.path.open("ab") as f:
        f.write(line[20:])
    relay._read()
    assert relay.rec == rec
    relay.path.unlink()


def test_progress_is_silent_without_a_runner(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV, raising=False)
    with Progress("x", total=2) as p:
        p.advance(2)
    assert not list(tmp_path.iterdir())


def test_runner_console_shows_cells_and_model_progress(first_run):
    """The real runner on the real demo notebook, stderr captured (not a TTY): cell k/N lines and the
    backend's generate progress with requests arrive from the kernel (the demo's first run, tests/core/conftest.py:
    its response cache starts empty)."""
    r, _ = first_run
    assert r.returncode == 0, r.stderr[-2000:]
    progress = [line for line in r.stderr.splitlines() if line.startswith("memlab: memorization_curve · cell")]
    assert any("cell 1/" in line for line in progress), r.stderr
    assert any("generate " in line and "requests" in line for line in progress), r.stderr


def test_an_outer_task_shows_before_the_inner_one_with_its_own_eta():
    """RECAP's events (an outer task) each run a few generate calls of 1–2 requests: the line shows the events'
    count and ETA before the inner call's 0/2, which alone said nothing for 30 s steps (issue 50)."""
    outer = {"label": "RECAP t events", "done": 3, "total": 12, "t0": 0.0, "t": 90.0, "requests": 0, "hits": 0,
             "outer": True}
    inner = {"label": "generate t", "done": 0, "total": 2, "t0": 89.0, "t": 90.0, "requests": 0, "hits": 0}
    line = format_line("audit", 7, 9, inner, 100, outer)
    assert line == "memlab: audit · cell 7/9 · 1:40 elapsed · RECAP t events 3/12 · ETA 4:30 · generate t 0/2"


def test_relay_keeps_the_outer_task_while_inner_ones_come_and_go():
    out = io.StringIO()
    with Relay("toy", cells=2, stream=out, every=0.05):
        with Progress("RECAP toy events", total=2, outer=True) as events:
            for _ in range(2):
                with Progress("generate toy", total=2) as p:
                    p.advance(2, requests=2)
                time.sleep(1.05)
                events.advance(1)
        time.sleep(0.3)
    lines = out.getvalue().splitlines()
    assert any("RECAP toy events 1/2 · generate toy 2/2" in line for line in lines), lines
    assert "RECAP toy events 2/2" in lines[-1], lines


def test_a_studys_parts_show_first_with_units_and_the_overall_eta():
    """The audit's overall line (issue 50): the running part of all, the work units done of all, the ETA from the
    units done so far — "—" before it can be trusted, none once every unit is done."""
    overall = {"label": "audit", "done": 20, "total": 28, "t0": 0.0, "t": 40.0, "requests": 0, "hits": 0,
               "overall": True, "part": 3, "parts": 4, "part_name": "RECAP"}
    outer = {"label": "RECAP t events", "done": 0, "total": 2, "t0": 39.0, "t": 40.0, "requests": 0, "hits": 0,
             "outer": True}
    line = format_line("audit", 6, 8, None, 45, outer, overall)
    assert line == ("memlab: audit · cell 6/8 · 0:45 elapsed · part 3/4 RECAP · units 20/28 · ETA 0:16 · "
                    "RECAP t events 0/2")
    early = format_line("audit", 6, 8, None, 3, None, {**overall, "part": 1, "part_name": "PEARL", "done": 0, "t": 3.0})
    assert early.endswith("part 1/4 PEARL · units 0/28 · ETA —")
    done = format_line("audit", 6, 8, None, 60, None, {**overall, "part": 4, "part_name": "SimpleTrace", "done": 28})
    assert done.endswith("part 4/4 SimpleTrace · units 28/28")


def test_a_log_keeps_each_part_as_it_started_and_credits_never_pass_a_parts_units():
    """Parts that start and end between two wake-ups of the relay still get their line in a log; a part's units all
    count when it ends, and what it credits on the way never counts beyond them."""
    from memlab.progress import Parts

    out = io.StringIO()
    with Relay("study", cells=1, stream=out, every=60):
        with Parts("study", {"A": 3, "B": 5}) as parts:
            with parts.part("A"):
                parts.credit(1)
            with parts.part("B"):
                parts.credit(9)
                assert parts.done == 8
        time.sleep(0.3)
    lines = [line.split(" · ", 2)[2] for line in out.getvalue().splitlines()]
    assert lines == ["part 1/2 A · units 0/8 · ETA —", "part 2/2 B · units 3/8 · ETA —",
                     "part 2/2 B · units 8/8"], lines
