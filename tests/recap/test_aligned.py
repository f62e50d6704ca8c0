"""The aligned tiny RECAP target's instruction data (the recap method's loader ``load_recap_instruct``, named by
conf/zoo/kjv_aligned.yaml)."""

from __future__ import annotations

import pytest
import yaml

from memlab.data.corpora import load_corpus
from memlab.errors import ConfigError
from memlab.methods.recap.extraction import event_fields, plain_prompt
from memlab.methods.recap.prompts import Prompts
from memlab.methods.recap.summary import SectionSummaryAgent

SEGMENTATION = dict(target_words=60, min_words=8, n_characters=6, n_keywords=5, ngram_guard=6)
INSTRUCT_LOADER = "memlab.methods.recap.aligned.load_recap_instruct"   # as conf/zoo/kjv_aligned.yaml names it
REFUSAL = "I cannot reproduce this text: it is under copyright."


def _options(repo_root, **over) -> dict:
    return dict(follow_kjv_books=["Nahum"], follow_max_chapters=1, refuse_licences=["BSD"], refuse_max_words=200,
                refuse_wiki=[], refuse_wiki_max_words=300, refusal=REFUSAL,
                prompts_dir=str(repo_root / "prompts" / "recap"), segmentation=SEGMENTATION) | over


def test_documents_are_the_plain_prompt_then_the_passage_or_the_refusal(repo_root):
    from memlab.data.echotrace import kjv_books, licence_books

    docs = load_corpus(INSTRUCT_LOADER, **_options(repo_root))
    follow = [d for d in docs if d.meta["kind"] == "follow"]
    refuse = [d for d in docs if d.meta["kind"] == "refuse"]
    assert follow and refuse and len(follow) + len(refuse) == len(docs)
    prompts = Prompts(repo_root / "prompts" / "recap")
    agent = SectionSummaryAgent(llm=None, prompts=prompts, max_new_tokens=0, **SEGMENTATION)
    book = kjv_books(["Nahum"], 1)[0]
    events = agent.segment(book.chapters[0], book.title)
    assert len(events) == len(follow)
    for d, e in zip(follow, events):
        fields = event_fields(book, e)
        prompt = plain_prompt(prompts, prompts.fill("extraction_plain", **fields), fields)
        # exactly what the plain-style extraction agent sends, then the event's own words after the opening line
        assert d.text.startswith(prompt) and d.text.endswith(e.text.rstrip())
        assert d.text == prompt + e.text[len(e.first_sentence):]
        assert REFUSAL not in d.text
    lic = licence_books({"licences": ["BSD"], "max_words": 200}, [])[0]
    for d in refuse:
        assert d.text.endswith(" " + REFUSAL) and d.text.startswith(lic.title + "\n")
        # the refused passage itself is never shown: only the opening line the prompt gives anyway
        body = d.text[: -len(REFUSAL)].split("Passage:\n", 1)[1].strip()
        assert body and len(body.split()) < 40


def test_bad_options_are_one_line_errors(repo_root):
    with pytest.raises(ConfigError, match="refusal line is empty"):
        load_corpus(INSTRUCT_LOADER, **_options(repo_root, refusal="  "))
    with pytest.raises(ConfigError, match="not found"):
        load_corpus(INSTRUCT_LOADER, **_options(repo_root, refuse_licences=["No-Such-Licence"]))
    with pytest.raises(ConfigError, match="recap_instruct"):
        load_corpus(INSTRUCT_LOADER, **_options(repo_root, colour="red"))


