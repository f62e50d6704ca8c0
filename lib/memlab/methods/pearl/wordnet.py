"""WordNet 3.0 synonyms for PEARL's synonym-substitution perturbation (seed 003, §3).

The data are read at run time from the Debian packages ``wordnet-base`` (+ ``wordnet-sense-index``) in
``/usr/share/wordnet``. nltk's ``WordNetCorpusReader`` needs them in one folder it owns, plus a ``lexnames``
file that Debian does not ship; :func:`prepare_wordnet_dir` copies (not symlinks) the database files into
``<nltk_data>/corpora/wordnet/`` once and writes ``lexnames`` (45 rows: file number, lexicographer file
name, syntactic category) from the table in ``lexnames.5WN.gz``.

Synonyms of a word (:func:`WordNetSynonyms.synonyms`): every lemma name of every synset that contains the
word's base form (nltk's ``morphy`` over the four parts of speech), single-word lemmas only (no ``_``),
alphabetic, different from the word and from its base forms ignoring case; sorted so the list is deterministic.
"""

from __future__ import annotations

import functools
import gzip
import re
import shutil
import warnings
from pathlib import Path

from memlab.errors import MissingSourceError

DEBIAN_WORDNET = Path("/usr/share/wordnet")
LEXNAMES_MAN = Path("/usr/share/man/man5/lexnames.5WN.gz")
_DB_FILES = [
    "adj.exc", "adv.exc", "noun.exc", "verb.exc", "cntlist.rev",
    "data.adj", "data.adv", "data.noun", "data.verb",
    "index.adj", "index.adv", "index.noun", "index.verb", "index.sense",
]
_CATEGORY = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}
_LEX_ROW = re.compile(r"^(\d\d)\t([a-z]+\.[A-Za-z]+)\s*\t")


def _lexnames_rows(man_page: Path) -> list[str]:
    rows = []
    with gzip.open(man_page, "rt", encoding="utf-8", errors="replace") as f:
        for line in f:
            m = _LEX_ROW.match(line)
            if m:
                num, name = m.group(1), m.group(2)
                rows.append(f"{num}\t{name}\t{_CATEGORY[name.split('.')[0]]}")
    return rows


def prepare_wordnet_dir(nltk_data: str | Path, source: str | Path = DEBIAN_WORDNET,
                        lexnames_man: str | Path = LEXNAMES_MAN) -> Path:
    """Copy the Debian WordNet files into ``<nltk_data>/corpora/wordnet`` (idempotent); return that folder."""
    source, lexnames_man = Path(source), Path(lexnames_man)
    missing = [n for n in _DB_FILES if not (source / n).is_file()]
    if missing or not lexnames_man.is_file():
        raise MissingSourceError(
            f"WordNet not found in {source} (missing {', '.join(missing) or lexnames_man.name}): "
            "install the Debian packages wordnet-base and wordnet-sense-index")
    target = Path(nltk_data) / "corpora" / "wordnet"
    target.mkdir(parents=True, exist_ok=True)
    for name in _DB_FILES:
        dst = target / name
        if not dst.is_file() or dst.stat().st_size != (source / name).stat().st_size:
            shutil.copyfile(source / name, dst)  # nltk's reader does not follow the Debian symlinks well
    lex = target / "lexnames"
    if not lex.is_file():
        rows = _lexnames_rows(lexnames_man)
        if len(rows) != 45:
            raise MissingSourceError(f"could not read 45 lexnames rows from {lexnames_man} (got {len(rows)}); "
                                     "reinstall wordnet-base")
        tmp = lex.with_suffix(".tmp")
        tmp.write_text("\n".join(rows) + "\n", encoding="utf-8")
        tmp.replace(lex)
    return target


class WordNetSynonyms:
    """Synonym lookup over nltk's WordNet reader, loaded from a folder prepared by :func:`prepare_wordnet_dir`."""

    def __init__(self, nltk_data: str | Path, source: str | Path = DEBIAN_WORDNET):
        root = prepare_wordnet_dir(nltk_data, source)
        import nltk.data
        from nltk.corpus.reader.wordnet import WordNetCorpusReader

        # nltk only reads from folders on its data path (a sandbox); authorise ours for this process.
        data_root = str(Path(nltk_data).resolve())
        if data_root not in nltk.data.path:
            nltk.data.path.append(data_root)
        with warnings.catch_warnings():  # "multilingual functions are not available": we don't use them
            warnings.simplefilter("ignore", UserWarning)
            self._wn = WordNetCorpusReader(str(root), None)

    @functools.lru_cache(maxsize=65536)
    def synonyms(self, word: str) -> tuple[str, ...]:
        w = word.lower()
        # inflections of the word itself ("enemies" -> "enemy") are not synonyms
        bases = {w} | {self._wn.morphy(w, pos) or w for pos in ("n", "v", "a", "r")}
        out: set[str] = set()
        for synset in self._wn.synsets(w):
            for lemma in synset.lemma_names():
                if "_" in lemma or not lemma.isalpha() or lemma.lower() in bases:
                    continue
                out.add(lemma.lower())
        return tuple(sorted(out))


_LOADED: dict[str, WordNetSynonyms] = {}


def load_synonyms(nltk_data: str | Path, source: str | Path = DEBIAN_WORDNET) -> WordNetSynonyms:
    """A process-wide cached :class:`WordNetSynonyms` (loading takes several seconds)."""
    key = f"{Path(nltk_data).resolve()}|{Path(source).resolve()}"
    if key not in _LOADED:
        _LOADED[key] = WordNetSynonyms(nltk_data, source)
    return _LOADED[key]
