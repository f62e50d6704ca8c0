"""A new MIA score is one module: dropped into :mod:`memlab.metrics.mia_scores`, it reaches the per-document MIA
table, pearl_mia's list of judged scores and the audit's decisions, with no other file edited."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

from memlab.audit import decide
from memlab.backends.factory import build_backend
from memlab.methods.pearl import study as pearl_study
from memlab.methods.pearl import tables as T
from memlab.methods.pearl.tasks import first_words
from memlab.metrics import mia

TOY = "toy_max_logprob"
TOY_MODULE = f'''"""A toy score: raw = −scale · max_j ℓ_j over positions j ≥ 1 (lower = more likely member)."""

import numpy as np

from memlab.metrics.mia import mia_score


@mia_score("{TOY}", lower_is_member=True, needs_vocab=False, judged=True, settings=("toy_scale",))
def toy_max_logprob(ts, text, settings):
    return -settings["toy_scale"] * float(np.max(np.asarray(ts.logprobs, dtype=float)[1:]))
'''
BUILT_IN = ["loss", "neg_perplexity", "zlib_ratio", "min_k", "min_k_pp"]


@pytest.fixture
def toy_score(tmp_path, monkeypatch):
    """The toy module written into a folder that is added to the score package's path, as if dropped into it;
    afterwards the registry and the package are as before."""
    (tmp_path / f"{TOY}.py").write_text(TOY_MODULE)
    package = importlib.import_module(mia.SCORE_PACKAGE)
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    yield TOY
    if TOY in mia.score_names():
        mia.unregister(TOY)
    sys.modules.pop(f"{mia.SCORE_PACKAGE}.{TOY}", None)


def test_the_built_in_registry_in_table_order():
    assert mia.score_names() == ("loss", "perplexity", "zlib_ratio", "min_k", "min_k_pp")
    assert mia.judged_names() == ("loss", "zlib_ratio", "min_k", "min_k_pp")   # perplexity: monotone in loss
    assert pearl_study.mia_scores() == ["sensitivity", "gfd", "loss", "zlib_ratio", "min_k", "min_k_pp"]


def test_a_new_score_module_reaches_the_tables_and_the_audit(toy_score, micro_family):
    assert mia.score_names()[-1] == toy_score and pearl_study.mia_scores()[-1] == toy_score
    backend = build_backend(micro_family.model_cfg, None)
    docs = micro_family.members + micro_family.nonmembers
    settings = {"min_k": 0.2, "toy_scale": 1.0}
    df = T.mia_frame(backend, docs, settings=settings, max_words=60)
    assert list(df.columns) == ["doc_id", "split", *BUILT_IN, toy_score, "ppl"]
    scored = backend.score([first_words(d.text, 60) for d in docs], progress=False)
    assert np.allclose(df[toy_score], [np.max(ts.logprobs[1:]) for ts in scored])   # sign flipped once: higher = member
    with pytest.raises(ValueError, match="toy_scale"):   # its setting comes from the run, never a default
        T.mia_frame(backend, docs, settings={"min_k": 0.2}, max_words=60)

    nonmembers = micro_family.nonmembers
    mdf = decide.mia_frame(backend, {"seen": micro_family.members, "unseen": nonmembers}, settings=settings,
                           max_words=60, progress=False)
    halves = {d.id: ("calibration" if j % 2 == 0 else "evaluation") for j, d in enumerate(nonmembers)}
    mdf["half"] = mdf.doc_id.map(halves).fillna("all")
    flags = decide.decisions(None, mdf, {"seen": "unseen", "unseen": "unseen"}, score="unused", alpha=0.0,
                             target_fpr=0.5)
    toy, loss = flags[flags.method == decide.mia_label(toy_score)], flags[flags.method == decide.mia_label("loss")]
    assert len(toy) == len(loss) == len(docs)
    assert list(toy.doc_id) == list(loss.doc_id) and toy.rule.str.startswith(f"{toy_score} > ").all()


def test_the_toy_score_is_gone_after_its_test():
    assert TOY not in mia.score_names() and f"{mia.SCORE_PACKAGE}.{TOY}" not in sys.modules
