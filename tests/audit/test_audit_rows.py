"""The audit's issue-51 rows on the micro family (members trained 40 epochs, non-members never seen): probabilistic
extraction decided by the (n, p)-discoverable rule, and the reference attack, whose per-byte losses give mia_low_fpr's
per-token ratio exactly when the two models share a tokenizer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from memlab.audit import decide
from memlab.backends.factory import build_backend
from memlab.metrics.extraction_probability import Sampler
from memlab.metrics.mia import loss
from memlab.methods.pearl.tasks import first_words


def _rule(n: int) -> decide.ExtractionRule:
    return decide.ExtractionRule(prefix_tokens=16, suffix_tokens=8, sampler=Sampler(1.0, 40, 1.0), ns=[1, 10**6],
                                 discoverable_p=0.5, n=n, batch_size=4)


@pytest.fixture(scope="module")
def micro(micro_family):
    return micro_family, build_backend(micro_family.model_cfg, None)


def test_extraction_flags_trained_members_and_no_unseen_text(micro):
    fam, backend = micro
    sources = {"seen": fam.members, "unseen": fam.nonmembers}
    mdf = decide.mia_frame(backend, sources, settings={"min_k": 0.2}, max_words=60, progress=False,
                           extraction=_rule(10**6))
    seen, unseen = mdf[mdf.source == "seen"], mdf[mdf.source == "unseen"]
    # 40 epochs on 4 chapters: every member's 8 tokens are discoverable in 10^6 samples, no non-member's
    assert seen[decide.DISCOVERABLE].eq(1.0).all() and unseen[decide.DISCOVERABLE].eq(0.0).all()
    assert (seen.log_p_z.min() > unseen.log_p_z.max())
    # the rule can fail: at n = 1 a suffix must be the sampler's likelier outcome, which fewer members are
    one = decide.mia_frame(backend, sources, settings={"min_k": 0.2}, max_words=60, progress=False,
                           extraction=_rule(1))
    assert one[decide.DISCOVERABLE].sum() < seen[decide.DISCOVERABLE].sum()
    # decided as a fixed rule on every source, the sampler named in the rule
    mdf["half"] = "all"
    flags = decide.decisions(None, mdf, {"seen": None, "unseen": None}, score="unused", alpha=0.0, target_fpr=0.1,
                             extraction=_rule(10**6))
    ext = flags[flags.method == decide.EXTRACTION]
    assert len(ext) == len(mdf) and ext.rule.str.contains("T=1, top_k=40, top_p=1.0").all()
    assert ext.groupby("source").flagged.mean().to_dict() == {"seen": 1.0, "unseen": 0.0}


def test_a_document_shorter_than_the_pair_is_left_out_not_guessed(micro):
    fam, backend = micro
    rule = decide.ExtractionRule(prefix_tokens=10_000, suffix_tokens=8, sampler=Sampler(1.0, 40, 1.0), ns=[10],
                                 discoverable_p=0.5, n=10, batch_size=4)
    lpz, flag = decide.extraction_columns(backend, fam.members, rule)
    assert np.isnan(lpz).all() and np.isnan(flag).all()


def test_the_reference_ratio_in_nats_per_byte_is_the_per_token_ratio_under_one_tokenizer(micro):
    fam, backend = micro
    early = build_backend({**fam.model_cfg, "path": str(fam.checkpoints[min(fam.checkpoints)])}, None)
    docs = fam.members + fam.nonmembers
    mdf = decide.mia_frame(backend, {"all": docs}, settings={"min_k": 0.2}, max_words=60, progress=False,
                           reference=early)
    texts = [first_words(d.text, 60) for d in docs]
    per_token = [-loss(a) / loss(b) for a, b in zip(backend.score(texts, progress=False),
                                                     early.score(texts, progress=False))]
    assert decide.reference_names() == ("ref_loss_ratio",)   # the difference is per token: one tokenizer only
    assert np.allclose(mdf["ref_loss_ratio"], per_token, rtol=1e-12, atol=0)
    # the early checkpoint saw the members for one epoch only: the ratio ranks members above non-members
    member = mdf.split.eq("member")
    assert mdf[member].ref_loss_ratio.min() > mdf[~member].ref_loss_ratio.max()


def test_a_new_reference_attack_is_one_registration_and_reaches_the_audit_and_the_low_fpr_table(micro, monkeypatch):
    from memlab.methods import mia_low_fpr
    from memlab.metrics import mia

    fam, backend = micro
    monkeypatch.setattr(mia, "_REFERENCE", dict(mia._REFERENCE))   # the registry as before once the test ends

    @mia.reference_score("toy_ref_log_ratio", across_tokenizers=True)
    def toy(loss_target, loss_reference):
        return float(np.log(loss_reference) - np.log(loss_target))

    assert decide.reference_names() == ("ref_loss_ratio", "toy_ref_log_ratio")
    mdf = decide.mia_frame(backend, {"all": fam.members}, settings={"min_k": 0.2}, max_words=60, progress=False,
                           reference=backend)
    assert np.allclose(mdf.toy_ref_log_ratio, 0.0) and np.allclose(mdf.ref_loss_ratio, -1.0)   # its own reference
    columns = [*mia.score_names(), *(r.name for r in mia.reference_scores()), "blind"]  # as its score frame has them
    names = mia_low_fpr.attacks(pd.DataFrame({s: [0.0] for s in columns}))
    assert names[-4:] == ["ref_loss_difference", "ref_loss_ratio", "toy_ref_log_ratio", "blind"]