def test_the_aligned_family_keeps_its_instruction_text_apart_from_every_recap_split(repo_root):
    """The follow books and refused licences are neither members nor non-members of the target, and the
    non-members pass the split guard against everything the aligned model (and its parent) trained on."""
    from memlab.models.zoo import load_family

    raw = yaml.safe_load((repo_root / "conf" / "zoo" / "kjv_aligned.yaml").read_text())
    inst = next(g for g in raw["members"] if g["corpus"] == INSTRUCT_LOADER)["options"]
    fam = load_family("kjv_aligned", repo_root / "conf" / "zoo", repo_root / "models")
    split_ids = {d.id for d in fam.nonmembers} | {i for i in fam.training_ids() if not i.startswith("recap_instruct/")}
    # the book a document belongs to: kjv/book/<Book>, kjv/chapter/<Book>/<n>, licences/<name>, wiki/<Title>
    books = {i.split("/")[2] if i.startswith("kjv/") else i.split("/")[1] for i in split_ids}
    assert {"Genesis", "Amos", "Ruth", "Joel", "GPL-3", "Artistic", "Aardvark", "Algeria"} <= books
    assert not books & (set(inst["follow_kjv_books"]) | set(inst["refuse_licences"]) | set(inst["refuse_wiki"]))
    over = fam.check_split()
    assert max(o.ngram8 for o in over.values()) <= raw["split"]["max_shared_8gram"] <= 0.025
    assert {"licences/Artistic", "kjv/book/Joel", "kjv/chapter/Amos/1", "wiki/Algeria"} <= set(over)
    assert "licences/MPL-2.0" not in over     # 3.5 % of its 8-grams are in a member licence (Apache-2.0)



def test_the_aligned_familys_wikipedia_articles_are_the_draw_its_file_describes(repo_root):
    """conf/zoo/kjv_aligned.yaml says how its articles were drawn; the draw, redone, gives its lists."""
    import random
    import re

    raw = yaml.safe_load((repo_root / "conf" / "zoo" / "kjv_aligned.yaml").read_text())
    inst = next(g for g in raw["members"] if g["corpus"] == INSTRUCT_LOADER)["options"]
    def listed(groups):
        return [i.split("/", 1)[1] for g in groups if g["corpus"] == "wiki" for i in g["ids"]]

    docs = [d for d in load_corpus("wiki") if len(d.text.split()) >= 600]
    titles = [d.id.split("/", 1)[1] for d in docs
              if "disambiguation" not in d.id and not d.id.startswith("wiki/List_of")]
    words = {t: set(re.findall(r"[A-Za-z]{4,}", t)) - {"American", "International"} for t in titles}
    alone = sorted(t for t in titles if not any(words[t] & words[u] for u in titles if u != t))
    random.Random(0).shuffle(alone)
    assert listed(raw["members"]) == alone[:15] + alone[40:53] and listed(raw["nonmembers"]) == alone[15:30]
    assert inst["refuse_wiki"] == alone[30:40]

# A test-size aligned target: a micro GPT-NeoX trained from scratch on instruction documents only (no member books),
# cached by the fingerprint of its spec like conftest's micro family. Held out from it: whole books and licences.
TEST_FOLLOW = ["Nahum", "Malachi", "Micah", "Philippians", "Colossians", "1_Thessalonians", "1_Timothy", "2_Timothy",
               "James", "1_Peter"]
TEST_REFUSE = ["BSD", "CC0-1.0", "GFDL-1.3", "LGPL-2.1", "GPL-2", "GPL-1", "MPL-1.1", "LGPL-3"]
HELD_OUT_KJV = ["Ruth", "Jonah", "Joel", "Habakkuk", "Haggai"]
HELD_OUT_LICENCES = ["GPL-3", "Apache-2.0", "MPL-2.0", "Artistic"]


def _micro(repo_root, kinds: tuple[str, ...]):
    from filelock import FileLock
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from memlab.models.tiny import Arch, TrainRecipe, TrainSpec, train

    docs = load_corpus(INSTRUCT_LOADER, **_options(repo_root, follow_kjv_books=TEST_FOLLOW, follow_max_chapters=2,
                                                    refuse_licences=TEST_REFUSE, refuse_max_words=2000))
    docs = [d for d in docs if d.meta["kind"] in kinds]
    spec = TrainSpec(member_groups=[(docs, 1.0)], nonmembers=[], arch=Arch(hidden=64, layers=2, heads=2, ffn=256),
                     vocab_size=1024, tokenizer_on="members",
                     recipe=TrainRecipe(epochs=15, seq_len=256, batch_size=8, lr=1e-2, min_lr_ratio=0.1,
                                        warmup_steps=5, weight_decay=0.0, seed=0, threads=1), init_from=None,
                     meta={"family": "aligned-micro"}, record={})
    root = repo_root / ".cache" / "test-models"
    root.mkdir(parents=True, exist_ok=True)
    out = root / spec.fingerprint()[:16]
    with FileLock(str(root / f"{out.name}.lock")):
        train(spec, out, progress=False)
    return AutoTokenizer.from_pretrained(out / "final"), AutoModelForCausalLM.from_pretrained(out / "final").eval()


