# memlab — the two commands: `make reproduce` and `make test`. See README.md.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
# this machine's pip config lists an index folder that may be missing; its warning is noise
QUIET_PIP := 2>&1 | { grep -v 'neither a file nor a directory' || true; }
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEBS := bible-kjv bible-kjv-text fortunes fortunes-min fortunes-de wordnet-base wordnet-sense-index chromium qemu-user
# Offline by default: no hub, W&B offline, DVC analytics off.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export WANDB_MODE ?= offline
export DVC_NO_ANALYTICS := 1
export TOKENIZERS_PARALLELISM := false
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: help setup debs reproduce report test test-fast bench lab dvc.yaml clean-results data models zoo

help:
	@echo "make reproduce  — set up, then run the whole embedded reproduction (dvc repro, stage by stage)"
	@echo "make test       — set up, then run the test suite"
	@echo "make report     — the reviewer site results/report/index.html (+ results/report-<commit>.tar.gz)"
	@echo "make bench      — benchmarks → results/bench/*.json + a printed table"
	@echo "make lab        — JupyterLab (offline-safe flags)"

setup: $(STAMP) debs

# The pinned tree is installed by uv (itself pinned in requirements.lock): a fresh venv in 77 s instead of pip's
# 216 s, bytecode compiled in both (measured here: the same 275 packages at the same versions). uv reads no pip configuration,
# so pip's find-links (where a machine may keep its CPU torch wheel, as this one does) are passed on. If uv fails,
# pip installs the same pins. --compile-bytecode, as pip does by default: without .pyc files (and with
# PYTHONDONTWRITEBYTECODE set, as on this machine) every process compiles what it imports — torch + transformers +
# ray imports took 16.8 s instead of 9.7, and Ray's 30 s start-up deadline failed a launcher test in CI.
PIP_INSTALL := install -q -c requirements.lock -e '.[test]'
$(STAMP): pyproject.toml requirements.lock lib/memlab/_mkl_vendor.c
	@command -v $(PYTHON) >/dev/null || { echo "memlab: error: $(PYTHON) not found; install Python 3.11 (or make PYTHON=/path/to/python3.11)"; exit 1; }
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip $(QUIET_PIP)
	$(PY) -m pip install -q -c requirements.lock uv $(QUIET_PIP)
	@links=$${PIP_FIND_LINKS:-$$($(PY) -m pip config get global.find-links 2>/dev/null)}; \
	echo "$(VENV)/bin/uv pip $(PIP_INSTALL) --compile-bytecode$${links:+ --find-links $$links}"; \
	$(VENV)/bin/uv pip $(PIP_INSTALL) --compile-bytecode --python $(PY) $${links:+--find-links $$links} || { \
	  echo "memlab: uv could not install the pinned tree (above); installing it with pip"; \
	  $(PY) -m pip $(PIP_INSTALL) $(QUIET_PIP); }
	@touch $(STAMP)

# llama-cpp-python[server]: the real OpenAI-compatible server the served-scoring test starts (prompt log-probs).
# PyPI has only its sdist, and the source build takes 6–8 min on 2 cores: it is built ONCE per machine into a
# wheel in the user's cache ($XDG_CACHE_HOME or ~/.cache, memlab/wheels; `make LLAMA_WHEELS=dir` to move it), like
# pip's own cache, and installed from there: a fresh clone or venv reuses it, the first one on a machine pays the
# build inside `make test`. Not in the [test] extra: that would rebuild it from source in every fresh venv.
# The version is pinned once, in requirements.lock (with its server-only dependencies). GGML_NATIVE=OFF: a
# -march=native build uses AMX on this CPU, which the VM does not enable (general protection fault on the first
# matmul), and would not be portable; OFF gives AVX2/FMA/F16C. LLAVA_BUILD=OFF: no multimodal library needed.
# --no-cache-dir: pip's own wheel cache ignores CMAKE_ARGS.
LLAMA_CPP_VERSION := $(shell sed -n 's/^llama-cpp-python==//p' requirements.lock)
LLAMA_WHEELS ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/memlab/wheels
LLAMA_STAMP := $(VENV)/.llama-cpp-$(LLAMA_CPP_VERSION)
.PHONY: llama-cpp
llama-cpp: $(LLAMA_STAMP)

$(LLAMA_STAMP): $(STAMP)
	@ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 || { \
	  echo "memlab: building llama-cpp-python $(LLAMA_CPP_VERSION) once into $(LLAMA_WHEELS)/ (6–8 min on 2 cores)"; \
	  mkdir -p $(LLAMA_WHEELS) && CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
	    $(PY) -m pip wheel -q --no-cache-dir --no-deps -w $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_CPP_VERSION) $(QUIET_PIP); }
	$(PY) -m pip install -q -c requirements.lock --find-links $(LLAMA_WHEELS) --only-binary llama-cpp-python \
	  "llama-cpp-python[server]==$(LLAMA_CPP_VERSION)" $(QUIET_PIP)
	@touch $(LLAMA_STAMP)

