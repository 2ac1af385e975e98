"""The transform record: the regions of one block as bytes, and a parser that trusts nothing.

Layout (little-endian; varint = unsigned LEB128, at most 9 bytes, value < 2^63)::

    record  := version:u8 (= 1)  regions
    regions := count:varint  region{count}
    region  := kind:u8  gap:varint  length:varint  out_length:varint  crc:u32  params
    params  := deflate: wbits:u8 level:u8 mem_level:u8 strategy:u8 inflated_length:varint
                        n_ends:varint  step:varint{n_ends}   (block ends, each step >= 1)
                        regions                       (nested, offsets into the inflated data)
             | x86:     base:varint
             | png:     n_chunks:varint  length:varint{n_chunks}  regions (nested)

``gap`` is the distance from the end of the previous region (or the start) to this one, so
regions are in order and never overlap. ``decode`` is told the original length and the
transformed stream length of the block and checks, before it builds anything, that every
count, length and depth fits: the regions of each level fit in their original, the payloads
add up to exactly the stream's length, a region without nested regions has an x86 payload
as long as its original and a deflate payload as long as its inflated data, a png region
spans its chunks exactly, and the total
number of regions and the nesting depth stay under ``Bounds``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import FormatError
from .region import DEFLATE, PNG, X86, Deflate, PngChunks, Region, X86Filter

VERSION = 1
_MAX_VARINT_BYTES = 9


@dataclass(frozen=True)
class Bounds:
    max_regions: int = 65536  # over all depths
    max_depth: int = 3  # deflate inside deflate inside deflate
    max_inflated: int = 1 << 30  # bytes one deflate region may inflate to
    max_base: int = 1 << 48


def encode(regions) -> bytes:
    out = bytearray([VERSION])
    _put_regions(out, regions)
    return bytes(out)


def _put_varint(out, value):
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _put_regions(out, regions):
    _put_varint(out, len(regions))
    end = 0
    for r in regions:
        out.append(r.kind)
        _put_varint(out, r.offset - end)
        _put_varint(out, r.length)
        _put_varint(out, r.out_length)
        out += struct.pack("<I", r.crc)
        p = r.params
        if r.kind == DEFLATE:
            out += bytes([p.wbits, p.level, p.mem_level, p.strategy])
            _put_varint(out, p.inflated_length)
            _put_varint(out, len(p.ends))
            for before, end in zip((0, *p.ends), p.ends, strict=False):
                _put_varint(out, end - before)
            _put_regions(out, r.nested)
        elif r.kind == PNG:
            _put_varint(out, len(p.lengths))
            for length in p.lengths:
                _put_varint(out, length)
            _put_regions(out, r.nested)
        else:
            _put_varint(out, p.base)
        end = r.offset + r.length


class _Reader:
    def __init__(self, buf, bounds):
        self.buf = memoryview(buf)
        self.pos = 0
        self.bounds = bounds
        self.regions = 0

    def byte(self):
        if self.pos >= len(self.buf):
            raise FormatError("transform record is truncated")
        self.pos += 1
        return self.buf[self.pos - 1]

    def varint(self):
        value = 0
        for i in range(_MAX_VARINT_BYTES):
            b = self.byte()
            value |= (b & 0x7F) << (7 * i)
            if b < 0x80:
                if b == 0 and i > 0:
                    raise FormatError("transform record has a varint with padding")
                return value
        raise FormatError("transform record has a varint longer than 9 bytes")

    def u32(self):
        if self.pos + 4 > len(self.buf):
            raise FormatError("transform record is truncated")
        (value,) = struct.unpack_from("<I", self.buf, self.pos)
        self.pos += 4
        return value


def decode(buf, original_length, stream_length, bounds=Bounds()) -> tuple[Region, ...]:
    """The regions of a block whose original is ``original_length`` bytes and whose
    transformed stream is ``stream_length`` bytes; FormatError on anything inconsistent."""
    reader = _Reader(buf, bounds)
    if reader.byte() != VERSION:
        raise FormatError("transform record has an unknown version")
    regions = _regions(reader, original_length, stream_length, 1)
    if reader.pos != len(reader.buf):
        raise FormatError("transform record has trailing bytes")
    return regions


def _regions(reader, original_length, stream_length, depth):
    bounds = reader.bounds
    count = reader.varint()
    # Each region takes at least 8 bytes, so a count the record cannot hold is refused
    # before the loop runs.
    if count > (len(reader.buf) - reader.pos) // 8:
        raise FormatError("transform record declares more regions than it holds")
    reader.regions += count
    if reader.regions > bounds.max_regions:
        raise FormatError("transform record has too many regions")
    regions = []
    end = 0
    out_total = 0
    for _ in range(count):
        kind = reader.byte()
        offset = end + reader.varint()
        length = reader.varint()
        out_length = reader.varint()
        crc = reader.u32()
        if offset + length > original_length:
            raise FormatError("transform region lies outside its block")
        if out_length > stream_length:
            raise FormatError("transform region is longer than the stream")
        if kind == DEFLATE:
            params, nested = _deflate(reader, out_length, depth)
        elif kind == X86:
            base = reader.varint()
            if base > bounds.max_base or out_length != length:
                raise FormatError("x86 transform region is inconsistent")
            params, nested = X86Filter(base), ()
        elif kind == PNG:
            params, nested = _png(reader, length, out_length, depth)
        else:
            raise FormatError(f"transform record has an unknown kind {kind}")
        regions.append(Region(kind, offset, length, out_length, crc, params, nested))
        end = offset + length
        out_total += out_length - length
    if original_length + out_total != stream_length:
        raise FormatError("transform regions do not add up to the stream's length")
    return tuple(regions)


def _deflate(reader, out_length, depth):
    wbits, level, mem_level, strategy = (reader.byte() for _ in range(4))
    inflated = reader.varint()
    if not (9 <= wbits <= 15 and 1 <= level <= 9 and 1 <= mem_level <= 9 and strategy <= 4):
        raise FormatError("deflate transform has impossible zlib parameters")
    if inflated > reader.bounds.max_inflated:
        raise FormatError("deflate transform inflates past the limit")
    n_ends = reader.varint()
    if n_ends > len(reader.buf) - reader.pos:
        raise FormatError("deflate transform declares more block ends than it holds")
    ends, end = [], 0
    for _ in range(n_ends):
        step = reader.varint()
        end += step
        if step == 0 or end > inflated:
            raise FormatError("deflate transform has block ends out of order or past its end")
        ends.append(end)
    nested = _nested(reader, inflated, out_length, depth)
    return Deflate(wbits, level, mem_level, strategy, inflated, tuple(ends)), nested


def _png(reader, length, out_length, depth):
    n = reader.varint()
    if n < 2 or n > len(reader.buf) - reader.pos:
        raise FormatError("png transform declares a chunk count it cannot hold")
    lengths = tuple(reader.varint() for _ in range(n))
    joined = sum(lengths)
    if max(lengths) >= 1 << 31 or joined + 12 * (n - 1) != length:
        raise FormatError("png transform chunks do not span its region")
    return PngChunks(lengths), _nested(reader, joined, out_length, depth)


def _nested(reader, original_length, stream_length, depth):
    start = reader.pos
    count = reader.varint()
    reader.pos = start
    if count and depth >= reader.bounds.max_depth:
        raise FormatError("transform record nests too deep")
    return _regions(reader, original_length, stream_length, depth + 1)
