"""Generate ``dvc.yaml`` from ``conf/`` so an edit in conf/ reaches DVC without anyone remembering to.

    python -m memlab.pipeline            # rewrite dvc.yaml
    python -m memlab.pipeline --check    # exit 1 if dvc.yaml is stale (the test suite runs this)

Stages: ``data`` (corpora), one per offline model conversion, one per tiny-model family in ``conf/zoo/``, and
one per experiment in ``conf/experiment/`` (:func:`experiment_stage`). Config files are DVC ``params``, not
``deps``: DVC compares their values, so a comment edit re-runs nothing. An experiment's params are every conf
file its composition reads (Hydra's defaults list: config.yaml, each group's option, experiment files an
experiment pulls in, scale files), the ``conf/paper`` files holding its claims and the ``conf/model`` presets it
opens by name; its deps are every lib/ file reachable by imports from the runner, the report helper, its
study function's module (``study``), its notebook, the ``_schema_`` classes its config names and its own claim
rules, plus the prompt folders its method groups name (``prompts_dir``), its notebook, the data it ``requires`` and the models its config
names (:func:`memlab.model_use.required_models`: derived, never listed).
``make reproduce`` regenerates dvc.yaml before ``dvc repro``, so editing any of those re-runs exactly the stages
that read it, and a second ``dvc repro`` runs nothing.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from memlab.config import CONF_DIR, experiment_names, hydra_composition, repo_root
from memlab.errors import ConfigError, one_line_errors
from memlab.model_use import MODEL_KEYS, named, preset_names, required_models, required_threads
from memlab.models.zoo import load_family

# what every experiment runs through; everything else an experiment uses is found from its study module (`study`),
# its notebook's imports
ENTRY_MODULES = ["memlab.run", "memlab.report"]
CONVERTED_MODELS = ["smollm2-135m-instruct", "gemma-3-270m"]
# zoo builds train this many models at once, each in its own process on one torch thread, so the weights are
# bit-identical whatever this number is (the sizes of a family are independent). 1: `make reproduce` already
# fills the cores with whole stages, and a stage wanting two cores would wait for both to be free while
# one-core stages keep starting beside each other (measured: zoo-pearl_base, first on the critical path, sat
# ready for minutes behind one-core stages).
ZOO_JOBS = 1
# Every stage says how many cores it keeps busy (`meta.cores`, which DVC ignores): `make reproduce` runs stages
# side by side while their cores fit the machine (memlab.reproduce). Corpora and conversions are one process on
# one core; a zoo family trains min(ZOO_JOBS, its sizes) processes; an experiment uses as many torch threads as
# the largest `threads` among the models it reads (memlab.model_use.required_threads). `meta.after` (from an
# experiment's `requires.after`) orders an experiment after others whose cached model responses it reuses —
# for `make reproduce` only: it is no DVC dependency (neither run reads the other's outputs). `meta.minutes`
# (`requires.minutes`: the run's one-core wall minutes, measured; a zoo family's `minutes`: its build's) lets the
# longest chains start first.
PY = "python"
# keys of a zoo family file that only schedule its build (memlab.reproduce), so editing them rebuilds nothing
SCHEDULING_KEYS = ("minutes",)


_LAZY = re.compile(r"memlab(\.\w+)+")


def _module_of(name: str) -> str:
    """The module a dotted name is or points into: itself, or for a code pointer ``<module>.<function>`` (a
    config's study, a method-built corpus) its module."""
    return name if _module_file(name) is not None else name.rpartition(".")[0]


def _module_file(name: str) -> Path | None:
    base = repo_root() / "lib" / Path(*name.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _imports(path: Path, module: str) -> set[str]:
    """memlab modules ``path`` imports (absolute and relative; inside functions too: lazy imports count), and the
    modules its "memlab.pkg.module" strings name (registries' plugin packages, code pointers)."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)  # `from pkg import module`
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _LAZY.fullmatch(node.value):
            owner = _module_of(node.value)   # a registry's plugin package (all of its modules), or a code
            found.update([owner, *(_plugins(owner) if owner == node.value else [])])   # pointer's module
    return {m for m in found if m == "memlab" or m.startswith("memlab.")}


def _plugins(name: str) -> list[str]:
    """Every module of the package a string names (a plugin package whose modules are imported at run time, e.g.
    ``memlab.metrics.mia_scores``: a score dropped into it is code its users depend on); [] for a module."""
    init = _module_file(name)
    if init is None or init.name != "__init__.py":
        return []
    return [f"{name}.{f.stem}" for f in sorted(init.parent.glob("*.py")) if f.name != "__init__.py"]


def _corpus_deps(spec: dict) -> list[str]:
    """Code of the built corpora a zoo family's member or non-member groups read (a corpus named by its loader,
    ``<module>.<function>``, as a study is named), and the prompt folders they fill."""
    groups = [*(spec.get("members") or []), *(spec.get("nonmembers") or [])]
    mods = {_module_of(str(g["corpus"])) for g in groups if "." in str(g.get("corpus"))}
    folders = {str(o["prompts_dir"]) for o in ((g.get("options") or {}) for g in groups) if o.get("prompts_dir")}
    return code_deps(sorted(mods)) + sorted(folders)


# C sources a module loads at run time: its numbers depend on them as on its Python (memlab.numerics loads the MKL
# vendor answer before torch)
NATIVE_SOURCES = {"memlab.numerics": (Path(__file__).with_name("_mkl_vendor.c"),)}


def code_deps(roots: list[str]) -> list[str]:
    """Every lib/ file reachable by imports from the ``roots`` modules (parents' __init__ included)."""
    seen: set[str] = set()
    todo = list(roots)
    files: set[Path] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # importing a.b.c runs a and a.b
        f = _module_file(name)
        if f is None:
            continue
        files.add(f)
        files.update(NATIVE_SOURCES.get(name, ()))
        todo.extend(_imports(f, name))
    return sorted(_rel(f) for f in files)


def notebook_imports(nb: Path) -> list[str]:
    """memlab modules the notebook's code cells import."""
    cells = json.loads(nb.read_text())["cells"]
    found: set[str] = set()
    for c in cells:
        if c.get("cell_type") != "code":
            continue
        src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        src = "\n".join(line for line in src.splitlines() if not line.lstrip().startswith(("%", "!")))
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
    return sorted(m for m in found if m == "memlab" or m.startswith("memlab."))


def _schema_modules(raw) -> list[str]:
    """Modules named by ``_schema_`` keys anywhere in the experiment's config (the runner imports them)."""
    out: list[str] = []
    if isinstance(raw, dict):
        for k, v in raw.items():
            if k == "_schema_" and isinstance(v, str):
                out.append(v.rpartition(".")[0])
            else:
                out.extend(_schema_modules(v))
    elif isinstance(raw, list):
        for v in raw:
            out.extend(_schema_modules(v))
    return out


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


def _composition(experiment: str):
    """The experiment's config and every conf file its composition read (Hydra's defaults list: config.yaml,
    the chosen option of each group, files an experiment file pulls in by its own defaults, scale files)."""
    cfg, defaults = hydra_composition([f"experiment={experiment}"], with_defaults=True)
    paths = [CONF_DIR / f"{d.config_path}.yaml" for d in defaults]
    files = {_rel(p) for p in paths if p.is_file()}
    return OmegaConf.to_container(cfg, resolve=False), sorted(files)


def paper_files(experiment: str) -> list[str]:
    """The conf/paper files holding a claim this experiment tests (a claim's ``experiment:`` field)."""
    out = []
    for path in sorted((CONF_DIR / "paper").glob("*.yaml")):
        claims = (yaml.safe_load(path.read_text()) or {}).get("claims") or []
        if any(isinstance(c, dict) and c.get("experiment") == experiment for c in claims):
            out.append(_rel(path))
    return out


def model_presets(raw: dict) -> list[str]:
    """The conf/model files an experiment opens by name beside its own ``model`` group: presets named in its
    ``params``/``method`` or its ``models`` list (:func:`memlab.model_use.named`)."""
    presets = preset_names()
    return sorted({f"conf/model/{n}.yaml" for _, n in named(raw, MODEL_KEYS) if n in presets})


# how a method group names a prompt folder of this repository (conf/paths: prompts: ${.root}/prompts)
PROMPTS_ROOT = "${paths.prompts}/"

def prompt_folders(raw: dict) -> list[str]:
    """The prompt folders a composition's method groups read: each ``prompts_dir`` under ``method``/``methods`` that
    lies in the repository's ``${paths.prompts}`` (a user's own folder is not a pipeline file), in config order —
    derived like the models (no ``requires.code`` list to disagree with it). A study that reads no prompts sets its
    group's ``prompts_dir: null`` (trace_validation)."""
    out: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "prompts_dir" and isinstance(v, str) and v.startswith(PROMPTS_ROOT):
                    out.append("prompts/" + v.removeprefix(PROMPTS_ROOT).strip("/"))
                else:
                    walk(v)

    walk({"method": raw.get("method"), "methods": raw.get("methods")})
    return list(dict.fromkeys(out))


def _requires_to_deps(req: dict) -> list[str]:
    """``requires.data`` → the outputs of the stages that build them."""
    return ["data/corpora" if str(d).startswith("data/corpora") else str(d) for d in req.get("data") or []]


def result_files(conf_files: list[str]) -> list[str]:
    """The conf files whose values can change a result: not those of the result-free groups (where outputs go, how
    runs are logged and cached: :data:`memlab.runner.keys.NON_RESULT_KEYS` but ``experiment``, which is left out of run keys
    because it names the folder, not because its file holds no result settings), so a new W&B project reruns nothing."""
    from memlab.runner.keys import NON_RESULT_KEYS

    free = set(NON_RESULT_KEYS) - {"experiment"}
    return [f for f in conf_files if len(Path(f).parts) < 3 or Path(f).parts[1] not in free]


def whole_files(files: list[str]) -> list[dict]:
    """DVC ``params`` entries tracking every value of each YAML file (and none of its comments)."""
    return [{f: None} for f in files]


def run_outputs(run_dir: str, notebook_stem: str) -> dict:
    """The DVC outputs of one run folder. Every output is cached — metrics.json too — so `dvc push` and
    `dvc pull` carry all of them (a ``cache: false`` metrics file is left behind and shows as deleted)."""
    return {"outs": [f"{run_dir}/tables", f"{run_dir}/figures", f"{run_dir}/{notebook_stem}.ipynb",
                     f"{run_dir}/{notebook_stem}.html", f"{run_dir}/config.yaml"],
            "metrics": [f"{run_dir}/metrics.json"]}


def numerics_params() -> list[dict]:
    """The default numeric path (conf/numerics/<profile>.yaml): every process pins it when it imports memlab, so
    every stage's bytes depend on it (experiments get it from their composition too)."""
    from memlab.numerics import default_profile

    return whole_files([f"conf/numerics/{default_profile()}.yaml"])


def stages() -> dict:
    families = _zoo_families()
    st: dict[str, dict] = {}
    st["data"] = {
        "cmd": f"{PY} -m memlab.data.prepare --out data/corpora",
        "deps": code_deps(["memlab.data.prepare"]),
        "params": whole_files(sorted(_rel(p) for p in (CONF_DIR / "corpora").glob("*.yaml"))) + numerics_params(),
        "outs": ["data/corpora"],
        "meta": {"cores": 1},
    }
    for name in CONVERTED_MODELS:
        st[f"model-{name}"] = {
            "cmd": f"{PY} -m memlab.models.build --out models --only {name}",
            "deps": code_deps(["memlab.models.convert"]),
            "params": numerics_params(),
            "outs": [_model_out(name)],
            "meta": {"cores": 1},
        }
    for fam, spec in families.items():
        deps = sorted({*code_deps(["memlab.models.build", "memlab.models.zoo", "memlab.models.tiny"]),
                       *_corpus_deps(spec)}) + ["data/corpora"]
        parent = _family_parent(spec)
        if parent:
            deps.append(_model_out(parent))
        st[f"zoo-{fam}"] = {
            "cmd": f"{PY} -m memlab.models.build --zoo conf/zoo --out models --only {fam} --jobs {ZOO_JOBS}",
            "deps": deps,
            # every key of the family file but `minutes` (a scheduling hint, not part of the build)
            "params": [{f"conf/zoo/{fam}.yaml": [k for k in spec if k not in SCHEDULING_KEYS]}, *numerics_params()],
            "outs": [_model_out(fam)],
            "meta": {"cores": min(ZOO_JOBS, len(load_family(fam).sizes)),
                     **({"minutes": float(spec["minutes"])} if spec.get("minutes") is not None else {})},
        }
    for exp in experiment_names():
        if stage_wanted(exp):
            st[f"exp-{exp}"] = experiment_stage(exp)
    return st


def stage_wanted(exp: str) -> bool:
    """An experiment is a DVC stage unless its file says ``requires.stage: false`` (e.g. the audit of a user's model:
    run by hand, not part of the reproduction)."""
    import yaml

    spec = yaml.safe_load((CONF_DIR / "experiment" / f"{exp}.yaml").read_text()) or {}
    return (spec.get("requires") or {}).get("stage", True) is not False


def experiment_stage(exp: str) -> dict:
    """One experiment's stage. Its code: every lib/ file reachable from the runner, the report helper, its
    notebook's imports, its study function's module (``study``), the ``_schema_`` classes its config names and its
    own claim rules (not the others').
    Its config, as DVC ``params`` (values, not comments): every conf file its composition read, the paper
    files of its claims and the model presets it opens by name. Then prompts, notebook, data and the models its
    config names (:func:`memlab.model_use.required_models`, which refuses a leftover ``requires.models``)."""
    raw, conf_files = _composition(exp)
    req = raw.get("requires") or {}
    wrong = [a for a in req.get("after") or [] if a not in experiment_names() or a == exp]
    if wrong:
        raise ConfigError(f"experiment {exp}: requires.after names {wrong}: not another experiment")
    nb = raw["notebook"]
    roots = [*ENTRY_MODULES, *notebook_imports(repo_root() / "notebooks" / nb), *_schema_modules(raw),
             str(raw["study"]).rpartition(".")[0], *([raw["rules"]] if raw.get("rules") else [])]
    code = code_deps(roots)
    deps = [*code, *prompt_folders(raw), f"notebooks/{nb}", *_requires_to_deps(req),
            *required_models(raw)]
    params = list(dict.fromkeys([*result_files(conf_files), *paper_files(exp), *model_presets(raw)]))
    return {
        "cmd": f"{PY} -m memlab.run experiment={exp}",
        "deps": list(dict.fromkeys(deps)),  # dedup, order kept
        "params": whole_files(params),
        **run_outputs(f"results/{exp}/default", Path(nb).stem),
        "meta": {"cores": max(required_threads(raw).values(), default=1),
                 **({"after": [f"exp-{a}" for a in req["after"]]} if req.get("after") else {}),
                 **({"minutes": float(req["minutes"])} if req.get("minutes") is not None else {})},
    }


HEADER = "# GENERATED by `python -m memlab.pipeline` from conf/ — do not edit; `make dvc.yaml` rewrites it.\n"


def render() -> str:
    return HEADER + yaml.safe_dump({"stages": stages()}, sort_keys=False, width=120)


@one_line_errors
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
