"""`make bench`: run every ``bench/bench_<area>.py`` and write ``results/bench/<area>.json`` + a table.

Each module exposes ``run(quick: bool = False) -> dict``; ``--quick`` runs every section at minute scale (CI runs
it, so the benchmarks cannot rot) and any exception makes the command fail. Ratios are measured side by side inside one module
run (this machine is shared and noisy); absolute timings are for orientation only.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import sys
import time
import traceback
from pathlib import Path

from memlab.config import repo_root


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def areas(root: Path) -> dict[str, Path]:
    """{area: bench/bench_<area>.py}, in name order."""
    return {p.stem.removeprefix("bench_"): p for p in sorted((root / "bench").glob("bench_*.py"))}


def run_area(area: str, path: Path, quick: bool, out_dir: Path) -> bool:
    """Run one benchmark module, write its JSON record and print its numbers; False when it raised."""
    print(f"== bench {area}", file=sys.stderr, flush=True)
    t0 = time.time()
    ok = True
    try:
        result = _load(path).run(quick=quick)
    except Exception as err:  # one broken benchmark must not hide the others' numbers; main() still fails
        traceback.print_exc()
        result, ok = {"error": f"{type(err).__name__}: {err}"}, False
    record = {"area": area, "quick": quick, "wall_s": round(time.time() - t0, 2),
              "python": platform.python_version(), "machine": platform.machine(),
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "results": result}
    (out_dir / f"{area}.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(f"\n{area} ({record['wall_s']} s) → {out_dir / (area + '.json')}")
    for k, v in _flatten(result).items():
        if isinstance(v, float):
            v = f"{v:.4g}"
        print(f"  {k:<58} {v}")
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memlab.bench", description="run memlab benchmarks")
    ap.add_argument("--quick", action="store_true",
                    help="each section at minute scale (a smoke run of every benchmark; the numbers are not the point)")
    ap.add_argument("--only", nargs="*", default=None, help="areas to run, e.g. metrics trace")
    args = ap.parse_args(argv)
    root = repo_root()
    known = areas(root)
    unknown = sorted(set(args.only or ()) - set(known))
    if unknown:
        print(f"memlab: error: unknown bench area(s) {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    out_dir = root / "results" / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    failed = [area for area, path in known.items()
              if (not args.only or area in args.only) and not run_area(area, path, args.quick, out_dir)]
    print(f"\nbench: {time.time() - t0:.0f} s" + (f"; FAILED: {', '.join(failed)}" if failed else ""), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