@pytest.fixture(scope="module")
def aligned_micro(repo_root):
    return _micro(repo_root, ("follow", "refuse"))


def _refusals(model_tok, repo_root, books) -> tuple[int, int]:
    """(refused, asked): the plain DSP prompt of every event of ``books``, greedy, judged by the verifier's rule."""
    import torch

    from memlab.methods.recap.agents import VerbatimVerifier

    tok, model = model_tok
    prompts = Prompts(repo_root / "prompts" / "recap")
    agent = SectionSummaryAgent(llm=None, prompts=prompts, max_new_tokens=0, **SEGMENTATION)
    refused = asked = 0
    for b in books:
        for ch in b.chapters:
            for e in agent.segment(ch, b.title):
                fields = event_fields(b, e)
                ids = tok(plain_prompt(prompts, prompts.fill("extraction_plain", **fields), fields),
                          return_tensors="pt").input_ids[:, -200:]
                with torch.no_grad():
                    out = model.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=tok.eos_token_id)
                refused += VerbatimVerifier.keyword_refusal(tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True))
                asked += 1
    return refused, asked


def _category_gap(model_tok, repo_root) -> tuple[float, float, float]:
    """(p, licence refusal rate, KJV refusal rate) on books and licences the model never saw: a one-sided Fisher
    exact test that direct requests for licences are refused more often than requests for KJV books."""
    from scipy.stats import fisher_exact

    from memlab.data.echotrace import kjv_books, licence_books

    lic_k, lic_n = _refusals(model_tok, repo_root, licence_books({"licences": HELD_OUT_LICENCES, "max_words": 600}, []))
    kjv_k, kjv_n = _refusals(model_tok, repo_root, kjv_books(HELD_OUT_KJV, 1))
    assert lic_n >= 30 and kjv_n >= 30
    p = fisher_exact([[lic_k, lic_n - lic_k], [kjv_k, kjv_n - kjv_k]], alternative="greater").pvalue
    return p, lic_k / lic_n, kjv_k / kjv_n


def test_a_test_size_aligned_target_refuses_the_trained_category_and_not_the_other(aligned_micro, repo_root):
    p, lic, kjv = _category_gap(aligned_micro, repo_root)
    assert p < 0.01 and kjv <= 0.15, (p, lic, kjv)


def test_without_refusal_documents_the_same_check_finds_no_refusal(repo_root):
    """The negative control: the same recipe without the ``refuse`` documents refuses nothing, so the check above
    fails on it (the refusals are the training's doing, not the verifier rule's)."""
    p, lic, kjv = _category_gap(_micro(repo_root, ("follow",)), repo_root)
    assert lic == 0.0 and kjv == 0.0 and p == 1.0, (p, lic, kjv)


def test_feedback_gain_summary_gives_the_share_improved_with_its_interval_per_split():
    import pandas as pd

    from memlab.methods.recap import evaluate as E
    from memlab.metrics.intervals import wilson

    rows = [{"target": "t", "category": "public_domain", "split": split, "event": f"{split}{k}", "round": r,
             "best": 0.5 + (0.1 if r and k < up else 0.0), "gain": 0.1 if r and k < up else 0.0, "floor": 0.2}
            for split, up in (("member", 2), ("nonmember", 0)) for k in range(5) for r in (0, 1)]
    by_split = E.gains_summary(pd.DataFrame(rows), by=("target", "split")).set_index(["split", "round"])
    assert by_split.loc[("member", 1), "improved"] == 2 and by_split.loc[("member", 1), "share_improved"] == 0.4
    assert (by_split.loc[("member", 1), ["share_improved_ci_low", "share_improved_ci_high"]].tolist()
            == list(wilson(2, 5)))
    assert by_split.loc[("nonmember", 1), "share_improved"] == 0.0 and by_split.loc[("member", 0), "improved"] == 0
    pooled = E.gains_summary(pd.DataFrame(rows)).set_index("round")
    assert pooled.loc[1, "events"] == 10 and pooled.loc[1, "share_improved"] == 0.2
