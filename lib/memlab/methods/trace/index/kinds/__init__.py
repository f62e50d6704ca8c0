"""The index backends (a plugin package, issue 48): every module here defines a :class:`TokenIndex` subclass
registered with :func:`~memlab.methods.trace.index.base.register_backend`, and the backend registry
(:data:`~memlab.methods.trace.index.base.BACKENDS`, :func:`~memlab.methods.trace.index.base.backend_class`) imports
every module of this package (:func:`memlab.plugins.import_all`) when a backend is looked up. Adding a backend = one
module here; heavy or optional dependencies (pydivsufsort, infini_gram) are imported inside the methods that use
them."""
