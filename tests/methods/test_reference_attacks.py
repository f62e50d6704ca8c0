"""Issue 51: the reference attacks of experiment mia_low_fpr (loss difference and loss ratio against the family's
parent) against the loss attack, on two micro families built so that the data decide which one wins.

The two families differ in one thing only: what their reference model was pre-trained on. The pool, the child's
fine-tune and every size are the same. The pool has two styles of text, KJV verses and German quotes (Debian
fortunes-de), each document 30-60 words. The members are 9 verses and 3 quotes, the non-members 3 verses and 9
quotes. The child continues from the parent (epoch 0, the reference) with one light epoch on its members, which
lowers a member's loss by about 0.1 nat.

* **The reference knows both styles** (its parent trained on 48 other verses and 24 other quotes). Documents'
  losses under the reference spread over the pool (standard deviation 0.3-0.45 nat) by more than twice what the
  fine-tune moves a member, so loss mostly measures how hard each document is. The child inherits that difficulty
  from its parent document by document; the loss difference subtracts it and the loss ratio divides it out, which
  leaves the fine-tuning gain: members above non-members.
* **The reference never saw German** (its parent trained on the 48 verses only). The child learns German from its
  3 German members, and that lowers the loss of every German quote, trained on or not, by more than the fine-tune
  lowers the loss of the KJV members. The reference attacks count that style learning as membership and rank the 9
  German non-members above the 9 KJV members. Loss is not fooled: the fine-tuned KJV members, in a style the lineage
  knows, have a much lower loss than German text, of which the lineage has read 3 quotes, once.

The loss ratio is fooled less than the loss difference in the second family: it divides the fine-tuning gain by the
reference's loss, which is highest on the German text the reference never saw, so the style gain counts for less.

Margins, from 8 builds per family on this machine (training seeds 0-2, 4 draws of the documents): the first family
gave reference AUC 0.97-1.0 against loss 0.39-0.77 and TPR at FPR 1/12 0.92-1.0 against 0.08-0.58 (smallest gaps
0.21 and 0.34); the second gave loss AUC 0.69-0.83 against loss difference 0.44-0.54 and loss ratio 0.44-0.67
(smallest gaps 0.17 and 0.05). Each margin asserted is about half the smallest gap; the ratio's, too small to halve,
is asserted as a strict inequality, which a swap of the attacks would still break.
"""

from __future__ import annotations

import yaml

from memlab.methods.mia_low_fpr import (LowFprParams, MethodSubset, Sampler, attacks, low_fpr_table,
                                        score_frame)
from memlab.metrics.low_fpr import tpr_at_fpr
from memlab.models.catalog import Catalog
from memlab.metrics.mia import reference_scores

REFERENCE_ATTACKS = tuple(s.name for s in reference_scores())   # the registered ones

STYLES = {"kjv": {"corpus": "kjv", "options": {"unit": "verse"}},
          "german": {"corpus": "fortunes", "options": {"lang": "de"}}}
WORDS = (30, 60)   # long enough for score_tokens and the extraction pair, short enough to train in seconds
POOL = {"members": {"kjv": 9, "german": 3}, "nonmembers": {"kjv": 3, "german": 9}}
PARENTS = {"both_styles": {"kjv": 48, "german": 24}, "kjv_only": {"kjv": 48, "german": 0}}
PARENT_TRAIN = {"epochs": 8, "seq_len": 64, "batch_size": 8, "lr": 1e-2, "warmup_steps": 2, "seed": 0}
CHILD_TRAIN = {**PARENT_TRAIN, "epochs": 1, "lr": 1.5e-3}