# Debian packages (the data packages, and chromium for the browser tests): installed when missing and we are
# root; otherwise one line naming the command.
debs:
	@missing=""; for p in $(DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "memlab: installing Debian packages:$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) || exit 1; \
	  else echo "memlab: error: missing Debian packages; run: sudo apt-get install -y$$missing"; exit 1; fi; \
	fi

dvc.yaml: $(STAMP)
	$(PY) -m memlab.pipeline

reproduce: setup dvc.yaml
	$(PY) -m memlab.reproduce
	$(PY) -m memlab.site
	@echo "memlab: results in results/ (each run: .html, figures/, tables/, metrics.json); report: results/report/index.html"

# The reviewer report: every claim of every experiment's default run, paper vs ours, as one static site. The venv
# is built when missing, never reinstalled because a pull touched pyproject.toml or the pins (the README promises
# every step after the first build runs offline; `make test` and `make reproduce` update it)
report:
	@[ -f $(STAMP) ] || $(MAKE) --no-print-directory $(STAMP)
	$(PY) -m memlab.site

# Parts of the pipeline, named in error hints: corpora, all models (conversions + tiny families), tiny families.
data: setup dvc.yaml
	$(VENV)/bin/dvc repro data

models: setup dvc.yaml
	$(VENV)/bin/dvc repro --glob 'model-*' 'zoo-*'

zoo: setup dvc.yaml
	$(VENV)/bin/dvc repro --glob 'zoo-*'

# The suite runs on every core, up to 4 (pytest-xdist; several tests load a pretrained model, ~1 GB each;
# `make test TEST_WORKERS=1` for one process). worksteal: a worker that runs out of tests takes half of another's
# queue, so one long file does not leave a core idle. The 25 slowest tests close its output (where make test's time
# goes, in every CI log).
TEST_WORKERS ?= $(shell n=$$(nproc); echo $$(( n < 4 ? n : 4 )))
# The tests write bytecode (PYTHONDONTWRITEBYTECODE emptied for them; lib/ and tests/ get git-ignored __pycache__/):
# with it set, as on this machine, each worker rewrote the asserts of all ~240 test modules (pytest caches them as
# .pyc) and every runner, kernel and CLI subprocess compiled lib/memlab again — the fast loop took 3:03 instead of
# 2:41 here (2-core Zen 3 EPYC, side by side). DVC stages depend on lib/'s .py files by name, never on a folder.
TESTS_WRITE_BYTECODE := PYTHONDONTWRITEBYTECODE=
test: setup llama-cpp
	$(TESTS_WRITE_BYTECODE) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal --durations=25 -m "not vendors" tests

# The machine-independence tests, their own CI step rather than part of `make test`: the two-vendor test
# (tests/core/test_numerics_vendors.py: the default path run as an AMD and as an Intel CPU under qemu-user, bytes
# compared, with the pre-fix path as the control that must differ) and two machines played on one
# (tests/core/test_numerics_machines.py: ISA caps, MKL branch, threads and CPUs; the native path as the control).
.PHONY: test-vendors
# the quick loop while editing: everything but the slow files (tests/conftest.py SLOW_FILES) and the vendor test
test-fast: setup
	$(TESTS_WRITE_BYTECODE) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal -m "not slow and not vendors" tests

test-vendors: setup
	$(TESTS_WRITE_BYTECODE) $(PY) -m pytest -q -p no:xdist -m vendors tests/core/test_numerics_vendors.py tests/core/test_numerics_machines.py

# BENCH_ARGS: e.g. --quick (every section at minute scale, what CI runs) or --only metrics trace
bench: setup
	$(PY) -m memlab.bench $(BENCH_ARGS)

# lab/jupyter_server_config.py: notebooks/*.ipynb are saved without outputs (running one leaves git clean), no
# news or update checks. A notebook opened here composes its experiment's default config and writes its results to
# results/<experiment>/interactive/.
lab:
	@[ -f $(STAMP) ] || $(MAKE) --no-print-directory setup
	$(VENV)/bin/jupyter lab --config=lab/jupyter_server_config.py --no-browser --ip=127.0.0.1 \
	  --LabApp.extension_manager=readonly $$( [ "$$(id -u)" = 0 ] && echo --allow-root ) --notebook-dir=.

clean-results:
	rm -rf results/*/interactive
