"""Post-cutoff code: the loader on a tiny sdist built here (no network), then the real pinned corpus.

The real corpus needs the pinned sdists in ``.cache/sdists`` (the data stage's cache); on a fresh checkout the
first run downloads them from PyPI once (``pip download --no-deps --no-binary :all:``).
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest
import yaml

from memlab.data.sources.post_cutoff_code import load_post_cutoff_code, read_pins, top_level_units
from memlab.errors import ConfigError, MissingSourceError

BIG = "\n".join(f"    total += {i}" for i in range(30))
CORE = f'''"""A module."""
import functools

X = 1


@functools.lru_cache
def decorated(a, b):
    """Add two numbers, cached, and say something long enough to pass the lower word bound of this test."""
    total = a + b
    {BIG.strip()}
    return total


def tiny():
    return 1


class Thing:
    """A class with a method."""

    def method(self, value):
        return [value for value in range(value) if value % 2 and value % 3 and value % 5 and value % 7]
'''
TEST_FILE = "def test_something():\n    " + "assert 1 + 1 == 2 and 'more words here' != 'x'\n    " * 20


def _sdist(folder: Path, files: dict[str, str], name: str = "tiny-pkg", version: str = "0.1.0") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name.replace('-', '_')}-{version}.tar.gz"
    top = f"{name.replace('-', '_')}-{version}"
    with tarfile.open(path, "w:gz") as tf:
        for inner, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"{top}/{inner}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _pins(tmp_path: Path, archive: Path, **over) -> Path:
    pin = {"name": "tiny-pkg", "version": "0.1.0", "sha256": hashlib.sha256(archive.read_bytes()).hexdigest(),
           "first_release": "2025-07-01", "released": "2025-08-02", "licence": "MIT", **over}
    cfg = {"min_first_release": "2025-06-01", "min_words": 20, "max_words": 200,
           "exclude": ["tests/*", "setup.py"], "packages": [pin]}
    path = tmp_path / "pins.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture
def tiny(tmp_path):
    archive = _sdist(tmp_path / "sdists", {"src/tiny_pkg/core.py": CORE, "tests/test_core.py": TEST_FILE,
                                           "setup.py": TEST_FILE.replace("test_something", "setup"),
                                           "README.md": "not python"})
    return archive, _pins(tmp_path, archive)


def test_units_of_a_tiny_sdist_with_ids_hashes_and_dates(tiny):
    archive, pins = tiny
    docs = load_post_cutoff_code(pins, archive.parent, download=False)
    assert [d.id for d in docs] == ["post_cutoff_code/tiny-pkg/0.1.0/src/tiny_pkg/core.py:Thing",
                                    "post_cutoff_code/tiny-pkg/0.1.0/src/tiny_pkg/core.py:decorated"]
    thing, dec = docs
    assert dec.text.startswith("@functools.lru_cache\ndef decorated(a, b):") and dec.text.endswith("return total")
    assert thing.meta["kind"] == "class" and dec.meta["kind"] == "function" and "def method" in thing.text
    for d in docs:
        assert d.meta["sha256"] == hashlib.sha256(d.text.encode("utf-8")).hexdigest() == d.sha256
        assert d.date == d.meta["released"] == "2025-08-02" and d.meta["first_release"] == "2025-07-01"
        assert d.licence == "MIT" and d.source == f"pypi:tiny-pkg==0.1.0:{d.meta['path']}"
        assert 20 <= d.meta["n_words"] == len(d.text.split()) <= 200
    # the size bounds are options: a larger floor keeps the long function only; tests/ and setup.py never count
    only = load_post_cutoff_code(pins, archive.parent, min_words=100, download=False)
    assert [d.meta["qualname"] for d in only] == ["decorated"]
    assert all("test_something" not in d.text and "def setup" not in d.text
               for d in load_post_cutoff_code(pins, archive.parent, min_words=1, download=False))


def test_sha_mismatch_is_refused_in_one_line(tiny, tmp_path):
    archive, _ = tiny
    pins = _pins(tmp_path, archive, sha256="0" * 64)
    with pytest.raises(MissingSourceError) as err:
        load_post_cutoff_code(pins, archive.parent, download=False)
    assert "\n" not in str(err.value) and "does not match its pinned sha256" in str(err.value)
    assert not archive.exists()  # the bad archive leaves the cache, so the next data stage fetches it again


def test_missing_sdist_names_the_download_command(tiny, tmp_path):
    archive, pins = tiny
    with pytest.raises(MissingSourceError) as err:
        load_post_cutoff_code(pins, tmp_path / "empty", download=False)
    assert "\n" not in str(err.value) and "pip download --no-deps --no-binary :all:" in str(err.value)


@pytest.mark.parametrize("over,match", [({"first_release": "2025-05-31"}, "first released 2025-05-31"),
                                        ({"released": "2025-06-30"}, "first_release ≤ released"),
                                        ({"licence": None}, "lacks licence")])
def test_pins_before_the_cutoff_or_incomplete_are_refused(tiny, tmp_path, over, match):
    archive, _ = tiny
    with pytest.raises(ConfigError, match=match):
        read_pins(_pins(tmp_path, archive, **over))


def test_unparsable_file_is_a_config_error(tmp_path):
    archive = _sdist(tmp_path / "sdists", {"pkg/bad.py": "def broken(:\n    pass\n"})
    with pytest.raises(ConfigError, match=r"pkg/bad.py does not parse .*exclude"):
        load_post_cutoff_code(_pins(tmp_path, archive), archive.parent, download=False)


def test_top_level_units_skip_nested_and_assignments():
    units = top_level_units(CORE)
    assert [(n, k) for n, k, _ in units] == [("decorated", "function"), ("tiny", "function"), ("Thing", "class")]


def test_real_post_cutoff_code_is_pinned_and_large_enough(repo_root):
    from memlab.data.corpora import load_corpus

    docs = load_corpus("post_cutoff_code", download=True)  # the data stage's download, once
    pins, cfg = read_pins()
    assert len(docs) >= 40 and len({d.id for d in docs}) == len(docs) == len({d.sha256 for d in docs})
    assert {d.meta["package"] for d in docs} == {p.name for p in pins} and 5 <= len(pins) <= 10
    for p in pins:
        assert str(p.fields["first_release"]) >= "2025-06-01" and len(p.sha256) == 64 and p.fields["licence"]
    for d in docs:
        assert d.id.startswith("post_cutoff_code/") and d.date >= "2025-06-01"
        assert cfg["min_words"] <= d.meta["n_words"] <= cfg["max_words"]
    assert docs == load_corpus("post_cutoff_code", download=False)  # offline reload: identical
