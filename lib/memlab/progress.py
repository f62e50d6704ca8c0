"""Progress a user can see on the console, also from inside a notebook kernel and when stderr is not a terminal.

Library side — long loops report through one object::

    with Progress("generate tiny-neox", total=len(jobs)) as p:
        ...
        p.advance(1, requests=1)      # or p.advance(k, hits=k) for cache hits

A loop whose items each run many small tasks (RECAP's events: a few generate calls of 1–2 requests each) reports
as an *outer* task (``Progress(..., outer=True)``): the line then shows it, with its own ETA, before the inner task
(``RECAP smollm2 events 3/12 · ETA 2:10 · generate smollm2 0/2``). A study run as named parts in turn (the
audit: PEARL, MIA, RECAP, SimpleTrace) reports them through :class:`Parts`, shown first with the overall ETA
(``part 3/4 RECAP · units 22/28 · ETA 0:40 · RECAP smollm2 events 0/2 · …``); a log gets a line as each part starts.

Without a runner, nothing is printed (notebooks opened by hand keep their own tqdm bars). Under the runner,
``MEMLAB_PROGRESS`` names a file the runner created; the kernel appends one JSON line per update (at most every
``_MIN_GAP`` seconds, plus the last one) and the runner's :class:`Relay` prints them on its stderr as
``memlab: <experiment> · cell 5/12 · generate tiny-neox 120/400 · 0:45 elapsed · ETA 1:30 · 98 requests, 22 cache
hits``, at most every few seconds when stderr is not a terminal (CI logs, ``make reproduce``), rewriting one line
when it is. The cell comes from papermill's "Executing Cell N" log records.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections import deque
from contextlib import contextmanager
from pathlib import Path

ENV = "MEMLAB_PROGRESS"
RELAYED = ("memlab: warning", "memlab: note")  # kernel lines the runner repeats on its console (once each)
_MIN_GAP = 1.0  # seconds between two lines written by the kernel for one task
# An ETA extrapolated from one or two items, or from the first seconds (model loading, warm-up, cache hits), is
# off by hours; it is shown only from this many completed items AND this much time spent on the task.
ETA_MIN_DONE = 3
ETA_MIN_SECONDS = 5.0


class Progress:
    """One long task: ``total`` items (None if unknown). Thread-safe; a no-op when no runner listens."""

    def __init__(self, label: str, total: int | None = None, outer: bool = False):
        self.label, self.total, self.outer = label, total, outer
        self.done = self.requests = self.hits = 0
        self.t0 = time.time()
        self._last = 0.0
        self._lock = threading.Lock()
        self._path = os.environ.get(ENV)

    def __enter__(self) -> "Progress":
        self._emit(force=True)
        return self

    def __exit__(self, *exc) -> None:
        self._emit(force=True)

    def advance(self, n: int = 1, *, requests: int = 0, hits: int = 0) -> None:
        with self._lock:
            self.done += n
            self.requests += requests
            self.hits += hits
        self._emit()

    def _emit(self, force: bool = False) -> None:
        if not self._path:
            return
        now = time.time()
        with self._lock:
            if not force and now - self._last < _MIN_GAP:
                return
            self._last = now
            line = json.dumps(self._record(now))
        try:
            with open(self._path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        except OSError:  # progress must never break a run
            self._path = None

    def _record(self, now: float) -> dict:
        """The JSON line the runner's :class:`Relay` reads."""
        return {"label": self.label, "done": self.done, "total": self.total, "t0": self.t0, "t": now,
                "requests": self.requests, "hits": self.hits, "cell": _cell(),
                **({"outer": True} if self.outer else {})}


