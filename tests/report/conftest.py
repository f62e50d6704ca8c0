"""A real browser for the report tests: Debian's chromium driven by Playwright for Python.

Playwright's own browser download is not used (nor reachable here): the tests launch the Debian binary that
`make setup` installs. A missing chromium or Playwright is a test failure in one line naming the fix, not a skip.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 120_000  # a shared 2-core machine: generous


def chromium_path(default: Path = CHROMIUM) -> Path:
    """Debian's chromium (``default``, else ``chromium`` on PATH); a missing one fails the test in one line."""
    found = default if default.exists() else (Path(p) if (p := shutil.which("chromium")) else None)
    if found is None:
        pytest.fail("chromium is not installed: `make setup` installs it (Debian package chromium)", pytrace=False)
    return found


@pytest.fixture(scope="session")
def find_chromium():
    return chromium_path


@pytest.fixture(scope="session")
def chromium_browser():
    exe = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright for Python is not installed: `make setup` installs it (the [test] extra)",
                    pytrace=False)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(exe), args=["--no-sandbox", "--disable-dev-shm-usage"],
                              timeout=TIMEOUT_MS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def sitecheck():
    """tests/report/sitecheck.py (the crawl and path checks of a built site), loaded by path: the tests import
    in importlib mode, where sibling modules are not importable by name."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("memlab_tests_sitecheck", Path(__file__).with_name("sitecheck.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module
