"""English Wikipedia sample shipped in the ``gensim`` wheel's test data (CC BY-SA 3.0).

``gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2`` holds a
few hundred pages (2014–16 revisions). We parse the XML dump, keep articles (namespace 0) that are not
redirects, and by default strip the wiki markup with gensim's ``filter_wiki`` (``markup="raw"`` keeps it).
Ids: ``wiki/<title with spaces as underscores>``; date = the revision timestamp's day.
"""

from __future__ import annotations

import bz2
import importlib.util
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from memlab.data.corpora import corpus_loader
from memlab.data.records import Document, head_words
from memlab.errors import ConfigError, MissingSourceError

FILE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def default_path() -> Path | None:
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "test" / "test_data" / FILE


def _plain(wikitext: str) -> str:
    from gensim.corpora.wikicorpus import filter_wiki

    text = filter_wiki(wikitext)
    text = re.sub(r"'{2,}", "", text)  # bold/italic quote marks
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


@corpus_loader("wiki")
def load_wiki(path: str | Path | None = None, markup: str = "plain", min_chars: int = 200,
              max_words: int | None = None) -> list[Document]:
    """Every article of at least ``min_chars`` characters; ``max_words``: only its start
    (:func:`~memlab.data.records.head_words`, as EchoTrace-mini cuts its copyrighted books)."""
    if markup not in ("plain", "raw"):
        raise ConfigError(f"wiki: markup must be 'plain' or 'raw', got {markup!r}")
    path = Path(path) if path else default_path()
    if path is None or not path.is_file():
        raise MissingSourceError("wiki: the gensim Wikipedia sample is missing; install it with "
                                 "`pip install gensim==4.4.0`")
    docs: list[Document] = []
    seen: set[str] = set()
    with bz2.open(path, "rb") as f:
        for _event, el in ET.iterparse(f):
            if not el.tag.endswith("}page"):
                continue
            ns = el.tag[: -len("page")]
            title = el.findtext(f"{ns}title") or ""
            rev = el.find(f"{ns}revision")
            text = (rev.findtext(f"{ns}text") if rev is not None else "") or ""
            stamp = (rev.findtext(f"{ns}timestamp") if rev is not None else "") or ""
            is_article = el.findtext(f"{ns}ns") == "0" and el.find(f"{ns}redirect") is None
            el.clear()
            if not is_article or text.lstrip().lower().startswith("#redirect"):
                continue
            body = _plain(text) if markup == "plain" else text
            doc_id = "wiki/" + title.replace(" ", "_")
            if len(body) < min_chars or doc_id in seen:
                continue
            seen.add(doc_id)
            docs.append(Document(id=doc_id, text=head_words(body, max_words),
                                 source=f"pypi:gensim:gensim/test/test_data/{path.name}",
                                 licence="CC-BY-SA-3.0", date=stamp[:10] or None,
                                 meta={"corpus": "wiki", "title": title, "markup": markup,
                                       "url": "https://en.wikipedia.org/wiki/" + title.replace(" ", "_")}))
    return docs
