"""PNG image data split over several IDAT chunks, joined into the one zlib stream it is.

PNG writers cut the image's zlib stream into chunks (libpng: 8 KB each), each framed by
its length, ``IDAT`` and a CRC32, so no deflate stream is whole in the file. This
transform's payload is the chunks' data joined; the deflate transform then finds the zlib
stream in it (a nested region). The inverse cuts the payload at the recorded chunk lengths
and writes each chunk's framing again, its CRC computed. A run of chunks is taken only if
every CRC between them is right, so the framing written back is the framing read.
"""

from __future__ import annotations

import struct
import zlib

_TYPE = b"IDAT"


def find(block: bytes) -> list[tuple[int, tuple[int, ...]]]:
    """(offset of the first chunk's data, data lengths) of each run of two or more IDAT
    chunks whose CRCs are right, in order."""
    runs = []
    at = block.find(_TYPE, 4)
    while at >= 0:
        lengths = []
        start = data = at + 4
        while True:
            (length,) = struct.unpack_from(">I", block, data - 8)
            end = data + length
            if end + 4 > len(block) or block[data - 4 : data] != _TYPE:
                break
            (crc,) = struct.unpack_from(">I", block, end)
            if crc != zlib.crc32(memoryview(block)[data - 4 : end]):
                break
            lengths.append(length)
            data = end + 12
            if data > len(block):
                break
        if len(lengths) >= 2:
            runs.append((start, tuple(lengths)))
        last = start + sum(lengths) + 12 * max(len(lengths) - 1, 0)
        at = block.find(_TYPE, max(last, at + 1))
    return runs


def join(block, start, lengths) -> bytes:
    parts, at = [], start
    for length in lengths:
        parts.append(block[at : at + length])
        at += length + 12
    return b"".join(parts)


def split(payload, lengths) -> bytes:
    """The chunks again, from the first one's data to the last one's data end."""
    out, at = bytearray(), 0
    for n, length in enumerate(lengths):
        if n:
            out += struct.pack(">I", length) + _TYPE
        data = payload[at : at + length]
        out += data
        if n < len(lengths) - 1:
            out += struct.pack(">I", zlib.crc32(_TYPE + bytes(data)))
        at += length
    return bytes(out)


def span(lengths) -> int:
    """Bytes from the first chunk's data to the last one's data end."""
    return sum(lengths) + 12 * (len(lengths) - 1)