def _ids(style: str, n: int) -> list[str]:
    """``n`` documents of ``style`` with a word count in WORDS, spread evenly over the corpus in its order."""
    from memlab.data.corpora import load_corpus

    group = STYLES[style]
    ids = [d.id for d in load_corpus(group["corpus"], **group["options"])
           if WORDS[0] <= len(d.text.split()) <= WORDS[1]]
    return ids[::len(ids) // n][:n]


def _scored(parent: str, tmp_path_factory, zoo_builder):
    """Build the parent ``base`` (pre-trained on PARENTS[parent]) and the child continued from it on the pool's
    members; returns the experiment's score frame (with each document's style) and its low-FPR table, one row per
    attack."""
    from memlab.config import CONF_DIR

    counts = {"parent": PARENTS["both_styles"], **POOL}   # every family draws the same documents for each role
    picked = {role: {} for role in counts}
    for style in STYLES:
        ids = iter(_ids(style, sum(c[style] for c in counts.values())))
        for role, c in counts.items():
            picked[role][style] = [next(ids) for _ in range(c[style])]
    picked["parent"] = {s: picked["parent"][s][:PARENTS[parent][s]] for s in STYLES}

    def groups(role):
        return [{**STYLES[s], "ids": ids} for s, ids in picked[role].items() if ids]

    root = tmp_path_factory.mktemp(parent)
    zoo_builder(root, {"name": "base", "members": groups("parent"),
                       "tokenizer": {"vocab_size": 384, "train_on": "members"},
                       "sizes": {"xs": {"hidden": 32, "layers": 1, "heads": 2, "ffn": 64}}, "train": PARENT_TRAIN})
    zoo_builder(root, {"name": "child", "members": groups("members"), "nonmembers": groups("nonmembers"),
                       "init_from": {"family": "base", "epoch": "final"}, "train": CHILD_TRAIN})
    template = yaml.safe_load((CONF_DIR / "model" / "tiny-neox.yaml").read_text())
    catalog = Catalog({**template, "threads": 1}, None, {"models": str(root / "models"), "zoo": str(root / "conf")})
    # the table's held-out TPR rows are not read here (6 calibration non-members): only its AUC column
    p = LowFprParams(family="child", size="xs", epoch="final", score_tokens=48, min_k=0.2, target_fprs=[0.2],
                     level=0.95, n_resamples=200, prefix_tokens=8, suffix_tokens=8,
                     sampler=Sampler(temperature=1.0, top_k=None, top_p=None), ns=[1], discoverable_p=0.5,
                     batch_size=24, method_subset=MethodSubset(members=None, nonmembers=None), families={},
                     reference=None)
    df, _ = score_frame(catalog, p.main, p, seed=0, groups=[], progress=False)
    style = {i: s for role in POOL for s, ids in picked[role].items() for i in ids}
    df["style"] = df.doc_id.map(style)
    assert df["style"].notna().all() and len(df) == sum(sum(c.values()) for c in POOL.values())
    return df, low_fpr_table(df, attacks(df), p, seed=0).drop_duplicates("attack").set_index("attack")


def test_reference_attacks_beat_loss_when_the_reference_knows_both_styles(tmp_path_factory, zoo_builder):
    df, table = _scored("both_styles", tmp_path_factory, zoo_builder)
    mem, non = df[df.split == "member"], df[df.split == "nonmember"]
    # the construction: the fine-tune moves the members' loss by less than documents differ under the reference
    gain = mem.ref_loss_difference.mean()
    assert 0 < 1.5 * gain < df.loss_reference.std(), (gain, df.loss_reference.std())
    auc = table.auc
    for ref in REFERENCE_ATTACKS:
        assert auc[ref] >= 0.9 and auc[ref] - auc["loss"] >= 0.1, (ref, auc.to_dict())
    # the lowest FPR the 12 non-members resolve: a threshold above all but one of them
    fpr = 1 / len(non)
    tpr = {a: tpr_at_fpr(mem[a], non[a], fpr, level=0.95).tpr for a in ("loss", *REFERENCE_ATTACKS)}
    for ref in REFERENCE_ATTACKS:
        assert tpr[ref] >= 0.75 and tpr[ref] - tpr["loss"] >= 0.15, tpr


def test_reference_attacks_lose_to_loss_when_the_reference_never_saw_german(tmp_path_factory, zoo_builder):
    df, table = _scored("kjv_only", tmp_path_factory, zoo_builder)
    # the construction: the child's German (learned from 3 members) lowers the loss of the German non-members by
    # more than the fine-tune lowers that of the KJV members
    d = df.groupby(["split", "style"]).ref_loss_difference.mean()
    assert d["nonmember", "german"] > d["member", "kjv"] > 0, d.to_dict()
    auc = table.auc
    for ref in REFERENCE_ATTACKS:
        assert auc[ref] <= 0.75 and auc[ref] < auc["loss"], (ref, auc.to_dict())
    assert auc["loss"] - auc["ref_loss_difference"] >= 0.08, auc.to_dict()
