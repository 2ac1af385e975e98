"""Hostile transform records: whatever the bytes say, the parser bounds every count, length
and depth before it uses it, and a mutated record either restores the block exactly or fails
with mambazip's own FormatError or ChecksumError (a record that parses but does not restore
the bytes its CRC names)."""

from __future__ import annotations

import gzip
import io
import struct
import zipfile
import zlib

import numpy as np
import pytest

from mambazip.errors import ChecksumError, FormatError
from mambazip.transforms import (
    DEFLATE,
    PNG,
    X86,
    Deflate,
    PngChunks,
    Region,
    X86Filter,
    forward,
    inverse,
    record,
)


def _text(n, seed):
    words = b"alpha beta gamma delta call jump ret push pop mov".split()
    picks = np.random.default_rng(seed).integers(0, len(words), n // 4)
    return b" ".join(words[i] for i in picks)[:n]


def _code(n_calls):
    """x86-64 header and code: push, call back into earlier code, ret."""
    head = bytearray(64)
    head[:4] = b"\x7fELF"
    head[4:6] = b"\x02\x01"
    head[18:20] = struct.pack("<H", 62)
    code = bytearray()
    for k in range(n_calls):
        code += b"\x55\xe8" + struct.pack("<i", -len(code) - 6 + 8 * (k % 5)) + b"\xc3"
    return bytes(head + code)


def _idat_chunks(stream, size):
    out = b""
    for i in range(0, len(stream), size):
        piece = b"IDAT" + stream[i : i + size]
        out += struct.pack(">I", len(piece) - 4) + piece + struct.pack(">I", zlib.crc32(piece))
    return out


def _early_blocks(data, ends):
    c = zlib.compressobj(9, zlib.DEFLATED, -15, 9)
    out, start = bytearray(), 0
    for end in ends:
        out += c.compress(data[start:end]) + c.flush(zlib.Z_BLOCK)
        start = end
    return bytes(out + c.compress(data[start:]) + c.flush())


@pytest.fixture(scope="module")
def sample():
    """A block whose record has every shape: several regions, deflate inside deflate
    inside deflate, x86 at the bottom, a stream remade at its own block ends, and PNG
    chunks joined."""
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        for name, data in (("a.txt", _text(3000, 1)), ("prog", _code(200))):
            info = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
            z.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    block = (
        b"lead"
        + gzip.compress(inner.getvalue(), 6, mtime=0)
        + b"middle"
        + zlib.compress(_text(2000, 2), 9)
        + b"early"
        + b"\x78\xda"
        + _early_blocks(_text(9000, 3), (1000, 5000))
        + struct.pack(">I", zlib.adler32(_text(9000, 3)))
        + _idat_chunks(zlib.compress(_text(3000, 4)), 400)
        + b"end"
    )
    stream, regions = forward(block)
    assert [r.kind for r in regions] == [DEFLATE, DEFLATE, DEFLATE, PNG]
    assert regions[2].params.ends == (1000, 5000)
    assert [r.kind for r in regions[0].nested[1].nested] == [X86]
    return block, stream, record.encode(regions)


def outcome(block, stream, rec):
    try:
        regions = record.decode(rec, len(block), len(stream))
        return "restored" if inverse(stream, regions, len(block)) == block else "wrong"
    except (FormatError, ChecksumError):
        return "error"


def mutations(rec, count, seed):
    """Bit flips, bytes set to edge values, cuts, insertions, deletions, repeats."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        b = bytearray(rec)
        at = int(rng.integers(0, len(b)))
        kind = int(rng.integers(0, 6))
        if kind == 0:
            b[at] ^= 1 << int(rng.integers(0, 8))
        elif kind == 1:
            b[at] = int(rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF]))
        elif kind == 2:
            del b[at:]
        elif kind == 3:
            b[at:at] = bytes(rng.integers(0, 256, int(rng.integers(1, 12)), dtype=np.uint8))
        elif kind == 4:
            del b[at : at + int(rng.integers(1, 6))]
        else:
            b[at:at] = b[at : at + int(rng.integers(1, 16))]
        yield bytes(b)


def test_the_sample_record_restores_its_block(sample):
    assert outcome(*sample) == "restored"


def test_mutated_records_restore_the_block_or_fail_cleanly(sample):
    block, stream, rec = sample
    results = [outcome(block, stream, m) for m in mutations(rec, 1200, seed=24)]
    assert "wrong" not in results
    assert results.count("error") > 1000


def test_a_damaged_payload_fails_the_crc(sample):
    block, stream, rec = sample
    regions = record.decode(rec, len(block), len(stream))
    shift, spans = 0, []
    for r in regions:
        spans.append((r.offset + shift, r.offset + shift + r.out_length))
        shift += r.out_length - r.length
    rng = np.random.default_rng(5)
    for start, end in spans:
        for at in rng.integers(start, end, 20).tolist():
            damaged = bytearray(stream)
            damaged[at] ^= 0x10
            with pytest.raises(ChecksumError):
                inverse(bytes(damaged), regions, len(block))


# Bounds, one at a time


def deflate_region(offset, length, out_length, inflated=None, nested=()):
    inflated = out_length if inflated is None else inflated
    return Region(DEFLATE, offset, length, out_length, 0, Deflate(15, 6, 8, 0, inflated), nested)


def refused(rec, original_length, stream_length, bounds=None):
    with pytest.raises(FormatError):
        record.decode(rec, original_length, stream_length, bounds or record.Bounds())


def test_a_valid_hand_made_record_parses():
    regions = (deflate_region(10, 20, 100), Region(X86, 40, 50, 50, 0, X86Filter(7)))
    assert record.decode(record.encode(regions), 100, 180) == regions


def test_unknown_version_is_refused():
    refused(b"\x02\x00", 10, 10)


def test_a_count_larger_than_the_record_is_refused():
    refused(b"\x01\xff\xff\xff\xff\x0f", 10, 10)


def test_a_varint_longer_than_nine_bytes_is_refused():
    refused(b"\x01" + b"\x80" * 9 + b"\x00", 10, 10)


def test_a_padded_varint_is_refused():
    refused(b"\x01\x80\x00", 10, 10)


def test_an_unknown_kind_is_refused():
    rec = bytearray(record.encode((Region(X86, 0, 5, 5, 0, X86Filter(0)),)))
    rec[2] = 9
    refused(bytes(rec), 5, 5)


def test_a_region_outside_its_block_is_refused():
    refused(record.encode((deflate_region(90, 20, 30),)), 100, 110)


def test_payloads_that_do_not_add_up_to_the_stream_are_refused():
    refused(record.encode((deflate_region(0, 20, 30),)), 100, 111)


def test_an_x86_region_that_changes_length_is_refused():
    refused(record.encode((Region(X86, 0, 10, 11, 0, X86Filter(0)),)), 10, 11)


def test_a_deflate_region_whose_payload_is_not_its_inflated_data_is_refused():
    refused(record.encode((deflate_region(0, 10, 50, inflated=60),)), 10, 50)


def test_impossible_zlib_parameters_are_refused():
    bad = Region(DEFLATE, 0, 10, 30, 0, Deflate(16, 6, 8, 0, 30))
    refused(record.encode((bad,)), 10, 30)


def test_an_inflated_length_past_the_limit_is_refused():
    rec = record.encode((deflate_region(0, 10, 30),))
    refused(rec, 10, 30, record.Bounds(max_inflated=29))


def test_too_many_regions_are_refused():
    regions = tuple(deflate_region(10 * i, 5, 6) for i in range(3))
    rec = record.encode(regions)
    assert len(record.decode(rec, 30, 33)) == 3
    refused(rec, 30, 33, record.Bounds(max_regions=2))


def nest(depth):
    """A record nesting deflate regions ``depth`` levels deep, lengths consistent."""
    region = deflate_region(0, 8, 10)
    for _ in range(depth - 1):
        region = deflate_region(0, 8, 10 + region.out_length - region.length, 10, (region,))
    return region


def test_nesting_to_the_depth_limit_parses():
    region = nest(3)
    assert record.decode(record.encode((region,)), 8, region.out_length) == (region,)


def test_nesting_past_the_depth_limit_is_refused():
    region = nest(4)
    refused(record.encode((region,)), 8, region.out_length)


def with_ends(ends, inflated=100):
    params = Deflate(15, 9, 9, 0, inflated, ends)
    return record.encode((Region(DEFLATE, 0, 10, inflated, 0, params),))


def test_block_ends_parse():
    regions = record.decode(with_ends((10, 60)), 10, 100)
    assert regions[0].params.ends == (10, 60)


def test_block_ends_out_of_order_are_refused():
    refused(with_ends((60, 60)), 10, 100)


def test_block_ends_past_the_inflated_data_are_refused():
    refused(with_ends((60, 101)), 10, 100)


def test_more_block_ends_than_the_record_holds_are_refused():
    rec = bytearray(with_ends(()))
    at = rec.index(bytes([100])) + 1  # the inflated length, then the count of ends
    rec[at : at + 1] = b"\xff\xff\x03"
    refused(bytes(rec), 10, 100)


def png_region(lengths, span=None):
    joined = sum(lengths)
    span = joined + 12 * (len(lengths) - 1) if span is None else span
    return Region(PNG, 0, span, joined, 0, PngChunks(tuple(lengths)))


def test_png_chunks_parse():
    region = png_region([10, 20])
    assert record.decode(record.encode((region,)), 42, 30) == (region,)


def test_a_single_png_chunk_is_refused():
    refused(record.encode((png_region([10]),)), 10, 10)


def test_png_chunks_that_do_not_span_their_region_are_refused():
    refused(record.encode((png_region([10, 20], span=41),)), 41, 30)


def test_trailing_bytes_are_refused():
    refused(record.encode(()) + b"\x00", 10, 10)
