"""Hostile .mz files: mutated valid files never crash, hang, write output or allocate what the
header merely claims. Each either decodes to the original (a harmless change, such as a flip
in the coder's final padding) or raises one of mambazip's own errors."""

import io
import json
import struct
import zlib

import pytest
from conftest import TINY_MODEL
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mambazip
from mambazip import container
from mambazip.codec import compress_stream
from mambazip.errors import MambazipError

ORIGINAL = b"fuzzing the container: " * 20 + bytes(range(0, 256, 7))


@pytest.fixture(scope="module")
def valid():
    out = io.BytesIO()
    settings = mambazip.resolve_settings(model=TINY_MODEL)
    # Version 5: the JSON header these mutations rewrite (version 6's binary header is
    # mutated by tests/test_format_v6.py and scripts/fuzz_mz.py).
    compress_stream(io.BytesIO(ORIGINAL), out, settings, block_size=200, version=5)
    return out.getvalue()


def header_span(blob):
    """(start, end) of the header JSON in blob."""
    (length,) = struct.unpack_from("<I", blob, 10)
    return 14, 14 + length


def with_header(blob, header):
    """blob with its header JSON replaced and the header CRC made valid again, so the
    mutation reaches the validation behind the checksum."""
    _, end = header_span(blob)
    raw = json.dumps(header).encode()
    prefix = blob[:10] + struct.pack("<I", len(raw))
    return prefix + raw + struct.pack("<I", zlib.crc32(raw)) + blob[end + 4 :]


def outcome(blob, original=ORIGINAL):
    try:
        return mambazip.decompress(blob) == original
    except MambazipError:
        return "error"


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(field=st.sampled_from(["header_len", "n_bytes", "n_words"]), value=st.integers(0, 2**32 - 1))
def test_oversized_declared_lengths_are_refused_before_reading(valid, field, value):
    blob = bytearray(valid)
    _, end = header_span(valid)
    offset = {"header_len": 10, "n_bytes": end + 4, "n_words": end + 8}[field]
    struct.pack_into("<I", blob, offset, value)
    assert outcome(bytes(blob)) in (True, "error")


@FUZZ
@given(
    name=st.sampled_from(["d_model", "n_layer", "d_inner", "d_state", "d_conv", "dt_rank"]),
    value=st.one_of(st.integers(-(2**40), 2**40), st.floats(), st.text(max_size=3), st.none()),
)
def test_hostile_model_dimensions_are_refused_before_allocation(valid, name, value):
    start, end = header_span(valid)
    header = json.loads(valid[start:end])
    header["settings"]["model"][name] = value
    result = outcome(with_header(valid, header))
    assert result == "error" or (result is True and value == header["settings"]["model"][name])


def test_a_header_for_a_gigantic_but_well_formed_model_is_refused(valid):
    start, end = header_span(valid)
    header = json.loads(valid[start:end])
    header["settings"]["model"].update(d_model=4096, n_layer=64, d_inner=16384, dt_rank=256)
    with pytest.raises(MambazipError, match="parameters"):
        mambazip.decompress(with_header(valid, header))


@pytest.mark.parametrize("block_size", [0, -1, container.MAX_BLOCK + 1, "big", None])
def test_invalid_block_size_in_header_is_refused(valid, block_size):
    start, end = header_span(valid)
    header = json.loads(valid[start:end])
    header["block_size"] = block_size
    with pytest.raises(MambazipError, match="block size"):
        mambazip.decompress(with_header(valid, header))


def test_header_from_another_file_spliced_on_is_a_clean_error(valid):
    other = io.BytesIO()
    settings = mambazip.resolve_settings(model={**TINY_MODEL, "d_state": 2}, seed=9)
    compress_stream(io.BytesIO(ORIGINAL), other, settings, block_size=200)
    _, end_other = header_span(other.getvalue())
    _, end = header_span(valid)
    spliced = other.getvalue()[: end_other + 4] + valid[end + 4 :]
    assert outcome(spliced) == "error"


# A zlib stream inside: version 7 codes it inflated, with its transform record.
TRANSFORMED = ORIGINAL[:100] + zlib.compress(ORIGINAL * 3, 9) + ORIGINAL[100:]


@pytest.fixture(scope="module", params=["v5", "short", "long", "short-transformed",
                                        "long-transformed"])  # fmt: skip
def mutable(request, valid):
    """(blob, original): ``valid`` (version 5); a version-6 file, the short form (one block)
    or the long form (blocks of 200); or a version-7 file of the same forms with a transform
    record (in the short form's header, before the blocks of a segment)."""
    if request.param == "v5":
        return valid, ORIGINAL
    out = io.BytesIO()
    settings = mambazip.resolve_settings(model=TINY_MODEL)
    block_size = container.DEFAULT_BLOCK if request.param.startswith("short") else 200
    transformed = request.param.endswith("transformed")
    original = TRANSFORMED if transformed else ORIGINAL
    compress_stream(io.BytesIO(original), out, settings, block_size=block_size, name="f.txt",
                    transforms=transformed)  # fmt: skip
    blob = out.getvalue()
    assert container.read_header(io.BytesIO(blob))["version"] == 6 + transformed
    return blob, original


@FUZZ
@given(data=st.data())
def test_a_file_truncated_anywhere_is_a_clean_error(mutable, data):
    blob, original = mutable
    cut = data.draw(st.integers(0, len(blob) - 1))
    assert outcome(blob[:cut], original) == "error"


@FUZZ
@given(data=st.data())
def test_a_file_with_flipped_bits_decodes_or_fails_cleanly(mutable, data):
    blob, original = bytearray(mutable[0]), mutable[1]
    for _ in range(data.draw(st.integers(1, 4))):
        bit = data.draw(st.integers(0, 8 * len(blob) - 1))
        blob[bit // 8] ^= 1 << (bit % 8)
    assert outcome(bytes(blob), original) in (True, "error")


@FUZZ
@given(data=st.data())
def test_a_file_with_overwritten_bytes_decodes_or_fails_cleanly(mutable, data):
    blob, original = bytearray(mutable[0]), mutable[1]
    at = data.draw(st.integers(0, len(blob) - 1))
    junk = data.draw(st.binary(min_size=1, max_size=16))
    blob[at : at + len(junk)] = junk
    assert outcome(bytes(blob), original) in (True, "error")
