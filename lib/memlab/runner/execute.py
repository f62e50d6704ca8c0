"""The runner: compose conf/ → execute the experiment's notebook with papermill → results/ → W&B.

    python -m memlab.run experiment=<name> [overrides]        # one run
    python -m memlab.run -m experiment=<name> a=1,2 b=x,y     # a sweep (Hydra multirun, any launcher)

Each run writes ``results/<experiment>/<run-key>/``: the executed ``<name>.ipynb``, ``<name>.html``, the
resolved ``config.yaml``, ``metrics.json``, ``tables/*.csv``, ``figures/*.png``, ``run.json`` (when it started,
how long it took). The run key is built from every command-line override except experiment/logger/cache
(``default`` when there are none), so the runs of a sweep never overwrite each other.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from memlab import numerics
from memlab.runner import preflight
from memlab.config import CONF_DIR
from memlab.errors import MemlabError
from memlab.runner.keys import run_key
from memlab.runner.known_keys import check_overrides
from memlab.model_use import check_model_override
from memlab.runner.plan import make_plan
from memlab.provenance import portable, settle_notebook, write_run_json
from memlab.runner.run_lock import per_run_key
from memlab.wandb_log import check_logger, log_wandb

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "WANDB_MODE": "offline", "DVC_NO_ANALYTICS": "1", "TOKENIZERS_PARALLELISM": "false"}


@per_run_key  # a second run of the same experiment and key refuses in one line (run_lock.py)
def execute(cfg: DictConfig, key: str, overrides: list[str] | None = None) -> Path:
    """Run one experiment for an already composed config; returns the run folder.

    The config is resolved once into the run's plan (:func:`memlab.runner.plan.make_plan`), which everything below reads.
    The run writes into ``results/<exp>/.<key>.partial/`` and that folder replaces ``results/<exp>/<key>/``
    only when the notebook succeeded, so a failed or killed run never destroys the previous good result. A
    failed run's folder (executed notebook + html) is kept as ``<key>.failed/`` beside it; a killed run's
    partial folder is picked up again by the next run of the same key (RECAP resumes its events from it).
    ``overrides``: the command line's overrides, when known (the runner), so the experiment's defaults need no
    second composition (:func:`memlab.runner.plan.experiment_defaults`).
    """
    for k, v in OFFLINE_ENV.items():
        os.environ.setdefault(k, v)
    plan = make_plan(cfg, key, overrides)
    name, work, final, failed, nb_in, root = plan.name, plan.work, plan.final, plan.failed, plan.notebook, plan.root
    check_notebook(nb_in, root)
    check_logger(plan.resolved.get("logger"))
    check_loopback()
    numerics.hand_over(plan.numerics)  # the kernel computes on the run's numeric path
    work.mkdir(parents=True, exist_ok=True)
    (work / "metrics.json").unlink(missing_ok=True)  # numbers only from this run
    config_text = portable(OmegaConf.to_yaml(OmegaConf.create(plan.cfg())), root)
    (work / "config.yaml").write_text(config_text)

    nb_out = work / nb_in.name
    t0 = time.time()
    print(f"memlab: running {name} [{key}] → {final}", file=sys.stderr)
    try:
        _papermill(nb_in, nb_out, plan.cfg())
    except KernelDied as err:  # kept like Ctrl-C: the same command resumes from the partial folder
        raise MemlabError(f"{err}; its partial folder {work} is kept (the same command resumes it) and the "
                          "previous result is untouched") from None
    except MemlabError as err:
        settle_notebook(nb_out, root)
        _html(nb_out)
        shutil.rmtree(failed, ignore_errors=True)
        work.rename(failed)
        kept = f"; the previous result in {final} is untouched" if final.exists() else ""
        raise MemlabError(f"{err} (executed notebook: {failed / nb_in.name}{kept})") from None
    settle_notebook(nb_out, root)
    _html(nb_out)
    write_run_json(work, plan.cfg(), config_text, t0, plan=plan)
    _swap_in(work, final)
    shutil.rmtree(failed, ignore_errors=True)
    metrics = json.loads((final / "metrics.json").read_text()) if (final / "metrics.json").exists() else {}
    if plan.resolved.get("logger"):
        log_wandb(plan.cfg(), final, metrics)
    print(f"memlab: {name} [{key}] done in {time.time() - t0:.0f}s; {len(metrics)} metrics in "
          f"{final / 'metrics.json'}", file=sys.stderr)
    return final


def _swap_in(work: Path, final: Path) -> None:
    """Replace ``final`` by ``work`` with two renames (the old result stays whole until the new one is in)."""
    old = final.with_name(f".{final.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    work.rename(final)
    shutil.rmtree(old, ignore_errors=True)


class KernelDied(MemlabError):
    """The notebook's kernel died while a cell ran (the OOM killer's SIGKILL, ``os._exit`` in the cell)."""


def check_notebook(nb_in: Path, root: str) -> None:
    """A truncated or corrupt notebook file is one line naming it and how to restore it, before anything runs."""
    _without_iri_grammar()
    import nbformat

    try:
        nbformat.read(str(nb_in), as_version=4)
    except Exception as err:  # noqa: BLE001 - NotJSONError, ValidationError, UnicodeDecodeError, KeyError …
        try:
            shown = nb_in.resolve().relative_to(Path(root).resolve())
        except ValueError:
            shown = nb_in
        why = " ".join(str(err).split())[:120] or type(err).__name__
        raise MemlabError(f"notebook {nb_in} is not a valid notebook ({type(err).__name__}: {why}); restore it "
                          f"(`git checkout -- {shown}`) and run again") from None


def _dead_kernel(nb_in: Path, nb_out: Path) -> KernelDied | None:
    """The cell that was running when the kernel died (papermill stamps ``start_time`` on each cell it starts and
    saves the output notebook after each cell); None when no cell started (the kernel never ran)."""
    import nbformat

    try:
        cells = nbformat.read(str(nb_out), as_version=4).cells
    except Exception:  # noqa: BLE001 - no output notebook: the kernel never ran a cell
        return None
    started = [i for i, c in enumerate(cells) if c.get("metadata", {}).get("papermill", {}).get("start_time")]
    if not started:
        return None
    i = started[-1]
    first = next((ln.strip() for ln in cells[i].source.splitlines() if ln.strip()), "")
    return KernelDied(f"the notebook's kernel died during cell {i + 1}/{len(cells)} of {nb_in.name} (`{first[:60]}`),"
                      " likely killed: out of memory (the OOM killer; see `dmesg`) or os._exit in the cell; free "
                      "memory (or make the run smaller) and run again")


def check_loopback() -> None:
    """The notebook kernel talks to the runner over 127.0.0.1: fail in one line if the loopback is down."""
    import socket

    try:
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            socket.create_connection(server.getsockname(), timeout=5).close()
    except OSError as err:
        raise MemlabError(f"cannot connect to 127.0.0.1 ({err.strerror or err}): the notebook kernel talks to the "
                          "runner over the loopback interface; bring it up (`ip link set lo up`) or run outside "
                          "the network namespace that has it down") from None


def _without_iri_grammar() -> None:
    """nbformat validates notebooks with jsonschema, whose optional IRI format checker imports ``rfc3987_syntax``,
    and that package compiles a Lark grammar when imported: 3.6 s of every run on this machine (``python -X
    importtime -c "import papermill"``), twice the rest of papermill's imports. Notebook schemas use no IRI
    format, so the runner's process goes without that one checker (an import of ``None`` in sys.modules is an
    ImportError, which jsonschema expects of an optional checker). Nothing changes once jsonschema is loaded."""
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)


def _papermill(nb_in: Path, nb_out: Path, resolved: dict) -> None:
    _without_iri_grammar()
    import nbformat
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    from memlab.progress import Relay

    cells = 1 + len(nbformat.read(str(nb_in), as_version=4).cells)  # papermill counts every cell, + parameters
    _quiet_kernel(Path(resolved["paths"]["cache"]).parent / "ipython")   # the checkout's .cache/, else the user cache
    try:
        # papermill's own bar is off when stderr is not a terminal; the relay prints cell, items, ETA, requests
        with Relay(resolved["experiment_name"], cells):
            # shutdown_kernel="immediate": once the last cell has returned and papermill has saved the notebook, the
            # kernel is killed instead of asked to exit (a graceful exit took ~3 s per run here, spent tearing down
            # torch; nothing is left to write: every study closes its files, the response cache commits each row)
            pm.execute_notebook(str(nb_in), str(nb_out), parameters={"cfg": resolved}, kernel_name="python3",
                                cwd=resolved["paths"]["root"], progress_bar=False, log_output=True,
                                shutdown_kernel="immediate")
    except PapermillExecutionError as err:
        raise MemlabError(f"notebook {nb_in.name} failed in cell {err.exec_count}: {err.ename}: "
                          f"{str(err.evalue).splitlines()[0] if err.evalue else ''}") from None
    except (RuntimeError, TimeoutError) as err:  # the kernel never started or died (jupyter_client's errors)
        if "kernel" not in str(err).lower():
            raise
        died = _dead_kernel(nb_in, nb_out)
        if died is not None:
            raise died from None
        raise MemlabError(f"the notebook kernel did not run ({str(err).splitlines()[0]}); it talks to the runner "
                          "over 127.0.0.1 — check the loopback interface and that ipykernel is installed") from None


def _quiet_kernel(ipython_dir: Path) -> None:
    """The kernel's own log lines (ipykernel 7 warns on every start that its 127.0.0.1 link is not encrypted, and
    logs the interrupt papermill sends at shutdown) would interleave with progress on the console; cell errors
    still reach the notebook and the runner's one-line error. A user's own IPYTHONDIR is left alone."""
    if "IPYTHONDIR" in os.environ:
        return
    conf = ipython_dir / "profile_default" / "ipython_kernel_config.py"
    if not conf.exists():
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text('c.IPKernelApp.log_level = "CRITICAL"  # written by memlab.runner.execute (see _quiet_kernel)\n')
    os.environ["IPYTHONDIR"] = str(ipython_dir)


def _html(nb_path: Path) -> None:
    if not nb_path.exists():
        return
    import logging

    _without_iri_grammar()
    import nbformat
    from nbconvert import HTMLExporter

    logging.getLogger("traitlets").setLevel(logging.ERROR)  # "alternative text is missing": not the user's to fix

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(str(nb_path), as_version=4))
    nb_path.with_suffix(".html").write_text(offline_html(body), encoding="utf-8")


_REMOTE_SCRIPT = re.compile(r"<script[^>]*\ssrc=\"https?://[^\"]*\"[^>]*>\s*</script>", re.I)


def offline_html(body: str) -> str:
    """The executed notebook's HTML without the scripts nbconvert loads from CDNs (require.js, MathJax): the page
    is static (outputs are already rendered) and must open offline, from a report archive, with no request."""
    return _REMOTE_SCRIPT.sub("", body)


# A sweep's jobs may run in other processes (Ray workers, submitit jobs): a job that fails writes its one-line
# error into this folder (on the checkout, which a cluster shares) instead of crashing its worker, and the driver
# prints every failure as one line at the end of the sweep and exits with status 2.
JOB_ERRORS_ENV = "MEMLAB_JOB_ERRORS"


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def _main(cfg: DictConfig) -> None:
    key = "?"
    try:
        overrides = list(HydraConfig.get().overrides.task)
        key = run_key(overrides)
        check_model_override(cfg, overrides)  # a model choice is the model under test, or refused (memlab.model_use)
        preflight.check_run(cfg)  # devices, model files, served URLs: one line before any model loads (issue 50)
        execute(cfg, key, overrides=overrides)
    except MemlabError as err:
        print(f"memlab: error: {err}", file=sys.stderr)
        errors = os.environ.get(JOB_ERRORS_ENV)
        if errors and Path(errors).is_dir():
            Path(errors, f"{os.getpid()}-{time.time_ns()}.txt").write_text(f"{cfg.get('experiment_name')} [{key}]: {err}")
            return
        sys.exit(2)


def main() -> None:
    """The runner's entry point; Ctrl-C anywhere (composing, between a sweep's jobs, inside nbclient's event loop)
    is one line and exit status 130, with none of the interrupted libraries' shutdown noise after it."""
    try:
        _entry()
        return
    except KeyboardInterrupt:
        print("memlab: interrupted (Ctrl-C); a run's partial folder is kept (the same command resumes it) and "
              "previous results are untouched", file=sys.stderr)
        code = 130
    except SystemExit as err:
        if err.code != 130:  # per_run_key already said which run was interrupted, in one line
            raise
        code = 130
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no interpreter shutdown: an interrupted event loop's "Task was destroyed" lines never print


