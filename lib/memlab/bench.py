"""`make bench`: run every ``bench/bench_<area>.py`` and write ``results/bench/<area>.json`` + a table.

Each module exposes ``run(quick: bool = False) -> dict``. Ratios are measured side by side inside one module
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="run memlab benchmarks")
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    ap.add_argument("--only", nargs="*", default=None, help="areas to run, e.g. metrics trace")
    args = ap.parse_args(argv)
    root = repo_root()
    out_dir = root / "results" / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    failures = 0
    for path in sorted((root / "bench").glob("bench_*.py")):
        area = path.stem.removeprefix("bench_")
        if args.only and area not in args.only:
            continue
        print(f"== bench {area}", file=sys.stderr)
        t0 = time.time()
        try:
            result = _load(path).run(quick=args.quick)
        except Exception as err:  # one broken benchmark must not hide the others' numbers
            traceback.print_exc()
            result = {"error": f"{type(err).__name__}: {err}"}
            failures += 1
        record = {"area": area, "quick": args.quick, "wall_s": round(time.time() - t0, 2),
                  "python": platform.python_version(), "machine": platform.machine(),
                  "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "results": result}
        (out_dir / f"{area}.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        print(f"\n{area} ({record['wall_s']} s) → {out_dir / (area + '.json')}")
        for k, v in _flatten(result).items():
            if isinstance(v, float):
                v = f"{v:.4g}"
            print(f"  {k:<58} {v}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
