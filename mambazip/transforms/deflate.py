"""Deflate streams inside a block: find them, inflate them, and prove zlib remakes them.

A stream is kept only when zlib, given the inflated data and one set of parameters (window
bits, level, memLevel, strategy), deflates it to exactly the original bytes; then the
payload is the inflated data and the parameters are all the decoder needs. Headers and
trailers (zlib's two bytes and Adler-32, gzip's header and CRC, a zip entry's local header)
stay in the block as bytes: only the raw deflate data is replaced.

Where streams are looked for:

- gzip members: ``1f 8b 08`` and a header with known flags;
- zip local entries: ``PK 03 04`` with method 8;
- zlib streams: any two bytes that form a valid zlib header without a preset dictionary.
  PDF ``FlateDecode`` streams and PNG files whose image data is one ``IDAT`` chunk are
  zlib streams and are found this way; an image split over several ``IDAT`` chunks is
  found once ``png`` has joined them.

Everything is bounded by ``Budget``: an inflater never produces more than
``max_inflated`` bytes for one stream (``decompressobj`` with ``max_length``; a stream that
would give more, a deflate bomb, stays as bytes), the block's streams together at most
``max_total`` (one ``Spend`` counts every depth of nesting, so a zip of zips cannot
multiply it), and the parameter search at most ``max_tries`` re-deflates per stream and
``max_block_tries`` per block. Candidates are tried in order of how often they occur (the
zlib header's level hint and window first; levels 6, 9, 1; memLevel 8 then 9 (GNU gzip
matches zlib at memLevel 9); the default strategy), and the first match wins. When none
matches, the stream's own block ends are read (``deflate_blocks``): GNU gzip and Info-ZIP
end blocks early where zlib does not, and zlib flushing with ``Z_BLOCK`` at those ends
remakes their streams (``max_tries_at_ends`` more tries, levels 9 to 6, memLevel 9 and 8).
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass

import numpy as np

from .deflate_blocks import block_ends
from .region import Deflate

_CHUNK = 1 << 14  # bytes fed to a compressor between comparisons, so a mismatch stops early
# Not level 0: zlib sizes stored blocks by the room left in the output buffer, which
# Python's zlib module chooses and has changed between versions, so another Python might
# not remake the same stream.
_LEVELS = (6, 9, 1, 5, 4, 3, 2, 8, 7)
# What a zlib header's FLEVEL field says about the level that wrote it.
_LEVEL_HINT = {0: (1,), 1: (5, 4, 3, 2), 2: (6,), 3: (9, 8, 7)}
_STRATEGIES = (
    zlib.Z_FILTERED,
    zlib.Z_HUFFMAN_ONLY,
    zlib.Z_RLE,
    zlib.Z_FIXED,
)


@dataclass(frozen=True)
class Budget:
    max_inflated: int = 64 << 20  # one stream's inflated bytes
    max_total: int = 256 << 20  # all streams of one block, inflated
    min_length: int = 32  # raw deflate bytes; shorter streams cost more to record than save
    max_tries: int = 48  # re-deflates per stream with zlib's own block ends
    max_tries_at_ends: int = 8  # and then with the stream's block ends
    max_block_tries: int = 512  # re-deflates per block
    max_candidates: int = 4096  # header matches tried per block
    max_blocks: int = 4096  # deflate blocks read to find where a stream's blocks end


@dataclass(frozen=True)
class Found:
    offset: int  # of the raw deflate data
    length: int
    inflated: bytes
    params: Deflate


class Spend:
    """What one block has used of its budget so far, at every depth."""

    def __init__(self, budget):
        self.budget = budget
        self.tries = 0
        self.inflated = 0


def find(block: bytes, spend: Spend) -> list[Found]:
    """The streams in ``block`` that zlib reproduces, in order, not overlapping."""
    budget = spend.budget
    found = []
    end = 0
    for start, hint in _candidates(block, budget):
        if start < end:
            continue
        f = _try(block, start, hint, spend)
        if f is not None:
            found.append(f)
            end = f.offset + f.length
        if spend.tries >= budget.max_block_tries or spend.inflated >= budget.max_total:
            break
    return found


def _candidates(block, budget):
    """(start of raw deflate data, (window bits, likely levels)) in order of start; the
    first ``max_candidates`` only, which bounds the inflate attempts of a block."""
    out = []
    data = np.frombuffer(block, dtype=np.uint8)
    if len(data) >= 2:
        at = np.flatnonzero((data[:-1] & 0x8F) == 0x08)  # method 8, window at most 2^15
        cmf = data[at].astype(np.uint16)
        flg = data[at + 1].astype(np.uint16)
        ok = ((cmf << 8 | flg) % 31 == 0) & ((flg & 0x20) == 0)  # check bits, no dictionary
        for p in at[ok].tolist():
            # A header's window of 2^8 is deflated with 2^9, as zlib itself does: raw
            # deflate refuses 8 window bits (zlib.compressobj raises).
            wbits = max((block[p] >> 4) + 8, 9)
            out.append((p + 2, (wbits, _LEVEL_HINT[block[p + 1] >> 6])))
    at = block.find(b"\x1f\x8b\x08")
    while at >= 0:
        start = _gzip_data(block, at)
        if start is not None:
            out.append((start, (15, ())))
        at = block.find(b"\x1f\x8b\x08", at + 1)
    at = block.find(b"PK\x03\x04")
    while at >= 0:
        if at + 30 <= len(block) and int.from_bytes(block[at + 8 : at + 10], "little") == 8:
            names = int.from_bytes(block[at + 26 : at + 28], "little")
            extra = int.from_bytes(block[at + 28 : at + 30], "little")
            out.append((at + 30 + names + extra, (15, ())))
        at = block.find(b"PK\x03\x04", at + 1)
    out.sort(key=lambda c: c[0])
    return out[: budget.max_candidates]


def _gzip_data(block, at):
    """Where a gzip member's deflate data starts (RFC 1952), or None."""
    flags = block[at + 3] if at + 3 < len(block) else 0xFF
    if flags & 0xE0:
        return None
    p = at + 10
    if flags & 4:  # FEXTRA
        if p + 2 > len(block):
            return None
        p += 2 + int.from_bytes(block[p : p + 2], "little")
    for bit in (8, 16):  # FNAME, FCOMMENT: zero-terminated
        if flags & bit:
            z = block.find(b"\0", p)
            if z < 0:
                return None
            p = z + 1
    if flags & 2:  # FHCRC
        p += 2
    return p if p < len(block) else None


