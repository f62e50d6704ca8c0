"""conf/zoo/kjv_verses.yaml (issue 51, the low-FPR membership set): its member and non-member lists are the draw its
comment describes, redrawn here from the KJV verses and pearl_base's members alone; and the split is as clean as the
build requires (every non-member <= split.max_shared_8gram against the whole training lineage)."""

from __future__ import annotations

import random
from collections import Counter, defaultdict

from memlab.data.corpora import load_corpus
from memlab.data.overlap import ngrams, words
from memlab.models.zoo import load_family

MIN_WORDS, LIMIT, SEED, N_MEMBERS = 40, 0.05, 0, 510   # the rule's numbers, as the file's comment states them


def redraw(lineage_ids: set[str]) -> tuple[list[str], list[str], dict]:
    chapters, verses = load_corpus("kjv", unit="chapter"), load_corpus("kjv", unit="verse")
    grams = {d.id: ngrams(words(d.text), 8) for d in chapters + verses}
    frac = lambda i, ref: sum(g in ref for g in grams[i]) / len(grams[i]) if grams[i] else 0.0  # noqa: E731
    chapter_of = lambda v: "kjv/chapter/" + "/".join(v.split("/")[2:4])  # noqa: E731  kjv/verse/Ruth/1/2 -> chapter
    # 1. pool: verses of >= 40 whitespace words outside the chapters the lineage trained on
    pool = [d.id for d in verses if chapter_of(d.id) not in lineage_ids and len(d.text.split()) >= MIN_WORDS]
    lineage = {g for i in lineage_ids for g in grams[i]}
    n_pool = len(pool)
    # 2. drop the verses sharing > 0.05 of their 8-grams with the lineage
    pool = [i for i in pool if frac(i, lineage) <= LIMIT]
    n_clean = len(pool)
    # 3. link verses when either shares > 0.05 of its 8-gram positions with the other; connected groups
    holders = defaultdict(set)
    for i in pool:
        for g in set(grams[i]):
            holders[g].add(i)
    parent = {i: i for i in pool}

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i in pool:
        shared = Counter(j for g in grams[i] for j in holders[g] if j != i)
        for j, k in shared.items():
            if k / len(grams[i]) > LIMIT:
                parent[root(i)] = root(j)
    groups: dict[str, list[str]] = {}
    for i in pool:                      # Bible order: a group is keyed (and ordered) by its first verse
        groups.setdefault(root(i), []).append(i)
    order = list(groups.values())
    # 4. shuffle the groups; members = whole groups until >= 510 verses, the rest non-members
    random.Random(SEED).shuffle(order)
    members, rest = [], []
    for g in order:
        (members if len(members) < N_MEMBERS else rest).extend(g)
    # 5. drop the non-members sharing > 0.05 of their 8-grams with the whole training text
    training = lineage | {g for i in members for g in grams[i]}
    nonmembers = [i for i in rest if frac(i, training) <= LIMIT]
    bible = {d.id: k for k, d in enumerate(verses)}
    counts = {"pool": n_pool, "clean": n_clean, "groups": len(order), "rest": len(rest)}
    return sorted(members, key=bible.get), sorted(nonmembers, key=bible.get), counts


def test_kjv_verses_is_the_draw_its_file_describes(repo_root):
    zoo, models = repo_root / "conf" / "zoo", repo_root / "models"
    fam, base = load_family("kjv_verses", zoo, models), load_family("pearl_base", zoo, models)
    assert [f.name for f in fam.lineage()] == ["pearl_base"] and fam.sizes == ["s"]
    assert fam.recipe.sizes["s"] == base.recipe.sizes["s"]      # the shape it continues
    members, nonmembers, counts = redraw({d.id for d in base.members})
    assert [d.id for d in fam.members] == members and [d.id for d in fam.nonmembers] == nonmembers
    assert (len(members), len(nonmembers)) == (510, 2999)
    assert counts == {"pool": 3519, "clean": 3511, "groups": 3042, "rest": 3001}   # the numbers the comment gives
    assert not set(members) & set(nonmembers) and not set(nonmembers) & set(fam.training_ids())
    assert all(d.meta["unit"] == "verse" for d in fam.members + fam.nonmembers)
    over = fam.check_split()            # the build's own guard, against members + Proverbs + Ecclesiastes + 36
    assert max(o.ngram8 for o in over.values()) <= LIMIT == fam.recipe.split.max_shared_8gram
