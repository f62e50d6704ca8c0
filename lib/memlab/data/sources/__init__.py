"""The corpus loaders (a plugin package, issue 48): every module here registers its loader with
:func:`memlab.data.corpora.corpus_loader`, and :mod:`memlab.data.corpora` imports every module of this package
(:func:`memlab.plugins.import_all`) when a corpus is looked up. Adding a corpus = one module here. A module imports
only the standard library and memlab at its top; an optional dependency (gensim, a package read at run time) is
imported inside its loader, so one missing dependency never blocks the other corpora."""
