"""One run at a time per experiment and run key (issue 33): two runs of the same key would share
``results/<exp>/.<key>.partial/`` — the later one deleted the other's metrics and a worse folder was swapped in.

``exclusive(exp_dir, key)`` holds an advisory lock (``flock``) for the run's life on a file named by the hash of
the run's absolute ``results/<exp>/<key>`` path, in ``<tmp>/memlab-run-locks/`` (nothing is written to the results
folder before the run's own checks pass); a second run of the same key refuses at once in one line naming the
first run's pid. The kernel drops the lock when the holder exits, killed or not, so a crashed run never blocks
the next (the lock file stays, a few bytes). ``per_run_key`` wraps the runner's ``execute(cfg, key)`` with it, and
turns what would end the run in a traceback into one line: a results path that is a file, a full disk (also
when the failure path's own writes fail again), Ctrl-C (the partial folder is kept: rerunning resumes).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from memlab.errors import MemlabError


@contextlib.contextmanager
def exclusive(exp_dir: Path, key: str, what: str) -> Iterator[None]:
    path = lock_path(exp_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise MemlabError(f"another run of {what} (pid {other}) is using {exp_dir / f'.{key}.partial'}; wait "
                              f"for it to finish, or stop it (kill {other}) and run again") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def lock_path(exp_dir: Path, key: str) -> Path:
    run = str((exp_dir / key).expanduser().absolute())
    return Path(tempfile.gettempdir()) / "memlab-run-locks" / f"{hashlib.sha256(run.encode()).hexdigest()[:24]}.lock"


def per_run_key(execute: Callable) -> Callable:
    """``execute(cfg, key)`` under :func:`exclusive` for its ``results/<experiment>/`` folder."""

    @functools.wraps(execute)
    def run(cfg, key: str, *args, **kwargs):
        try:
            exp_dir = Path(str(cfg.paths.results)) / str(cfg.experiment_name)
        except Exception:  # noqa: BLE001 - an unusable config: execute's own checks say why in one line
            return execute(cfg, key, *args, **kwargs)
        if not cfg.experiment_name:
            return execute(cfg, key, *args, **kwargs)
        what = f"{cfg.experiment_name} [{key}]"
        try:
            with exclusive(exp_dir, key, what):
                return execute(cfg, key, *args, **kwargs)
        except KeyboardInterrupt:
            print(f"memlab: interrupted: {what}; its partial folder {exp_dir / f'.{key}.partial'} is kept (the "
                  "same command resumes it) and the previous result is untouched", file=sys.stderr)
            raise SystemExit(130) from None
        except OSError as err:
            raise _os_error(err, exp_dir, what) from None

    return run


def _os_error(err: OSError, exp_dir: Path, what: str) -> MemlabError:
    where = err.filename or exp_dir
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return MemlabError(f"disk full while running {what} (writing {where}); free space on that disk and run again "
                           "(the previous result is untouched; the partial folder is resumed)")
    if err.errno in (errno.ENOTDIR, errno.EEXIST) or isinstance(err, (NotADirectoryError, FileExistsError)):
        return MemlabError(f"results path {where} is in the way: a file where {what} needs a folder; move the file "
                           "or set paths.results to a folder")
    return MemlabError(f"{what}: {err.strerror or err} ({where}); check that paths.results is a writable folder")