def inflate(block, start, limit):
    """(inflated bytes, raw deflate length) of a complete stream at ``start``, or None when
    it is not one or would inflate past ``limit`` bytes."""
    view = memoryview(block)[start:]
    try:
        # Most candidates are not deflate and fail in their first bytes; a first look at
        # 4 KB costs far less than handing zlib the rest of the block.
        zlib.decompressobj(-15).decompress(view[:4096], 1 << 16)
        d = zlib.decompressobj(-15)
        out = d.decompress(view, limit + 1)
    except zlib.error:
        return None
    if not d.eof or len(out) > limit:
        return None
    return out, len(block) - start - len(d.unused_data)


def _try(block, start, hint, spend):
    budget = spend.budget
    limit = min(budget.max_inflated, budget.max_total - spend.inflated)
    got = inflate(block, start, limit)
    if got is None:
        return None
    data, length = got
    if length < budget.min_length:
        return None
    spend.inflated += len(data)
    raw = memoryview(block)[start : start + length]
    candidates = _parameters(hint, len(data))
    params = _first_match(data, raw, candidates, budget.max_tries, spend)
    if params is None:
        # zlib's own block ends did not do: read the stream's and flush at them.
        ends = block_ends(raw, budget.max_blocks)
        if ends is not None and len(ends) > 1:
            candidates = _parameters(hint, len(data), ends[:-1], short=True)
            params = _first_match(data, raw, candidates, budget.max_tries_at_ends, spend)
    return None if params is None else Found(start, length, data, params)


def _first_match(data, raw, candidates, tries, spend):
    for params in itertools.islice(candidates, tries):
        if spend.tries >= spend.budget.max_block_tries:
            return None
        spend.tries += 1
        if _reproduces(data, raw, params):
            return params
    return None


def _parameters(hint, inflated_length, ends=(), short=False):
    """Candidate parameters, most likely first, without repeats; ``short``: the default
    strategy at memLevel 8 and 9 only (what GNU gzip and Info-ZIP correspond to)."""
    wbits, levels = hint
    levels = tuple(dict.fromkeys((*levels, *_LEVELS)))
    windows = tuple(dict.fromkeys((wbits, 15, 14, 13, 12, 11, 10, 9)))
    seen = set()

    def fresh(w, level, mem, strategy):
        key = (w, level, mem, strategy)
        if key in seen:
            return None
        seen.add(key)
        return Deflate(w, level, mem, strategy, inflated_length, ends)

    if short:
        order = [(wbits, lv, mem, 0) for mem in (9, 8) for lv in (9, 8, 7, 6)]
    else:
        order = [(wbits, lv, mem, 0) for mem in (8, 9) for lv in levels]
        order += [(wbits, lv, 8, s) for s in _STRATEGIES for lv in levels[:3]]
        order += [(wbits, lv, mem, 0) for mem in (7, 6, 5, 4, 3, 2, 1) for lv in levels[:3]]
        order += [(w, lv, 8, 0) for w in windows[1:] for lv in levels[:3]]
    for candidate in order:
        p = fresh(*candidate)
        if p is not None:
            yield p


def compressor(params):
    return zlib.compressobj(
        params.level, zlib.DEFLATED, -params.wbits, params.mem_level, params.strategy
    )


def _pieces(data, params):
    """(input, flush mode) in the order zlib is given them: the input cut at each block end
    and flushed with Z_BLOCK there, and in chunks of _CHUNK between, so a mismatch is seen
    early (levels 1 to 9 write the same bytes however the input is cut between flushes)."""
    view = memoryview(data)
    start = 0
    for end in (*params.ends, len(view)):
        for i in range(start, end, _CHUNK):
            yield view[i : min(i + _CHUNK, end)], None
        yield b"", zlib.Z_BLOCK if end < len(view) else zlib.Z_FINISH
        start = end


def _outputs(data, params):
    c = compressor(params)
    for piece, flush in _pieces(data, params):
        yield c.compress(piece) if flush is None else c.flush(flush)


def _reproduces(data, raw, params):
    """Whether zlib with ``params`` deflates ``data`` to exactly ``raw``, stopping at the
    first differing output."""
    done = 0
    for piece in _outputs(data, params):
        if piece:
            if raw[done : done + len(piece)] != piece:
                return False
            done += len(piece)
    return done == len(raw)


def deflate(data, params, length):
    """Re-deflate ``data`` with ``params``; None as soon as the output passes ``length``
    bytes (a damaged record must not make the decoder write without bound)."""
    out = bytearray()
    for piece in _outputs(data, params):
        out += piece
        if len(out) > length:
            return None
    return bytes(out) if len(out) == length else None