def _entry() -> None:
    import warnings

    from memlab.config import normalize_overrides, repo_root

    _precheck(sys.argv[1:])
    sys.argv[1:] = check_overrides(sys.argv[1:])  # unknown keys: one line, exit 2, before anything runs
    flags = [a for a in sys.argv[1:] if a in ("-m", "--multirun")]  # Hydra wants flags before overrides
    rest = [a for a in sys.argv[1:] if a not in flags]
    sys.argv = [sys.argv[0], *flags, *normalize_overrides(rest)]
    # our conf/hydra/launcher/{ray,submitit_*}.yaml set the plugins' options under the plugins' own names
    warnings.filterwarnings("ignore", message=r"(?s).*is validated against ConfigStore schema with the same name")
    if not flags:
        _main()
        return
    started = time.time()  # the sweep's summary shows only this sweep's runs, never an older run's numbers
    errors = repo_root() / "outputs" / "memlab-job-errors" / f"{os.getpid()}-{time.time_ns()}"
    errors.mkdir(parents=True, exist_ok=True)
    os.environ[JOB_ERRORS_ENV] = str(errors)
    try:
        _main()
    finally:
        failed = sorted(p.read_text() for p in errors.glob("*.txt"))
        shutil.rmtree(errors, ignore_errors=True)
    from memlab.runner.sweeps import write_sweeps  # one summary of the sweep's points: results/<experiment>/sweeps/<id>/
    write_sweeps(normalize_overrides(rest), since=started)
    if failed:
        for line in failed:
            print(f"memlab: error: job failed: {line}", file=sys.stderr)
        sys.exit(2)


