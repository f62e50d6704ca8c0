"""Loaded by Python at start-up when this folder is on PYTHONPATH (tests/core/readlog.py): logs config reads."""
import os
import sys

if os.environ.get("MEMLAB_READS_LOG"):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import readlog  # noqa: E402

    readlog.install(os.environ["MEMLAB_READS_LOG"])
