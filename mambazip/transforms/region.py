"""What a transform leaves for the decoder: one ``Region`` per replaced span of a block.

A transformed block is the block with each region's original bytes replaced by its payload,
in order: the bytes between regions are copied unchanged. A region says where its original
bytes were (``offset``, ``length``), how many payload bytes replace them (``out_length``),
which transform made the payload (``kind``) with that transform's ``params``, and the CRC32
of the original bytes, which the inverse checks. A deflate or png region's payload may itself hold
regions (``nested``, offsets into the inflated or joined data), to a bounded depth.
"""

from __future__ import annotations

from dataclasses import dataclass

# Kinds, as stored in the record (one byte each); never renumber a kind once a format uses it.
DEFLATE = 1
X86 = 2
PNG = 3
KINDS = {DEFLATE: "deflate", X86: "x86", PNG: "png"}


@dataclass(frozen=True)
class Deflate:
    """How zlib re-deflates the inflated data to the original raw deflate bytes."""

    wbits: int  # 9..15, the window of deflateInit2 (raw: zlib is given -wbits)
    level: int  # 1..9 (level 0 is never tried; see deflate.py)
    mem_level: int  # 1..9
    strategy: int  # 0..4: default, filtered, huffman only, rle, fixed
    inflated_length: int  # bytes the stream inflates to (the nested regions' original)
    # Inflated offsets where zlib must end a block (flush with Z_BLOCK) to remake a stream
    # whose writer ended blocks early; empty when zlib's own block ends do.
    ends: tuple[int, ...] = ()


@dataclass(frozen=True)
class X86Filter:
    """The E8/E9 filter; ``base`` is the offset of the region's first byte in its file,
    so one call target reads the same absolute address in every block."""

    base: int


@dataclass(frozen=True)
class PngChunks:
    """IDAT chunks joined: the data length of each, in order."""

    lengths: tuple[int, ...]


@dataclass(frozen=True)
class Region:
    kind: int
    offset: int  # where the original bytes start, in the (parent's) original
    length: int  # original bytes replaced
    out_length: int  # payload bytes in the transformed stream
    crc: int  # CRC32 of the original bytes
    params: Deflate | X86Filter | PngChunks
    nested: tuple[Region, ...] = ()
