"""Files written by every released format version decode bit-exact forever, and the
compressor reproduces them byte for byte (it still writes every version: the oldest one
that can describe the settings)."""

from pathlib import Path

import pytest

import mambazip
from mambazip import container

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(GOLDEN.glob("v*/*.mz"))


def test_every_format_version_up_to_the_current_one_has_golden_files():
    versions = {int(p.parent.name[1:]) for p in CASES}
    assert versions == set(range(1, container.VERSION + 1))


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_file_decodes_to_its_original(path):
    assert mambazip.decompress(path.read_bytes()) == path.with_suffix(".bin").read_bytes()


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_input_compresses_to_the_same_bytes(path):
    blob = path.read_bytes()
    with open(path, "rb") as f:
        settings = container.read_header(f)["settings"]
    assert mambazip.compress(path.with_suffix(".bin").read_bytes(), settings) == blob
