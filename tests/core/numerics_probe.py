"""Run by tests/core/test_numerics_machines.py in a subprocess whose environment plays "another machine": build a
test zoo (kjv, kjv_aligned, pearl_base, pearl) into OUT/zoo and, unless ``--zoo-only``, run pearl_calibration and
recap_table3 on it into OUT/results (no response cache: every number is computed in this process tree).

    python tests/core/numerics_probe.py OUT [--zoo-only]
"""

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS), str(TESTS / "notebooks")]

import memlab  # noqa: E402,F401  (first: pins the numeric path before torch loads)
from conftest import build_test_zoo  # noqa: E402
from test_notebooks import CASES, FAMILIES  # noqa: E402

from memlab.config import compose  # noqa: E402
from memlab.runner.execute import execute  # noqa: E402

EXPERIMENTS = ("pearl_calibration", "recap_table3")


def main(out: Path, zoo_only: bool) -> None:
    zoo = out / "zoo"
    for spec in FAMILIES:
        if spec["name"] in ("kjv", "kjv_aligned", "pearl_base", "pearl"):
            build_test_zoo(zoo, spec)
    if zoo_only:
        return
    for name in EXPERIMENTS:
        cfg = compose(name, [f"paths.zoo={zoo / 'conf'}", f"paths.models={zoo / 'models'}",
                             f"paths.results={out / 'results'}", "cache=null", "logger=null", *CASES[name][0]])
        execute(cfg, "probe")


if __name__ == "__main__":
    main(Path(sys.argv[1]), "--zoo-only" in sys.argv[2:])
