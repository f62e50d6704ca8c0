"""A new backend kind is one module + one YAML: a toy module dropped into :mod:`memlab.backends.kinds` and a preset
``backend: toy_echo`` in conf/model/ are built by the factory, known to the key check, and run PEARL and the MIA
table through the Backend interface, with no other file edited. An unknown kind is one line naming the known ones."""

from __future__ import annotations

import importlib
import math
import shutil
import subprocess
import sys

import pytest

from memlab import config as memlab_config
from memlab.runner import known_keys
from memlab.backends import registry
from memlab.backends.base import GenerationRequest
from memlab.backends.factory import build_backend
from memlab.data.records import Document
from memlab.errors import ConfigError
from memlab.methods.pearl import tables as T
from memlab.methods.pearl.engine import run_pearl
from memlab.schema import method_config

TOY = "toy_echo"
TOY_MODULE = f'''"""``backend: {TOY}``: a constant model computed in code (the reply from its YAML, word log-probs from lengths)."""

import math
from dataclasses import dataclass

from memlab.backends.base import Backend, Generation, Sample, TokenScores
from memlab.backends.registry import backend_kind
from memlab.schema import typed


@dataclass(frozen=True)
class ToyEchoConfig:
    name: str
    backend: str
    reply: str


class ToyEchoBackend(Backend):
    def __init__(self, cfg):
        super().__init__()
        self.model_id, self.revision, self.reply = cfg.name, "toy", cfg.reply.split()

    def generate(self, requests, *, progress=False):
        return [Generation([Sample(" ".join(self.reply[:r.max_new_tokens]))] * r.n) for r in requests]

    def score(self, texts, *, progress=False):
        words = [t.split() for t in texts]
        return [TokenScores(list(range(len(w))), [math.nan] + [-math.log(1 + len(x)) for x in w[1:]]) for w in words]


@backend_kind("{TOY}", config=ToyEchoConfig, served=False, weights_at_path=False)
def build_toy_echo(node):
    return ToyEchoBackend(typed(ToyEchoConfig, node, "model"))
'''
TOY_YAML = f"name: toy\nbackend: {TOY}\nreply: the same words every time whatever the prompt says\n"
WORDS = ("in the beginning was the word and the word was with the light of every morning that came over "
         "the hills where the shepherds kept their flocks by night and sang of rivers and of stones ").split()


@pytest.fixture
def toy_kind(tmp_path, monkeypatch):
    """The toy module in a folder added to the kinds package's path, and conf/ copied with the toy preset in
    conf/model/; afterwards the registry, the package and conf/ are as before."""
    (tmp_path / "kinds").mkdir()
    (tmp_path / "kinds" / f"{TOY}.py").write_text(TOY_MODULE)
    package = importlib.import_module(registry.KIND_PACKAGE)
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path / "kinds")])
    conf = shutil.copytree(memlab_config.CONF_DIR, tmp_path / "conf")
    (conf / "model" / f"{TOY}.yaml").write_text(TOY_YAML)
    monkeypatch.setattr(memlab_config, "CONF_DIR", conf)
    monkeypatch.setattr(known_keys, "COMPOSED", {})
    yield TOY
    registry.unregister(TOY)
    sys.modules.pop(f"{registry.KIND_PACKAGE}.{TOY}", None)


def _docs() -> list[Document]:
    return [Document(id=f"d{i}", text=" ".join(WORDS[i:] + WORDS[:i]), source="test", licence="none",
                     split=split) for i, split in ((0, "member"), (7, "nonmember"))]


def test_the_built_in_kinds():
    assert registry.kind_names() == ("hf", "openai")
    assert [(k.served, k.weights_at_path) for k in registry.registered()] == [(False, True), (True, False)]


def test_an_openai_model_loads_no_torch():
    code = ("import sys; from memlab.backends.factory import build_backend; "
            "build_backend({'name': 'm', 'backend': 'openai', 'base_url': 'http://127.0.0.1:9/v1', 'model_id': 'm', "
            "'api_key_env': None, 'revision': None, 'chat': False, 'can_score': False, 'score_top_k': 0, "
            "'vocab_stats': 'none', 'score_bos': 'tokenizer', 'concurrency': 1, 'max_retries': 0, 'timeout': 1, "
            "'backoff_base': 0, 'backoff_max': 0, 'max_tokens_param': 'max_tokens', 'price_in_per_mtok': 0, "
            "'price_out_per_mtok': 0}); print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


def test_a_new_kind_is_one_module_and_one_yaml(toy_kind):
    assert registry.kind_names() == ("hf", "openai", toy_kind)
    node = memlab_config.compose(overrides=[f"model={toy_kind}"]).model
    backend = build_backend(node, None)
    assert type(backend).__name__ == "ToyEchoBackend" and backend.model_id == "toy"

    gens = backend.generate([GenerationRequest(prompt="anything", max_new_tokens=3, n=2),
                             GenerationRequest(prompt="else", max_new_tokens=5)])
    assert [g.texts for g in gens] == [["the same words"] * 2, ["the same words every time"]]
    [ts] = backend.score(["a bb ccc"])
    assert ts.token_ids == [0, 1, 2] and ts.logprobs[1:] == [-math.log(3), -math.log(4)]

    docs = _docs()
    df = T.mia_frame(backend, docs, settings={"min_k": 0.2}, max_words=30)
    expected_loss = [sum(math.log(1 + len(w)) for w in d.text.split()[1:30]) / 29 for d in docs]
    assert list(df.doc_id) == ["d0", "d7"] and df["loss"].tolist() == pytest.approx([-x for x in expected_loss])

    cfg = method_config("pearl", ["method.task.max_input_words=30", "method.task.max_new_tokens=6",
                                  "method.samples=2", "method.temperature=0.7", "method.verbatim_words=0"])
    results = run_pearl(backend, docs, cfg)
    assert [r.doc_id for r in results] == ["d0", "d7"]
    assert all(r.sensitivity == 0 for r in results)   # a constant model does not notice perturbations
    # what run.json says of it: no weights path, so its identity is unknown, in words
    from memlab import model_use, provenance

    plain = memlab_config.to_plain(node)
    assert model_use._location(plain) == "toy"
    identity = provenance._model_identity(plain, "/nowhere", {})
    assert identity == f"unknown: backend {toy_kind} reads no weights from a path"


def test_the_key_check_knows_the_new_kinds_keys(toy_kind, capsys):
    assert known_keys.check_overrides(["experiment=pearl_mia", f"model={toy_kind}", "model.reply=hi"])[-1] == \
        "model.reply=hi"
    with pytest.raises(SystemExit):
        known_keys.check_overrides(["experiment=pearl_mia", f"model={toy_kind}", "+model.batch_size=3"])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "model.batch_size" in line and f"lib/memlab/backends/kinds/{toy_kind}.py (ToyEchoConfig)" in line


def test_an_unknown_kind_is_one_line_naming_the_known_kinds():
    with pytest.raises(ConfigError) as e:
        build_backend({"name": "m", "backend": "gguf_direct"}, None)
    assert str(e.value) == ("model.backend must be one of hf, openai, got 'gguf_direct' (model 'm'; "
                            "see conf/model/)")


def test_the_toy_kind_is_gone_after_its_test():
    assert TOY not in registry.kind_names() and f"{registry.KIND_PACKAGE}.{TOY}" not in sys.modules
