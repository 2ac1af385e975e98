"""Transforms a block may go through before the predictor, and their exact inverses.

``forward(block)`` returns the transformed stream and its regions (none: the block is left
as it is); ``inverse(stream, regions, length)`` gives the block back and checks each region's
CRC32 of the original bytes. ``record.encode``/``record.decode`` turn the regions into bytes
and back. One module per transform: ``deflate`` (streams zlib re-deflates bit for bit; their
inflated data may again hold streams or x86 code, to ``record.Bounds.max_depth``), ``png``
(IDAT chunks joined, so that the deflate transform finds the image's zlib stream) and ``x86``
(call, jump and RIP-relative targets made absolute, in blocks that look like x86 code).
Format version 7 (``container``) codes a segment of a frame transformed and stores its
record.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from ..errors import ChecksumError, FormatError
from . import deflate, png, record, x86
from .region import DEFLATE, KINDS, PNG, X86, Deflate, PngChunks, Region, X86Filter

__all__ = [
    "DEFLATE",
    "PNG",
    "X86",
    "Deflate",
    "Options",
    "PngChunks",
    "Region",
    "X86Filter",
    "forward",
    "inverse",
    "kinds",
    "record",
    "summary",
]


@dataclass(frozen=True)
class Options:
    deflate_streams: bool = True
    x86_code: bool = True
    budget: deflate.Budget = field(default_factory=deflate.Budget)
    max_depth: int = record.Bounds().max_depth


def forward(block: bytes, options: Options = Options(), base: int = 0):
    """(transformed stream, regions) of ``block``, whose first byte is at ``base`` in its
    file; regions empty and the stream the block itself when nothing applies."""
    return _forward(bytes(block), options, base, 1, deflate.Spend(options.budget))


def _forward(block, options, base, depth, spend):
    items = _streams(block, options, depth, spend)
    code = options.x86_code and len(block) >= 5 and x86.looks_like_code(block)
    parts, regions, end = [], [], 0

    def between(stop):
        # The bytes up to the next stream: filtered as x86 in a block of code.
        piece = block[end:stop]
        if code and len(piece) >= 5:
            crc = zlib.crc32(piece)
            regions.append(Region(X86, end, len(piece), len(piece), crc, X86Filter(base + end)))
            piece = x86.encode(piece, base + end)
        parts.append(piece)

    for offset, length, kind, params, payload, nested in items:
        between(offset)
        crc = zlib.crc32(memoryview(block)[offset : offset + length])
        parts.append(payload)
        regions.append(Region(kind, offset, length, len(payload), crc, params, nested))
        end = offset + length
    between(len(block))
    return b"".join(parts), tuple(regions)


def _streams(block, options, depth, spend):
    """(offset, length, kind, params, payload, nested) of each deflate stream and each run
    of PNG IDAT chunks holding one, in order, not overlapping."""
    if not options.deflate_streams:
        return []

    def inner(data):
        if depth < options.max_depth:
            return _forward(data, options, 0, depth + 1, spend)
        return data, ()

    items = []
    if depth < options.max_depth:
        for start, lengths in png.find(block):
            joined = png.join(block, start, lengths)
            payload, nested = _forward(joined, options, 0, depth + 1, spend)
            if any(r.kind == DEFLATE for r in nested):
                span = png.span(lengths)
                items.append((start, span, PNG, PngChunks(lengths), payload, nested))
    taken = [(i[0], i[0] + i[1]) for i in items]
    for f in deflate.find(block, spend):
        if not any(a < f.offset + f.length and f.offset < b for a, b in taken):
            items.append((f.offset, f.length, DEFLATE, f.params, *inner(f.inflated)))
    return sorted(items, key=lambda i: i[0])


def inverse(stream: bytes, regions, length: int) -> bytes:
    """The original ``length`` bytes of a block from its transformed ``stream``.

    FormatError when the regions do not fit the stream, ChecksumError when a region does not
    give back the bytes its CRC32 names (a damaged record or stream, or a zlib that deflates
    differently from the one that wrote the file)."""
    stream = memoryview(stream)
    parts, pos, end = [], 0, 0
    for r in regions:
        gap = r.offset - end
        payload_start = pos + gap
        if gap < 0 or payload_start + r.out_length > len(stream):
            raise FormatError("transform regions do not fit the stream")
        parts.append(stream[pos:payload_start])
        original = _invert(r, stream[payload_start : payload_start + r.out_length])
        if len(original) != r.length or zlib.crc32(original) != r.crc:
            raise ChecksumError(f"a {KINDS[r.kind]} transform does not restore its original bytes")
        parts.append(original)
        pos = payload_start + r.out_length
        end = r.offset + r.length
    parts.append(stream[pos:])
    out = b"".join(parts)
    if len(out) != length:
        raise FormatError("transform regions do not add up to the block's length")
    return out


def _invert(r, payload):
    p = r.params
    if r.kind == X86:
        return x86.decode(payload, p.base)
    if r.kind == PNG:
        return png.split(inverse(payload, r.nested, sum(p.lengths)), p.lengths)
    assert isinstance(p, Deflate)
    inflated = inverse(payload, r.nested, p.inflated_length)
    return deflate.deflate(inflated, p, r.length) or b""


def summary(regions, into=None) -> dict:
    """{kind name: [regions, original bytes, payload bytes]} of ``regions`` and the regions
    nested in them, added to ``into``, for a report such as ``info``."""
    into = {} if into is None else into
    for r in regions:
        count = into.setdefault(KINDS[r.kind], [0, 0, 0])
        count[0] += 1
        count[1] += r.length
        count[2] += r.out_length
        summary(r.nested, into)
    return into


def kinds(regions) -> list[str]:
    """The transforms used, by name, each once, for a report such as ``info``."""
    names = []
    for r in regions:
        names += [KINDS[r.kind], *kinds(r.nested)]
    return list(dict.fromkeys(names))
