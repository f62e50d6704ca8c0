"""The numeric path: which CPU kernels, thread pools and dtypes compute our numbers (``conf/numerics/<name>.yaml``).

torch, oneDNN, MKL, OpenBLAS and numpy choose their vector kernels by CPU when they load, and different kernels
round differently: a float32 LayerNorm + softmax gives other bits under AVX-512 than under AVX2. The default
profile, ``pinned``, caps every one of them at AVX2 through environment variables, so the same config + seed give
the same bytes on every x86-64 machine with AVX2. The variables must be in the environment before those libraries
load, so :func:`pin` runs when ``memlab`` is imported (``memlab/__init__.py``) and overrides the caller's values;
every process the pipeline starts (zoo builds, runs, notebook kernels, tests) imports memlab first and inherits
them. ``numerics=native`` (or ``MEMLAB_NUMERICS=native`` for the zoo builds) leaves the machine to choose.

The CPU's vendor is a second choice no variable pins: MKL (inside torch) runs other sgemm and vector-math kernels
on a CPU that is not Intel's, whatever ``MKL_CBWR`` says. A pinning profile with ``mkl_vendor: intel`` therefore
also loads ``memlab._mkl_vendor`` (a one-function C library built with the package) before torch, which answers
MKL's vendor question "Intel" on every CPU, so AMD and Intel run the same MKL branch (docs/numerics.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PROFILE_ENV = "MEMLAB_NUMERICS"   # the profile a process pins (the runner sets it for its notebook kernel)
_CHECKOUT_CONF = Path(__file__).resolve().parents[2] / "conf"
# the checkout's conf/, else the copy shipped in the installed package (memlab.config.project_dir)
_CONF = _CHECKOUT_CONF if (_CHECKOUT_CONF / "config.yaml").is_file() else Path(__file__).resolve().parent / "shipped" / "conf"
_caller_env: dict[str, str | None] = {}   # what pin() replaced, so a `native` run can hand the kernel the caller's


_PARSED: dict[tuple[str, int, int], object] = {}


def read_yaml(path: str | Path):
    """``yaml.safe_load`` of a conf/ file, parsed once per process (issue 30: a run reads its config once); each call
    returns a fresh copy (callers may change it), and a file whose size or mtime changed is parsed again. The plain
    YAML files outside the Hydra composition (numerics profiles, zoo families, paper claims) are read through this
    (``memlab.config.read_yaml``). It lives here because ``import memlab`` reads conf/numerics/ first, before any
    import of omegaconf, and every memlab process has this module."""
    import copy

    import yaml

    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _PARSED:
        _PARSED[key] = yaml.safe_load(p.read_text())
    return copy.deepcopy(_PARSED[key])


def default_profile() -> str:
    """The profile named in ``conf/config.yaml``'s defaults list (``numerics: <name>``)."""
    for entry in read_yaml(_CONF / "config.yaml")["defaults"]:
        if isinstance(entry, dict) and "numerics" in entry:
            return str(entry["numerics"])
    raise RuntimeError("conf/config.yaml names no numerics profile in its defaults list")


def active() -> str:
    """The profile this process was pinned to (the runner hands its run's profile to the kernel)."""
    return os.environ.get(PROFILE_ENV) or default_profile()


def load_profile(name: str) -> dict:
    from memlab.errors import ConfigError

    path = _CONF / "numerics" / f"{name}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in (_CONF / "numerics").glob("*.yaml"))
        raise ConfigError(f"unknown numerics profile {name!r} ({PROFILE_ENV} or numerics=); known: {', '.join(known)}")
    return read_yaml(path)


