"""Generate ``dvc.yaml`` from ``conf/`` so an edit in conf/ reaches DVC without anyone remembering to.

    python -m memlab.pipeline            # rewrite dvc.yaml
    python -m memlab.pipeline --check    # exit 1 if dvc.yaml is stale (the test suite runs this)

Stages: ``data`` (corpora), one per offline model conversion, one per tiny-model family in ``conf/zoo/``, and
one per experiment in ``conf/experiment/``. An experiment stage depends on every conf file its composition
reads (config.yaml, the chosen option of each group, its experiment and scale files), on the shared library
code plus its own method package, on its notebook, and on the data and models it ``requires``. ``make
reproduce`` regenerates dvc.yaml before ``dvc repro``, so editing any of those re-runs exactly the stages that
read it, and a second ``dvc repro`` runs nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from memlab.config import CONF_DIR, experiment_names, repo_root

CORE_CODE = ["lib/memlab/__init__.py", "lib/memlab/errors.py", "lib/memlab/config.py", "lib/memlab/report.py",
             "lib/memlab/run.py", "lib/memlab/backends", "lib/memlab/data", "lib/memlab/metrics"]
CONVERTED_MODELS = ["smollm2-135m-instruct", "gemma-3-270m"]
PY = "python"


def _rel(p: Path) -> str:
    return str(p.relative_to(repo_root()))


def _zoo_families() -> dict[str, dict]:
    out = {}
    for f in sorted((CONF_DIR / "zoo").glob("*.yaml")):
        out[f.stem] = yaml.safe_load(f.read_text()) or {}
    return out


def _family_parent(spec: dict) -> str | None:
    init = spec.get("init_from")
    if isinstance(init, dict):
        return init.get("family")
    return None


def _model_out(name: str) -> str:
    return f"models/{name}" if name in CONVERTED_MODELS else f"models/tiny-neox/{name}"


def _compose_with_choices(experiment: str):
    """The experiment's config plus Hydra's record of which option each group resolved to."""
    from hydra import compose as hydra_compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=[f"experiment={experiment}"], return_hydra_config=True)


def _conf_files(full) -> list[str]:
    """Every conf file a composition read: config.yaml and the chosen option of each of our groups."""
    files = ["conf/config.yaml"]
    for group, choice in full.hydra.runtime.choices.items():
        if choice is None or group.startswith("hydra/"):
            continue
        f = CONF_DIR / group / f"{choice}.yaml"
        if f.exists():
            files.append(_rel(f))
    return sorted(set(files))


def _requires_to_deps(req: dict) -> list[str]:
    """``requires.data``/``requires.models`` → the outputs of the stages that build them."""
    deps: list[str] = []
    for d in req.get("data", []) or []:
        deps.append("data/corpora" if str(d).startswith("data/corpora") else str(d))
    for m in req.get("models", []) or []:
        parts = str(m).rstrip("/").split("/")
        if len(parts) >= 3 and parts[1] == "tiny-neox":
            deps.append("/".join(parts[:3]))
        elif len(parts) >= 2:
            deps.append("/".join(parts[:2]))
    return deps


def stages() -> dict:
    families = _zoo_families()
    st: dict[str, dict] = {}
    st["data"] = {
        "cmd": f"{PY} -m memlab.data.prepare --out data/corpora",
        "deps": ["lib/memlab/data", "lib/memlab/errors.py"] + sorted(
            _rel(p) for p in (CONF_DIR / "corpora").glob("*.yaml")),
        "outs": ["data/corpora"],
    }
    for name in CONVERTED_MODELS:
        st[f"model-{name}"] = {
            "cmd": f"{PY} -m memlab.models.build --out models --only {name}",
            "deps": ["lib/memlab/models/convert.py"],
            "outs": [_model_out(name)],
        }
    for fam, spec in families.items():
        deps = ["lib/memlab/models", f"conf/zoo/{fam}.yaml", "data/corpora"]
        parent = _family_parent(spec)
        if parent:
            deps.append(_model_out(parent))
        st[f"zoo-{fam}"] = {
            "cmd": f"{PY} -m memlab.models.build --zoo conf/zoo --out models --only {fam}",
            "deps": deps,
            "outs": [_model_out(fam)],
        }
    for exp in experiment_names():
        full = _compose_with_choices(exp)
        raw = OmegaConf.to_container(full, resolve=False)
        req = raw.get("requires") or {}
        nb = raw["notebook"]
        base = f"results/{exp}/default"
        deps = [*CORE_CODE, *(req.get("code") or []), f"notebooks/{nb}", *_conf_files(full), *_requires_to_deps(req)]
        stem = Path(nb).stem
        st[f"exp-{exp}"] = {
            "cmd": f"{PY} -m memlab.run experiment={exp}",
            "deps": list(dict.fromkeys(deps)),  # dedup, order kept
            "outs": [f"{base}/tables", f"{base}/figures", f"{base}/{stem}.ipynb", f"{base}/{stem}.html",
                     f"{base}/config.yaml"],
            "metrics": [{f"{base}/metrics.json": {"cache": False}}],
        }
    return st


HEADER = "# GENERATED by `python -m memlab.pipeline` from conf/ — do not edit; `make dvc.yaml` rewrites it.\n"


def render() -> str:
    return HEADER + yaml.safe_dump({"stages": stages()}, sort_keys=False, width=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if dvc.yaml differs from what conf/ implies")
    args = ap.parse_args(argv)
    path = repo_root() / "dvc.yaml"
    text = render()
    if args.check:
        if not path.exists() or path.read_text() != text:
            print("memlab: dvc.yaml is stale: run `make dvc.yaml` (python -m memlab.pipeline)", file=sys.stderr)
            return 1
        return 0
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
        print("memlab: dvc.yaml regenerated", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
