"""Same numbers on every machine: one machine plays two with CPU settings the pinned numeric path must ignore.

"Machine A" caps torch's kernels below AVX2 (``ATEN_CPU_CAPABILITY=default``), caps oneDNN at SSE4.1, puts MKL on
its COMPATIBLE branch, asks for 2 library threads and runs on 1 CPU; "machine B" is this machine as it comes (all
its CPUs, nothing set). Each builds a tiny zoo and runs one PEARL and one RECAP experiment from scratch (no response
cache). The default path (``numerics: pinned``) must give byte-identical weights, tables and metrics on both; with
``MEMLAB_NUMERICS=native`` (the caller's settings honoured) the weights must differ — the settings do change the
bits, so the equality is the pinning's doing and not an accident of this CPU.
"""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.vendors   # a machine-independence test: `make test-vendors`, its own CI step

PROBE = Path(__file__).with_name("numerics_probe.py")
MACHINE_A = {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_CBWR": "COMPATIBLE",
             "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}
PINNED_VARS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "OPENBLAS_CORETYPE",
               "NPY_DISABLE_CPU_FEATURES", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "RAYON_NUM_THREADS", "MEMLAB_NUMERICS")


def _probe(out: Path, machine_a: bool, *extra: str, profile: str | None = None) -> None:
    env = {k: v for k, v in os.environ.items() if k not in PINNED_VARS}
    if machine_a:
        env.update(MACHINE_A)
    if profile:
        env["MEMLAB_NUMERICS"] = profile
    one_cpu = (lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})) if machine_a else None
    r = subprocess.run([sys.executable, str(PROBE), str(out), *extra], env=env, preexec_fn=one_cpu,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]


def _hashes(root: Path, patterns: tuple[str, ...]) -> dict[str, str]:
    files = sorted({p for pat in patterns for p in root.glob(pat) if p.is_file()})
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


WEIGHTS = ("zoo/models/**/*.safetensors",)
RESULTS = ("results/*/probe/tables/*.csv", "results/*/probe/metrics.json")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity to play a 1-CPU machine")
def test_pinned_path_gives_the_same_bytes_on_two_simulated_machines(tmp_path):
    _probe(tmp_path / "a", machine_a=True)
    _probe(tmp_path / "b", machine_a=False)
    weights_a, weights_b = _hashes(tmp_path / "a", WEIGHTS), _hashes(tmp_path / "b", WEIGHTS)
    results_a, results_b = _hashes(tmp_path / "a", RESULTS), _hashes(tmp_path / "b", RESULTS)
    assert len(weights_a) >= 3 and weights_a == weights_b
    assert any(k.endswith("metrics.json") and "recap_table3" in k for k in results_a)
    assert any(k.endswith("metrics.json") and "pearl_calibration" in k for k in results_a)
    assert results_a == results_b


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity to play a 1-CPU machine")
def test_native_path_lets_the_machine_settings_change_the_weights(tmp_path):
    _probe(tmp_path / "a", True, "--zoo-only", profile="native")
    _probe(tmp_path / "b", False, "--zoo-only", profile="native")
    weights_a, weights_b = _hashes(tmp_path / "a", WEIGHTS), _hashes(tmp_path / "b", WEIGHTS)
    assert len(weights_a) >= 3 and weights_a.keys() == weights_b.keys()
    assert weights_a != weights_b