class Parts(Progress):
    """A study run as named parts in turn (the audit: PEARL, MIA, RECAP, SimpleTrace), each of a planned count of
    work units (documents, events, prompts): the runner's line shows it before any other task, ``part 3/4 RECAP ·
    units 22/28 · ETA 0:40``, the ETA extrapolated from the units done so far (a part's units count as it reports
    them with :meth:`credit`, and all of them when it ends) and ``ETA —`` until that can be trusted
    (:data:`ETA_MIN_DONE` units, :data:`ETA_MIN_SECONDS`). The units of different parts cost differently, so the
    estimate is rough; it is revised at every part's end."""

    def __init__(self, label: str, units: dict[str, int]):
        super().__init__(label, total=sum(units.values()))
        self.units = dict(units)
        self.part_name: str | None = None
        self._credited = 0   # units of the running part counted so far

    @contextmanager
    def part(self, name: str):
        """The part ``name`` (a key of ``units``) runs inside the block; its units all count when it ends."""
        with self._lock:
            self.part_name, self._credited = name, 0
        self._emit(force=True)
        yield self
        with self._lock:
            self.done += self.units[name] - self._credited
            self._credited = self.units[name]
        self._emit(force=True)

    def credit(self, n: int) -> None:
        """``n`` more units of the running part done (never more than the part planned)."""
        with self._lock:
            n = max(0, min(n, self.units[self.part_name] - self._credited))
            self._credited += n
        self.advance(n)

    def _record(self, now: float) -> dict:
        names = list(self.units)
        part = names.index(self.part_name) + 1 if self.part_name in self.units else 0
        return {**super()._record(now), "overall": True, "part": part, "parts": len(names),
                "part_name": self.part_name}


def _cell() -> int | None:
    try:
        from IPython import get_ipython

        ip = get_ipython()
        return int(ip.execution_count) if ip is not None else None
    except Exception:  # noqa: BLE001 - no IPython, or not in a kernel
        return None


def _clock(seconds: float) -> str:
    s = int(max(seconds, 0))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def _task(rec: dict) -> list[str]:
    """A task's parts of the line: label done/total, its ETA once it can be trusted."""
    done, total = rec["done"], rec.get("total")
    parts = [f"{rec['label']} {done}/{total}" if total else f"{rec['label']} {done}"]
    took = rec["t"] - rec["t0"]
    if total and ETA_MIN_DONE <= done < total and took >= ETA_MIN_SECONDS:
        parts.append(f"ETA {_clock(took / done * (total - done))}")
    return parts


def _parts(rec: dict) -> list[str]:
    """A :class:`Parts` record's parts of the line: the running part, the units done, the overall ETA (``ETA —``
    until it can be trusted; none once every unit is done)."""
    done, total = rec["done"], rec["total"]
    eta = _task({**rec, "label": "units"})[1:] or (["ETA —"] if done < total else [])
    return [f"part {rec['part']}/{rec['parts']} {rec['part_name']}", f"units {done}/{total}", *eta]


def format_line(name: str, cell: int | None, cells: int | None, rec: dict | None, elapsed: float,
                outer: dict | None = None, overall: dict | None = None) -> str:
    parts = [f"memlab: {name}"]
    if cell is not None:
        parts.append(f"cell {cell}/{cells}" if cells else f"cell {cell}")
    if overall and overall.get("part"):
        parts += _parts(overall)
    if outer:
        parts += _task(outer)
    if rec:
        parts += _task(rec)
        if rec.get("requests") or rec.get("hits"):
            parts.append(f"{rec['requests']} requests, {rec['hits']} cache hits")
    parts.insert(2 if cell is not None else 1, f"{_clock(elapsed)} elapsed")
    return " · ".join(parts)


class _CellLog(logging.Handler):
    """Takes papermill's "Executing Cell N" records (log_output=True); drops the cell outputs it also logs."""

    def __init__(self, relay: "Relay"):
        super().__init__(logging.INFO)
        self.relay = relay

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        for line in msg.splitlines():  # the kernel's stdout/stderr arrive here (papermill's log_output)
            if line.startswith(RELAYED):
                self.relay.say(line.rstrip())
        if msg.startswith("Executing Cell"):
            digits = "".join(ch for ch in msg if ch.isdigit())
            if digits:
                self.relay.start_cell(int(digits))


