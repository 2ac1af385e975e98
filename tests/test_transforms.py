"""The transform stage (issue 24, phase 1): deflate streams and the x86 filter, each an
exact round trip, left alone where they cannot be undone bit for bit."""

from __future__ import annotations

import gzip
import io
import itertools
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from mambazip.errors import ChecksumError
from mambazip.transforms import DEFLATE, PNG, X86, Options, forward, inverse, kinds, record, x86
from mambazip.transforms.deflate import Budget, inflate
from mambazip.transforms.deflate_blocks import block_ends

WORDS = b"the of and to in is was that for it with as his on be at by had are but from".split()


def text(n, seed=1):
    """Deterministic word salad: compressible like text, not trivially so."""
    picks = np.random.default_rng(seed).integers(0, len(WORDS), n // 3)
    return b" ".join(WORDS[i] for i in picks)[:n]


def noise(n, seed=2):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def round_trip(block, options=None):
    """Forward, through the record's bytes, and back; returns the stream and regions."""
    stream, regions = forward(block, options or Options())
    parsed = record.decode(record.encode(regions), len(block), len(stream))
    assert parsed == regions
    assert inverse(stream, parsed, len(block)) == block
    return stream, regions


def zlib_stream(data, level=6, wbits=15, mem_level=8, strategy=0):
    c = zlib.compressobj(level, zlib.DEFLATED, wbits, mem_level, strategy)
    return c.compress(data) + c.flush()


# Deflate: what zlib made, zlib remakes


@pytest.mark.parametrize("level", range(1, 10))
def test_every_level_round_trips_through_its_inflated_data(level):
    data = text(20000)
    block = b"head" + zlib_stream(data, level) + b"tail"
    stream, regions = round_trip(block)
    assert [r.kind for r in regions] == [DEFLATE]
    assert data in stream


@pytest.mark.parametrize(
    "strategy",
    [zlib.Z_DEFAULT_STRATEGY, zlib.Z_FILTERED, zlib.Z_HUFFMAN_ONLY, zlib.Z_RLE, zlib.Z_FIXED],
)
@pytest.mark.parametrize("level", [1, 6, 9])
def test_every_strategy_round_trips_through_its_inflated_data(level, strategy):
    data = text(12000, seed=level)
    block = zlib_stream(data, level, strategy=strategy)
    stream, regions = round_trip(block)
    assert [r.kind for r in regions] == [DEFLATE]
    assert data in stream


@pytest.mark.parametrize(("wbits", "mem_level"), [(15, 9), (10, 8), (12, 8)])
def test_other_windows_and_memory_levels_are_found(wbits, mem_level):
    data = text(30000, seed=wbits)
    stream, regions = round_trip(zlib_stream(data, 9, wbits, mem_level))
    assert data in stream and len(regions) == 1


def test_a_zlib_header_with_a_window_of_2_to_the_8_is_deflated_with_2_to_the_9():
    """CINFO 0 names a 256-byte window, which raw deflate refuses; zlib deflates such a
    stream with 512 (random data holds such headers: CI met one in 4 MB)."""
    data = text(3000, seed=8)
    c = zlib.compressobj(6, zlib.DEFLATED, -9)
    raw = c.compress(data) + c.flush()
    header = bytes([0x08, 0x1D])  # CM 8, CINFO 0; (0x08 << 8 | 0x1D) % 31 == 0
    stream, regions = round_trip(noise(100) + header + raw + noise(100, seed=3))
    assert [(r.kind, r.params.wbits) for r in regions] == [(DEFLATE, 9)]
    assert data in stream


def stored_blocks(data, size):
    """Raw deflate of ``data`` as stored blocks of ``size`` bytes, as a deflater other than
    zlib might write it (zlib's level 0 writes far larger blocks)."""
    out = bytearray()
    pieces = [data[i : i + size] for i in range(0, len(data), size)]
    for n, piece in enumerate(pieces):
        out.append(1 if n == len(pieces) - 1 else 0)
        out += struct.pack("<HH", len(piece), len(piece) ^ 0xFFFF) + piece
    return bytes(out)


def test_zlib_level_0_stored_blocks_are_left_as_bytes():
    """Their block sizes follow the output buffer Python's zlib module hands zlib, which
    another Python may not repeat."""
    block = b"x" + zlib_stream(noise(100000), 0)
    stream, regions = round_trip(block)
    assert regions == () and stream == block


def test_a_stream_zlib_cannot_reproduce_is_left_as_bytes():
    raw = stored_blocks(text(5000), 100)
    block = b"\x78\x01" + raw + struct.pack(">I", zlib.adler32(text(5000)))
    assert zlib.decompress(block) == text(5000)
    stream, regions = round_trip(block)
    assert regions == () and stream == block


def test_a_stream_with_a_flipped_bit_round_trips():
    good = zlib_stream(text(20000), 6)
    for bit in (8 * 40, 8 * 1000 + 3, 8 * (len(good) - 10)):
        block = bytearray(good)
        block[bit // 8] ^= 1 << (bit % 8)
        round_trip(bytes(block))


def early_blocks(data, ends, level=9, mem_level=9):
    """Raw deflate that ends a block at each of ``ends`` as GNU gzip and Info-ZIP do when
    they guess a block is good enough, written with zlib's Z_BLOCK flush."""
    c = zlib.compressobj(level, zlib.DEFLATED, -15, mem_level)
    out, start = bytearray(), 0
    for end in ends:
        out += c.compress(data[start:end]) + c.flush(zlib.Z_BLOCK)
        start = end
    return bytes(out + c.compress(data[start:]) + c.flush())


def test_block_ends_are_read_from_the_stream():
    data = text(60000, seed=7)
    assert block_ends(early_blocks(data, [5000, 20000, 20001])) == (5000, 20000, 20001, 60000)


def test_block_ends_of_a_broken_stream_are_none():
    assert block_ends(early_blocks(text(20000), [3000])[:500]) is None
    assert block_ends(b"\x07" + bytes(40)) is None  # block type 3 does not exist


@pytest.mark.parametrize("level", [6, 9])
def test_a_stream_with_early_block_ends_is_remade_at_them(level):
    data = text(60000, seed=level)
    raw = early_blocks(data, [4096, 30000], level)
    block = b"\x1f\x8b\x08\x00" + bytes(6) + raw + struct.pack("<II", zlib.crc32(data), len(data))
    assert gzip.decompress(block) == data
    stream, regions = round_trip(block)
    assert data in stream and regions[0].params.ends == (4096, 30000)


def test_a_truncated_stream_is_left_as_bytes():
    block = zlib_stream(text(20000), 6)[:3000]
    stream, regions = round_trip(block)
    assert regions == () and stream == block


def test_gzip_of_random_data_round_trips_through_the_random_data():
    data = noise(50000)
    stream, regions = round_trip(gzip.compress(data, 9, mtime=0))
    assert data in stream and len(regions) == 1


def test_a_zip_inside_a_gzip_is_inflated_twice():
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_DEFLATED) as z:
        for name, seed in (("a.txt", 3), ("b.txt", 4)):
            info = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
            z.writestr(info, text(20000, seed), compress_type=zipfile.ZIP_DEFLATED)
    stream, regions = round_trip(gzip.compress(inner.getvalue(), 6, mtime=0))
    assert [r.kind for r in regions] == [DEFLATE]
    assert [r.kind for r in regions[0].nested] == [DEFLATE, DEFLATE]
    assert text(20000, 3) in stream and text(20000, 4) in stream


def test_nesting_stops_at_the_depth_limit():
    block = text(4000)
    for _ in range(4):
        block = zlib_stream(b"pad" + block, 6)
    _, regions = round_trip(block, Options(max_depth=2))
    assert len(regions[0].nested) == 1 and regions[0].nested[0].nested == ()


def test_a_pdf_flate_stream_is_found():
    content = text(8000)
    body = zlib.compress(content)
    block = (
        f"1 0 obj\n<< /Length {len(body)} /Filter /FlateDecode >>\nstream\n".encode()
        + body
        + b"\nendstream\nendobj\n"
    )
    stream, regions = round_trip(block)
    assert content in stream and len(regions) == 1


def test_a_png_with_one_idat_chunk_is_found():
    rows = b"".join(b"\0" + noise(30, seed=r) * 4 for r in range(64))
    idat = zlib.compress(rows, 9)
    chunk = (
        struct.pack(">I", len(idat))
        + b"IDAT"
        + idat
        + struct.pack(">I", zlib.crc32(b"IDAT" + idat))
    )
    stream, _ = round_trip(b"\x89PNG\r\n\x1a\n" + chunk)
    assert rows in stream


def test_a_deflate_bomb_is_left_as_bytes():
    bomb = zlib_stream(bytes(8 << 20), 9)
    stream, regions = round_trip(bomb, Options(budget=Budget(max_inflated=1 << 20)))
    assert regions == () and stream == bomb


def test_the_inflater_stops_at_the_limit():
    bomb = zlib_stream(bytes(8 << 20), 9)
    assert inflate(bomb, 2, 1 << 20) is None
    assert inflate(bomb, 2, 8 << 20)[0] == bytes(8 << 20)


def test_streams_past_the_block_budget_are_left_as_bytes():
    one = zlib_stream(text(30000), 6)
    _, regions = round_trip(one * 3, Options(budget=Budget(max_total=70000)))
    assert len(regions) == 2


def inflated_total(regions):
    return sum(
        (r.params.inflated_length if r.kind == DEFLATE else 0) + inflated_total(r.nested)
        for r in regions
    )


def test_nested_streams_share_the_block_budget():
    inner = zlib_stream(bytes(1 << 20), 9) * 4
    budget = Budget(max_total=3 << 20)
    _, regions = round_trip(gzip.compress(inner, 9, mtime=0), Options(budget=budget))
    assert len(regions[0].nested) >= 1
    assert inflated_total(regions) <= budget.max_total


def test_text_is_left_alone():
    block = text(50000)
    assert forward(block) == (block, ())


# x86 E8/E9


RIP_OPCODES = bytes.fromhex("01 03 09 0b 21 23 29 2b 31 33 39 3b 63 80 81 83 85 89 8b 8d c7 f6 ff")


def reference_x86(data, base, sign):
    """The filter as its docstring states it, one byte at a time."""
    out = bytearray(data)
    i = 0
    while i < len(out):
        b0, b1, b2 = (out[i + k] if i + k < len(out) else None for k in range(3))
        op = None
        if b0 in (0xE8, 0xE9):
            op = i + 1
        elif b0 == 0x0F and b1 is not None and b1 >> 4 == 8:
            op = i + 2
        elif b0 >> 4 == 4 and b2 is not None and b1 in RIP_OPCODES and b2 & 0xC7 == 0x05:
            op = i + 3
        elif b0 in RIP_OPCODES and b1 is not None and b1 & 0xC7 == 0x05:
            op = i + 2
        if op is None or op + 4 > len(out):
            i += 1
            continue
        if out[op + 3] in (0x00, 0xFF):
            value = int.from_bytes(out[op : op + 4], "little", signed=True)
            moved = (value + sign * (op + 4 + base)) % (1 << 25)
            moved -= (1 << 25) if moved >= 1 << 24 else 0
            out[op : op + 4] = moved.to_bytes(4, "little", signed=True)
        i = op + 4
    return bytes(out)


OPCODES = (
    b"\xe8",
    b"\xe9",
    b"\x0f\x84",
    b"\x0f\x8f",
    b"\x48\x8d\x05",
    b"\x4c\x8b\x3d",
    b"\x41\x83\x3d",
    b"\xff\x15",
    b"\x8b\x05",
)


def call_heavy(n, seed):
    """Random bytes where about one byte in eight starts one of the filtered instructions,
    most with a near operand, many overlapping one another."""
    rng = np.random.default_rng(seed)
    data = bytearray(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
    for at in rng.integers(0, n, n // 8).tolist():
        op = OPCODES[int(rng.integers(0, len(OPCODES)))]
        data[at : at + len(op)] = op
        if rng.random() < 0.7 and at + len(op) + 3 < n:
            data[at + len(op) + 3] = int(rng.choice([0x00, 0xFF]))
    return bytes(data[:n])


@pytest.mark.parametrize("seed", range(5))
def test_x86_filter_matches_the_byte_by_byte_reference(seed):
    data, base = call_heavy(5000, seed), seed * 1_000_003
    assert x86.encode(data, base) == reference_x86(data, base, +1)
    assert x86.decode(x86.encode(data, base), base) == data


@pytest.mark.parametrize("opcode", OPCODES)
@pytest.mark.parametrize("n", range(8, 16))
def test_x86_filter_at_the_block_edge(n, opcode):
    for tail in range(0, 5):
        data = bytes(n - len(opcode) - tail) + opcode + b"\x10\x00\x00\x00"[:tail]
        encoded = x86.encode(data, 7)
        assert encoded == reference_x86(data, 7, +1)
        assert (encoded == data) == (tail < 4)
        assert x86.decode(encoded, 7) == data


def test_x86_overlapping_opcodes_round_trip():
    data = b"\xe8" * 40 + b"\xe9\x00\x00\x00\xe8\xff\xff\xff\xff" * 10 + b"\xe8\x00"
    data += b"\x48\x8d\xe8\x00\x00\x00\x00\x0f\x0f\x80\xe8\xff\xff\xff\xff" * 5
    for base in (0, 1, (1 << 25) - 3, 1 << 40):
        assert x86.encode(data, base) == reference_x86(data, base, +1)
        assert x86.decode(x86.encode(data, base), base) == data


def test_an_x86_region_records_its_base():
    data = headless_code(300)
    stream, regions = forward(data, base=123456)
    assert regions[0].kind == X86 and regions[0].params.base == 123456
    assert stream == reference_x86(data, 123456, +1)


ELF = Path("/bin/ls")


@pytest.mark.skipif(
    not x86.is_executable(ELF.read_bytes()[:64]) if ELF.exists() else True, reason="no x86 /bin/ls"
)
def test_an_elf_program_round_trips_through_the_filter():
    data = ELF.read_bytes()
    stream, regions = round_trip(data)
    assert kinds(regions) == ["x86"] and stream == reference_x86(data, 0, +1) != data


def test_a_program_cut_into_blocks_round_trips_block_by_block():
    """Each block filtered alone, its base its offset in the file; the cuts fall inside
    call instructions."""
    data = synthetic_pe() * 3
    cuts = [0, 0x200 + 7 * 40 + 3, 0x200 + 7 * 90 + 1, len(data) - 2, len(data)]
    filtered = 0
    for start, end in itertools.pairwise(cuts):
        block = data[start:end]
        stream, regions = forward(block, base=start)
        assert inverse(stream, regions, len(block)) == block
        if regions:
            assert stream == reference_x86(block, start, +1)
            filtered += 1
    assert filtered == 3  # all but the two-byte tail


def synthetic_pe():
    header = bytearray(0x200)
    header[:2] = b"MZ"
    header[60:64] = struct.pack("<I", 0x80)
    header[0x80:0x86] = b"PE\0\0" + struct.pack("<H", 0x8664)
    code = bytearray()
    for k in range(300):  # push rbp; call f_k; ret, calling back into earlier code
        code += b"\x55\xe8" + struct.pack("<i", -len(code) - 6 + 16 * (k % 7)) + b"\xc3"
    return bytes(header + code)


def test_a_pe_program_round_trips_through_the_filter():
    data = synthetic_pe()
    assert x86.is_executable(data)
    stream, regions = round_trip(data)
    assert kinds(regions) == ["x86"] and stream != data


def headless_code(n_calls):
    """Code without a header: calls to a few functions from many places."""
    return synthetic_pe()[0x200:][: 7 * n_calls]


def test_code_without_a_header_looks_like_code():
    assert x86.looks_like_code(headless_code(300))


def test_random_bytes_and_text_do_not_look_like_code():
    assert not x86.looks_like_code(noise(100000))
    assert not x86.looks_like_code(text(100000))


def test_near_operands_whose_targets_do_not_repeat_do_not_look_like_code():
    """A blank bitmap with sparse marks: E8 followed by zeros everywhere."""
    data = bytearray(200000)
    for at in range(0, len(data), 97):
        data[at] = 0xE8
    assert not x86.looks_like_code(bytes(data))
    assert not x86.looks_like_code(call_heavy(100000, 1))


def test_x86_code_around_a_deflate_stream_is_filtered():
    code, inner = synthetic_pe(), zlib_stream(text(5000), 6)
    stream, regions = round_trip(code + inner + code[0x200:])
    assert [r.kind for r in regions] == [X86, DEFLATE, X86]
    assert [r.params.base for r in (regions[0], regions[2])] == [0, regions[2].offset]
    assert regions[2].offset == regions[1].offset + regions[1].length
    assert stream.startswith(x86.encode(code))


def test_x86_code_inside_a_deflate_stream_is_filtered_too():
    _, regions = round_trip(zlib_stream(synthetic_pe(), 6))
    assert kinds(regions) == ["deflate", "x86"]


# The CRC catches a damaged record


def test_a_damaged_deflate_level_fails_the_crc():
    block = zlib_stream(text(20000), 6)
    stream, regions = forward(block)
    rec = bytearray(record.encode(regions))
    level_at = rec.find(struct.pack("<I", regions[0].crc)) + 5  # after the CRC: wbits, level
    assert rec[level_at] == regions[0].params.level
    rec[level_at] = 9 if rec[level_at] != 9 else 1
    parsed = record.decode(bytes(rec), len(block), len(stream))
    with pytest.raises(ChecksumError):
        inverse(stream, parsed, len(block))


def test_a_damaged_x86_base_fails_the_crc():
    data = synthetic_pe()
    stream, regions = forward(data)
    rec = bytearray(record.encode(regions))
    rec[-1] ^= 1
    with pytest.raises(ChecksumError):
        inverse(stream, record.decode(bytes(rec), len(data), len(stream)), len(data))


def test_a_damaged_crc_fails():
    block = zlib_stream(text(5000), 6)
    stream, regions = forward(block)
    rec = bytearray(record.encode(regions))
    crc_at = rec.find(struct.pack("<I", regions[0].crc))
    rec[crc_at] ^= 0x80
    with pytest.raises(ChecksumError):
        inverse(stream, record.decode(bytes(rec), len(block), len(stream)), len(block))


# PNG image data over several IDAT chunks


def png_file(rows, chunk):
    """A PNG whose zlib stream is cut into IDAT chunks of ``chunk`` bytes, as libpng cuts it."""

    def framed(kind, data):
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    stream = zlib.compress(rows, 9)
    pieces = [stream[i : i + chunk] for i in range(0, len(stream), chunk)]
    ihdr = struct.pack(">IIBBBBB", 64, 64, 8, 0, 0, 0, 0)
    body = b"".join(framed(b"IDAT", p) for p in pieces)
    return b"\x89PNG\r\n\x1a\n" + framed(b"IHDR", ihdr) + body + framed(b"IEND", b"")


def image_rows():
    return b"".join(b"\0" + noise(16, seed=r) * 4 for r in range(64))


def test_a_png_over_several_idat_chunks_is_joined_and_inflated():
    rows = image_rows()
    stream, regions = round_trip(png_file(rows, 300))
    assert rows in stream
    assert [r.kind for r in regions] == [PNG]
    assert [r.kind for r in regions[0].nested] == [DEFLATE]


def test_idat_chunks_with_a_wrong_crc_are_not_joined():
    block = bytearray(png_file(image_rows(), 300))
    first_crc = block.index(b"IDAT") + 4 + 300
    block[first_crc] ^= 1
    _, regions = round_trip(bytes(block))
    assert PNG not in [r.kind for r in regions]


def test_x86_filter_inverts_on_dense_opcode_soup():
    """Every byte drawn from opcodes, prefixes, ModRM values and near top bytes, so that
    candidates overlap in every way the scan allows."""
    alphabet = np.frombuffer(
        bytes.fromhex("e8 e9 0f 80 8f 48 4c 41 8b 8d ff 15 25 05 3d 00"), np.uint8
    )
    rng = np.random.default_rng(11)
    for n in range(1, 400):
        data = alphabet[rng.integers(0, len(alphabet), n)].tobytes()
        base = int(rng.integers(0, 1 << 26))
        assert x86.encode(data, base) == reference_x86(data, base, +1)
        assert x86.decode(x86.encode(data, base), base) == data
