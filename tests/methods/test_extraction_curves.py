"""Experiment extraction_curves' study (issue 51) end to end on a micro family continued from a micro parent: one row
per size x epoch x split x n, shares monotone in n, p_z checked against the model's own teacher-forced log-probs,
greedy extraction consistent with log p_z under greedy, epoch 0 read from the parent."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from memlab.errors import ConfigError
from memlab.methods.extraction_curves import ExtractionCurvesParams, Sampler, study
from memlab.models.catalog import Catalog
from memlab.study_run import StudyRun

KJV = {"corpus": "kjv", "options": {"unit": "chapter"}}
MEMBERS = ["kjv/chapter/Ruth/2", "kjv/chapter/Ruth/3", "kjv/chapter/Jonah/1"]
NONMEMBERS = ["kjv/chapter/Jonah/2", "kjv/chapter/Jonah/3", "kjv/chapter/Joel/1", "kjv/chapter/Obadiah/1"]


def _params(**over) -> ExtractionCurvesParams:
    p = dict(family="child", sizes=["xs"], epochs=[0, 1, 2], offset=3, prefix_tokens=8, suffix_tokens=6,
             sampler=Sampler(temperature=1.0, top_k=None, top_p=None), ns=[1, 100, 10**6], plot_ns=[1, 10**6],
             discoverable_p=0.5, level=0.95, batch_size=3)
    return ExtractionCurvesParams(**{**p, **over})


@pytest.fixture(scope="module")
def micro_zoo(tmp_path_factory, zoo_builder, one_chapter_family):
    root = tmp_path_factory.mktemp("extcurves")
    zoo_builder(root, {**one_chapter_family, "name": "base"})
    child = {k: v for k, v in one_chapter_family.items() if k not in ("sizes", "tokenizer")}
    child.update(name="child", init_from={"family": "base", "epoch": "final"}, train={"epochs": 2},
                 members=[{**KJV, "ids": MEMBERS}], nonmembers=[{**KJV, "ids": NONMEMBERS}])
    zoo_builder(root, child)
    return root


def _catalog(root):
    from memlab.config import CONF_DIR

    template = yaml.safe_load((CONF_DIR / "model" / "tiny-neox.yaml").read_text())
    return Catalog({**template, "threads": 1}, None, {"models": str(root / "models"), "zoo": str(root / "conf")})


def _run(root, tmp_path, p):
    catalog = _catalog(root)
    run = StudyRun(cfg=None, catalog=catalog, seed=0, out_dir=tmp_path, results_root=tmp_path, progress=False)
    return study(None, p, run), catalog


def _own_log_probs(catalog, family, size, epoch, p):
    """Σ of the model's teacher-forced log-probs of each child document's suffix given its prefix (T = 1, no
    truncation)."""
    fam = catalog.family("child")
    a, b = p.offset, p.offset + p.prefix_tokens + p.suffix_tokens
    with catalog.checkpoint(family, size, epoch) as m:
        ids = [list(m.tokenizer(d.text)["input_ids"])[a:b] for d in fam.members + fam.nonmembers]
        return np.array([np.sum(ts.logprobs[p.prefix_tokens:]) for ts in m.score_token_ids(ids)])


def test_study_end_to_end_on_a_micro_family(micro_zoo, tmp_path):
    p = _params()
    res, catalog = _run(micro_zoo, tmp_path, p)
    df, t = res.tables["pairs"], res.tables["extraction_by_checkpoint"]
    n_docs = len(MEMBERS) + len(NONMEMBERS)
    assert len(df) == len(p.epochs) * n_docs
    # one row per size x epoch x split x n, the sampler and the pair in every row
    assert len(t) == len(p.sizes) * len(p.epochs) * 2 * len(p.ns)
    assert set(zip(t.epoch, t.split, t.n)) == {(e, s, n) for e in p.epochs for s in ("member", "nonmember")
                                               for n in p.ns}
    assert (t.sampler == "T=1, top_k=None, top_p=None").all() and (t.offset == 3).all()
    assert (t.prefix_tokens == 8).all() and (t.suffix_tokens == 6).all() and (t.level == 0.95).all()
    assert t[t.split == "member"].n_docs.eq(len(MEMBERS)).all() and t[t.split == "nonmember"].n_docs.eq(4).all()
    for (_, split), g in t.groupby(["epoch", "split"]):
        assert g.discoverable_share.is_monotonic_increasing and g.greedy_rate.nunique() == 1
        assert (g.discoverable_ci_low <= g.discoverable_share).all()
        assert (g.discoverable_share <= g.discoverable_ci_high).all()
    # p_z at T = 1 without truncation = exp of the checkpoint's own log-probs; epoch 0 is the parent's model
    for e in p.epochs:
        lp = _own_log_probs(catalog, "child", "xs", e, p)
        assert np.allclose(df[df.epoch == e].log_p_z, lp, atol=1e-4)
    parent = _own_log_probs(catalog, "base", "xs", "final", p)
    assert np.allclose(df[df.epoch == 0].log_p_z, parent, atol=1e-4)
    assert not np.allclose(df[df.epoch == 2].log_p_z, parent, atol=1e-3)   # training moved the child
    # greedy: p_z under T = 0 is 1 or 0, and the 0/1 column says which; the rates are the column's means
    assert df.log_p_z_greedy.isin([0.0, -np.inf]).all()
    assert df.greedy.tolist() == (df.log_p_z_greedy == 0).astype(int).tolist()
    assert (df.log_p_z <= 0).all() and (df.log_p_z[df.greedy == 1] > -np.inf).all()
    for (e, split), g in df.groupby(["epoch", "split"]):
        r = t[(t.epoch == e) & (t.split == split)]
        assert (r.greedy_rate == g.greedy.mean()).all()
        pz = np.exp(g.log_p_z)
        assert r[r.n == 1].discoverable_share.iloc[0] == (pz >= 0.5).mean()   # n = 1: p_z >= p
        assert r[r.n == 10**6].discoverable_share.iloc[0] == (1 - (1 - pz) ** 10**6 >= 0.5).mean()
    assert set(res.figures) == {"extraction_by_epoch", "extraction_by_size"}
    assert "xs/epoch_2/member/discoverable_n1000000" in res.metrics and "xs/epoch_2/nonmember/greedy_rate" in res.metrics
    assert res.metrics["n_members"] == 3 and res.metrics["n_nonmembers"] == 4


def test_sampler_is_read_from_params_and_bad_settings_are_refused(micro_zoo, tmp_path):
    p = _params(epochs=[2], sampler=Sampler(temperature=0.7, top_k=5, top_p=0.9), ns=[1, 10], plot_ns=[10])
    res, _ = _run(micro_zoo, tmp_path, p)
    t = res.tables["extraction_by_checkpoint"]
    assert (t.sampler == "T=0.7, top_k=5, top_p=0.9").all() and (t.top_k == 5).all() and (t.temperature == 0.7).all()
    with pytest.raises(ConfigError, match="needs 9999"):
        _run(micro_zoo, tmp_path, _params(epochs=[2], prefix_tokens=9990))
    with pytest.raises(ConfigError, match="plot_ns"):
        _run(micro_zoo, tmp_path, _params(plot_ns=[7]))
    with pytest.raises(ConfigError, match="increasing"):
        _run(micro_zoo, tmp_path, _params(epochs=[2, 1]))