class Relay:
    """Runner side: creates the progress file, points ``MEMLAB_PROGRESS`` at it, prints what arrives."""

    def __init__(self, name: str, cells: int, stream=None, every: float | None = None):
        import tempfile

        self.name, self.cells = name, cells
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = every if every is not None else (0.5 if self.tty else 5.0)
        fd, path = tempfile.mkstemp(prefix="memlab-progress-", suffix=".jsonl")
        os.close(fd)
        self.path = Path(path)
        self.cell: int | None = None
        self.rec: dict | None = None
        self.outer: dict | None = None   # the outer task running (Progress(outer=True)), shown before ``rec``
        self.overall: dict | None = None   # the study's parts (Parts), shown before ``outer``
        self._parts_started: deque[dict] = deque()   # parts started since the last wake-up, in order
        self.t0 = time.time()
        self._pos = 0
        self._printed = 0.0
        self._last_key: tuple | None = None
        self._started: deque[int] = deque()  # cells started since the last wake-up, in order
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._handler = _CellLog(self)
        self._prev_env = os.environ.get(ENV)
        self._said: set[str] = set()
        self._state = threading.Lock()   # the kernel's cells (main thread) and the reader thread change one state

    def __enter__(self) -> "Relay":
        os.environ[ENV] = str(self.path)  # the kernel inherits it
        log = logging.getLogger("papermill")
        log.addHandler(self._handler)
        log.setLevel(logging.INFO)
        log.propagate = False  # papermill's own INFO lines (cell outputs) stay out of the console
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)
        logging.getLogger("papermill").removeHandler(self._handler)
        if self._prev_env is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = self._prev_env
        if self.tty and self._printed:
            self.stream.write("\n")
        self.path.unlink(missing_ok=True)

    def say(self, line: str) -> None:
        """A kernel's warning/note on the runner's console, once per distinct line (a tty's status line is
        cleared first and comes back at the next update)."""
        with self._state:
            if line in self._said:
                return
            self._said.add(line)
            self.stream.write(("\r" + " " * 160 + "\r" if self.tty else "") + line + "\n")
            self.stream.flush()

    def kick(self) -> None:
        self._wake.set()

    def start_cell(self, cell: int) -> None:
        with self._state:
            self.cell, self.rec, self.outer, self.overall = cell, None, None, None
            self._started.append(cell)
        self.kick()

    def _read(self) -> None:
        """The records the kernel appended since the last read. Only whole lines are taken: a line caught while the
        kernel is still writing it stays in the file for the next read (taken half, it would be lost)."""
        try:
            with self.path.open("rb") as f:
                f.seek(self._pos)
                chunk = f.read()
        except OSError:
            return
        whole = chunk[:chunk.rfind(b"\n") + 1]
        self._pos += len(whole)
        for line in whole.decode("utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if rec.get("overall"):
                self._take_parts(rec)
            elif rec.get("outer"):
                self.outer = rec
            else:
                self.rec = rec
            if rec.get("cell") is not None and self.cell is None:
                self.cell = rec["cell"]

    def _take_parts(self, rec: dict) -> None:
        """A :class:`Parts` record; a new part clears the previous part's tasks."""
        if rec["part"] and (self.overall is None or rec["part"] != self.overall["part"]):
            self.rec, self.outer = None, None
            self._parts_started.append(rec)
        self.overall = rec

    def _loop(self) -> None:
        while True:
            self._wake.wait(self.every)
            self._wake.clear()
            stopping = self._stop.is_set()
            with self._state:   # a cell starting between the read and the line would drop what was just read
                self._read()
                self._show(time.time())  # also when stopping: what arrived last (a task's n/n) is not lost
            if stopping:
                break

    def _show(self, now: float) -> None:
        started = [self._started.popleft() for _ in range(len(self._started))]
        parts = [self._parts_started.popleft() for _ in range(len(self._parts_started))]
        if not self.tty:  # a log keeps every cell and part that started, also those over before this wake-up
            for cell in started[:-1]:
                self.stream.write(format_line(self.name, cell, self.cells, None, now - self.t0) + "\n")
            for rec in parts:   # each part as it started (the line below shows the running one as it is now)
                if rec is not self.overall:
                    self.stream.write(format_line(self.name, self.cell, self.cells, None, now - self.t0,
                                                  overall=rec) + "\n")
        if self.cell is None and self.rec is None and self.outer is None and self.overall is None:
            return
        line = format_line(self.name, self.cell, self.cells, self.rec, now - self.t0, self.outer, self.overall)
        key = (self.cell, json.dumps([self.overall, self.outer, self.rec], sort_keys=True))
        if not self.tty and key == self._last_key and now - self._printed < 30:
            return  # a log, not a screen: repeat an unchanged line only every 30 s
        self._last_key = key
        if self.tty:
            self.stream.write("\r" + line[:160].ljust(160))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self._printed = now