def pin(name: str | None = None) -> dict:
    """Put the profile's variables into this process's environment (and so its children's) and return the profile.
    Too late for a library already imported: torch keeps the kernels it chose, so that is a warning."""
    name = name or os.environ.get(PROFILE_ENV) or default_profile()
    profile = load_profile(name)
    env = {k: str(v) for k, v in (profile.get("env") or {}).items()}
    late = [m for m in ("torch", "numpy") if m in sys.modules]
    changed = [k for k, v in env.items() if os.environ.get(k) != v]
    if late and changed:
        print(f"memlab: warning: {', '.join(late)} was imported before memlab, so numerics={name} could not pin "
              f"{', '.join(changed)}; import memlab first", file=sys.stderr)
    for k, v in env.items():
        _caller_env.setdefault(k, os.environ.get(k))
        os.environ[k] = v
    os.environ[PROFILE_ENV] = name
    if profile.get("mkl_vendor") == "intel":
        load_mkl_vendor_answer(late=bool(late))
    return profile


_MKL_VENDOR_LIB: list = []   # the loaded library, kept alive for the process


def load_mkl_vendor_answer(late: bool = False) -> None:
    """Load ``memlab._mkl_vendor`` into the process's global symbol scope, before torch loads MKL, so that MKL's
    ``mkl_serv_intel_cpu_true`` resolves to ours (returns 1) and every CPU vendor takes the branch ``MKL_CBWR``
    names. Loaded after torch it may come too late: that is the warning :func:`pin` already prints."""
    if _MKL_VENDOR_LIB:
        return
    import ctypes
    import importlib.util

    from memlab.errors import ConfigError

    spec = importlib.util.find_spec("memlab._mkl_vendor")
    if spec is None or not spec.origin:
        raise ConfigError("memlab._mkl_vendor is not built (the default numerics=pinned needs it so that MKL runs "
                          "one code path on AMD and Intel); reinstall memlab: `make setup` or `pip install .`")
    _MKL_VENDOR_LIB.append(ctypes.CDLL(spec.origin, mode=ctypes.RTLD_GLOBAL))
    if late:
        print("memlab: warning: torch was imported before memlab, so MKL may keep its own vendor check; "
              "import memlab first", file=sys.stderr)


def mkl_vendor_answered() -> bool:
    """Whether this process loaded the vendor answer (run.json records it)."""
    return bool(_MKL_VENDOR_LIB)


def child_environ(name: str) -> dict[str, str]:
    """The environment a child process should start with for profile ``name``: this process's, with the pinned
    variables of a pinning profile, or the caller's own values (as before :func:`pin`) for ``native``."""
    env = dict(os.environ)
    for k, v in _caller_env.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    env.update({k: str(v) for k, v in (load_profile(name).get("env") or {}).items()})
    env[PROFILE_ENV] = name
    return env


def hand_over(name: str) -> None:
    """Make this process's environment :func:`child_environ` of ``name`` (the runner, before it starts the
    notebook kernel)."""
    env = child_environ(name)
    for k in set(os.environ) - set(env):
        del os.environ[k]
    os.environ.update(env)


def cpu() -> dict:
    """The CPU as Linux reports it: model name and the vector/matrix instruction sets that decide kernels."""
    model, flags = "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown":
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    wide = [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if f in flags]
    return {"model": model, "isa": wide, "cores": os.cpu_count()}


def describe(profile: dict) -> dict:
    """What run.json and the report record about the numeric path a process ran under."""
    info = cpu()
    pinned = bool(profile.get("env"))
    capable = "avx2" in info["isa"] and "fma" in info["isa"]
    return {"profile": profile["name"], "cpu": info["model"], "isa": info["isa"], "cores": info["cores"],
            "machine_independent": pinned and capable,
            "kernels": ("AVX2 (pinned)" if pinned and capable else
                        "this CPU's own (numerics=native)" if not pinned else
                        "below AVX2: this CPU lacks AVX2/FMA, so the pinned path is not available here"),
            "env": {k: os.environ.get(k) for k in sorted(profile.get("env") or {})},
            "mkl_vendor": "every CPU takes Intel's MKL branch (memlab._mkl_vendor)" if mkl_vendor_answered() else
                          "MKL checks the CPU vendor",
            "pretrained_dtype": profile["pretrained_dtype"]}
