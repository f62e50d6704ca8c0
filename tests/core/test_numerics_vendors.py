"""Same bytes on AMD and Intel: the default numeric path run as both vendors' CPUs on this one machine.

qemu-user (Debian ``qemu-user``; ``make setup`` installs it) runs one process as another CPU model: ``-cpu
EPYC-Rome-v2`` answers CPUID as an AMD EPYC (AVX2), ``-cpu Haswell-v4`` as an Intel Haswell (AVX2). Libraries that
dispatch on CPUID — MKL inside torch, OpenBLAS, numpy's SIMD loops, glibc's libm — see that CPU and choose their
kernels for it, while qemu computes every instruction the same way, so a difference between the two runs is the
libraries' choice. tests/core/vendor_probe.py trains a small zoo family, generates, scores and runs the metrics and
the MKL-bound ops in one process; each run writes the sha256 of every result.

- AMD and Intel must give the same hashes, and so must this machine run natively (whatever its CPU: AVX-512 and
  AMX here), under ``numerics: pinned``.
- The control: the pinned profile's variables without the vendor answer (``--mkl-checks-vendor``, the default path
  as it was at b1947bd) run as the AMD CPU must give other weights and other MKL results than Intel: the comparison
  can fail on the machine it runs on.

Slow (three emulated processes, ~10 min on 2 cores), so ``make test`` leaves it to its own CI step:
``make test-vendors`` (``pytest -m vendors``).
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.vendors

PROBE = Path(__file__).with_name("vendor_probe.py")
CPUS = {"intel": "Haswell-v4", "amd": "EPYC-Rome-v2"}
MKL_OPS = ("torch.mm 300x257@257x129", "torch.exp", "torch.log", "torch.sqrt", "torch.erf")


def _start(tmp: Path, name: str, cpu: str | None, *flags: str) -> tuple[subprocess.Popen, Path]:
    qemu = shutil.which("qemu-x86_64")
    if cpu and qemu is None:
        pytest.fail("qemu-x86_64 not found: install Debian's qemu-user (`make setup` does) to run the two-vendor test")
    out = tmp / f"{name}.json"
    cmd = [*([qemu, "-cpu", cpu] if cpu else []), sys.executable, str(PROBE), str(out), str(tmp / name), *flags]
    log = (tmp / f"{name}.log").open("w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), out


def _finish(proc: subprocess.Popen, out: Path) -> dict:
    code = proc.wait(timeout=3600)
    tail = out.with_suffix(".log").read_text()[-3000:]
    assert code == 0, f"{out.stem} probe failed ({code}):\n{tail}"
    return json.loads(out.read_text())


def _flat(d: dict, prefix: str = "") -> dict:
    flat = {}
    for k, v in d.items():
        flat.update(_flat(v, f"{prefix}{k}/") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return flat


def test_amd_and_intel_give_the_same_bytes_and_the_vendor_check_would_not(tmp_path):
    runs = {"intel": _start(tmp_path, "intel", CPUS["intel"]),
            "amd": _start(tmp_path, "amd", CPUS["amd"]),
            "amd_vendor_check": _start(tmp_path, "amd_vendor_check", CPUS["amd"], "--mkl-checks-vendor")}
    native = _finish(*_start(tmp_path, "native", None))
    results = {name: _flat(_finish(*run)) for name, run in runs.items()}
    intel, amd, control = results["intel"], results["amd"], results["amd_vendor_check"]

    assert len([k for k in intel if k.startswith("weights/")]) == 2   # epoch 1 and final
    differ = sorted(k for k in intel if intel[k] != amd.get(k))
    assert not differ, f"AMD and Intel differ in {differ}"
    assert intel["mkl_vendor_answered"] and amd["mkl_vendor_answered"] and not control["mkl_vendor_answered"]
    differ = sorted(k for k in intel if intel[k] != _flat(native).get(k))
    assert not differ, f"this machine (native) and the emulated Intel differ in {differ}"
    # the control: MKL left to check the vendor changes the bits, so the equality above is the vendor answer's doing
    assert [k for k in intel if k.startswith("weights/") and intel[k] != control[k]], "control: same weights"
    assert [op for op in MKL_OPS if intel[f"ops/{op}"] != control[f"ops/{op}"]], "control: same MKL results"
