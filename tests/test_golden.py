"""Files written by every released format version decode bit-exact forever, and the
compressor reproduces them byte for byte (it still writes every version: the oldest one
that can describe the settings)."""

import io
from pathlib import Path

import pytest

import mambazip
from mambazip import container, priors

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
    """Version 1 and 2 files as the library writes them; version 3, 4 and 5 files as the
    command line writes them: with the stored name, mtime and size, stored blocks allowed,
    and from version 4 cut into frames. Mixing is written as the file's version codes it
    (versions 3 and 4: all 255 nodes, one 256-symbol table per byte)."""
    blob = path.read_bytes()
    with open(path, "rb") as f:
        header = container.read_header(f)
    data = path.with_suffix(".bin").read_bytes()
    if header["version"] < 3:
        assert mambazip.compress(data, header["settings"]) == blob
        return
    # The short header of an empty stream records no settings: any settings write it.
    settings = header["settings"] or mambazip.resolve_settings("default", mix="cm")
    extras = {key: header[key] for key in ("name", "mtime", "size")}
    # Files started from a prior are made from the prior shipped under that name.
    model = priors.load(header["model_sha256"]) if header["model_sha256"] else None
    out = io.BytesIO()
    mambazip.compress_stream(io.BytesIO(data), out, settings,
                             header["block_size"] or container.DEFAULT_BLOCK,
                             stored_blocks=True, frame_size=header["frame_size"], model=model,
                             version=header["version"], **extras)  # fmt: skip
    assert out.getvalue() == blob


def test_version_3_golden_files_cover_its_features():
    """Mixing with and without the Mamba, stored blocks, the stored name, an empty stream."""
    headers = {}
    for path in GOLDEN.glob("v3/*.mz"):
        with open(path, "rb") as f:
            header = container.read_header(f)
            blocks = (
                list(container.read_blocks(f, header["block_size"], 3))
                if header["settings"]
                else []
            )
        headers[path.stem] = header, [type(payload) for _, payload in blocks[:-1]]
    mixes = {
        h["settings"].mix.mamba for h, _ in headers.values() if h["settings"] and h["settings"].mix
    }
    assert mixes == {True, False}
    assert any(bytes in kinds for _, kinds in headers.values())
    assert any(h["settings"] is None for h, _ in headers.values())
    assert all(h["name"] == "golden.txt" for h, _ in headers.values())


def test_version_4_golden_files_cover_its_features():
    """Several frames, frames that blocks do not divide, a last frame of 1 byte, a stored
    block inside a frame, the Mamba alone and mixed, and one frame of a preset."""
    indexes = {}
    stored = False
    for path in GOLDEN.glob("v4/*.mz"):
        with open(path, "rb") as f:
            header, index = container.index_from_end(f)
            for fr in index.frames:
                f.seek(fr.packed_offset)
                blocks = list(container.frame_blocks(f, header))
                stored |= any(isinstance(payload, bytes) for _, payload in blocks[:-1])
        indexes[path.stem] = header, index
    sizes = [[fr.size for fr in index.frames] for _, index in indexes.values()]
    assert any(len(s) > 2 for s in sizes)
    assert any(s[-1] == 1 for s in sizes)
    assert any(len(s) == 1 for s in sizes)
    assert any(h["frame_size"] % h["block_size"] for h, _ in indexes.values())
    assert stored
    assert {h["settings"].mix is None for h, _ in indexes.values()} == {True, False}


def test_version_5_golden_files_cover_its_features():
    """Nibble-coded mixing with and without the Mamba, several frames, a stored block in a
    frame, a last frame of 1 byte, one frame of any length (an unframed stream), the preset's
    own tables."""
    indexes = {}
    stored = False
    for path in GOLDEN.glob("v5/*.mz"):
        with open(path, "rb") as f:
            header, index = container.index_from_end(f)
            for fr in index.frames:
                f.seek(fr.packed_offset)
                blocks = list(container.frame_blocks(f, header))
                stored |= any(isinstance(payload, bytes) for _, payload in blocks[:-1])
        indexes[path.stem] = header, index
    assert all(h["version"] == 5 for h, _ in indexes.values())
    assert {h["settings"].mix.mamba for h, _ in indexes.values()} == {True, False}
    sizes = [[fr.size for fr in index.frames] for _, index in indexes.values()]
    assert any(len(s) > 2 and s[-1] == 1 for s in sizes)
    assert any(h["frame_size"] == 0 for h, _ in indexes.values())
    assert stored