def _precheck(argv: list[str]) -> None:
    """Catch the common mistakes before Hydra prints a long error: malformed overrides, unknown names."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    flag_values = {i + 1 for i, a in enumerate(argv[:-1])  # Hydra's own flags with a value: --cfg job, --info config
                   if a in ("--cfg", "-c", "--package", "-p") or (a in ("--info", "-i") and "=" not in argv[i + 1])}
    argv = [a for i, a in enumerate(argv) if i not in flag_values]
    if {"-m", "--multirun"} & set(argv) and {"--cfg", "-c", "--info", "-i"} & set(argv):
        print("memlab: error: --cfg/--info show one composition: drop -m (and pass one value per key)", file=sys.stderr)
        sys.exit(2)
    for arg in argv:
        if arg.startswith("-"):
            continue
        try:
            parser.parse_overrides([arg])
        except OverrideParseException as err:
            print(f"memlab: error: malformed override '{arg}': {str(err).splitlines()[0]} "
                  "(syntax: key=value, sweeps key=a,b; quote values with special characters)", file=sys.stderr)
            sys.exit(2)
    for arg in argv:
        if "=" not in arg or arg.startswith(("-", "hydra.", "~")):
            continue
        key, value = arg.lstrip("+").split("=", 1)
        options = _group_options(key.split("@", 1)[0])
        if options is None:
            continue
        for v in value.split(","):
            if v and v != "null" and v not in options:
                print(f"memlab: error: unknown {key} '{v}'; known: {', '.join(options)}", file=sys.stderr)
                sys.exit(2)
    _check_launcher(argv)
    if not any(a.split("=", 1)[0] == "experiment" for a in argv) and \
            not {"--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i"} & set(argv):
        from memlab.config import experiment_names

        print("memlab: error: no experiment given: pass experiment=<name>; known: " + ", ".join(experiment_names()),
              file=sys.stderr)
        sys.exit(2)


def _group_options(key: str) -> list[str] | None:
    """The options of config group ``key`` (conf/<key>/*.yaml; hydra/launcher: also the installed launcher
    plugins' own), or None when ``key`` is no group this runner checks (Hydra's other groups, plain keys)."""
    import importlib.util

    if not key or key == "hydra" or ".." in key or not (CONF_DIR / key).is_dir():
        return None
    if key.startswith("hydra/") and key != "hydra/launcher":
        return None
    options = {p.stem for p in (CONF_DIR / key).glob("*.yaml")}
    if key == "hydra/launcher":
        options.add("basic")
        plugins = {"hydra_plugins.hydra_ray_launcher": ("ray", "ray_aws"),
                   "hydra_plugins.hydra_submitit_launcher": ("submitit_local", "submitit_slurm")}
        for module, names in plugins.items():
            try:
                if importlib.util.find_spec(module) is not None:
                    options.update(names)
            except (ImportError, ValueError):
                pass
    return sorted(options)


def _check_launcher(argv: list[str]) -> None:
    """A launcher that can't work here fails before Hydra starts, in one line naming the fix."""
    import shutil
    import socket

    opts = dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith("-"))
    launcher = opts.get("hydra/launcher")
    if launcher == "submitit_slurm" and shutil.which("sbatch") is None:
        print("memlab: error: hydra/launcher=submitit_slurm needs Slurm's `sbatch` on PATH; run from a Slurm login "
              "node, or use hydra/launcher=submitit_local (this machine) or hydra/launcher=ray", file=sys.stderr)
        sys.exit(2)
    address = opts.get("hydra.launcher.ray.init.address")
    if launcher != "ray" or address in (None, "null", "local"):
        return
    if address == "auto":
        if not Path("/tmp/ray/ray_current_cluster").exists():
            print("memlab: error: hydra.launcher.ray.init.address=auto but no Ray cluster runs on this machine; "
                  "start one with `ray start --head` or drop the address to let Ray start its own",
                  file=sys.stderr)
            sys.exit(2)
        return
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    try:
        socket.create_connection((host or hostport, int(port or 10001)), timeout=5).close()
    except (OSError, ValueError) as err:
        print(f"memlab: error: cannot reach the Ray cluster at {address} ({getattr(err, 'strerror', None) or err}); "
              "start it (`ray start --head`) or fix hydra.launcher.ray.init.address", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
