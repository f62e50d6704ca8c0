"""The backend kinds: each module registers one with :func:`memlab.backends.registry.backend_kind` (see there).

A new kind is one module here + one YAML in ``conf/model/`` with ``backend: <kind>``; nothing else is edited.
"""
