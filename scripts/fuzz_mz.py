"""Fuzz the decoder with structured mutations of every format version's golden files.

Each golden file ``tests/golden/v*/NAME.mz`` (with its original ``NAME.bin``) is parsed into
its regions (magic, version, header length, header JSON, header CRC, each block's n_bytes,
n_words and payload, end marker, length, CRC; every stream of a concatenated file) and
mutated region by region: truncation at and inside every region, header fields at extremes
(the JSON re-serialised and its CRC made valid again, so the mutation reaches the checks
behind the checksum), nesting, unknown keys, versions, declared sizes against the data
present, bit flips in payloads, and concatenations with a damaged second stream.

Every mutated file goes through the real command line, ``mambazip decompress -o out in.mz``
and ``mambazip info in.mz``, and each run must show what DESIGN.md ("Bad input gets a clear
error and loses nothing") promises:

- exit 0: the output equals the original (never a wrong output), no temporary file left;
- otherwise exit 1, exactly one line on stderr starting "mambazip: ", no traceback, no output
  file and no temporary file left (in the output's directory or in TMPDIR);
- the input is never modified; peak RSS at most 1 GB (in a process whose address space is
  limited to 1 GiB by RLIMIT_AS, so an allocation beyond it fails instead of swapping) and at
  most 30 s of wall time per run.

How the runs are made: starting Python with NumPy and Numba costs about a second, so a worker
process (under RLIMIT_AS) runs many cases, one at a time, each through the entry point of the
``mambazip`` script (``mambazip.entry.run``, what ``python -m mambazip`` runs) with file
descriptors 0, 1 and 2 redirected to the case's own files, so that everything the process
writes, C code included, is what a user would see. An exception escaping the entry point is
reported as the interpreter reports it (a traceback, exit 1) and the worker is replaced, as
it is after a crash; a case running past ``--timeout`` kills its worker. Peak RSS per case
is VmHWM after resetting it (``/proc/self/clear_refs``); the worker's whole ru_maxrss (from
``os.wait4``) is reported too. ``--subprocess`` runs each case as its own ``python -m
mambazip`` process instead (slow, for checking the worker against the real thing).

    python scripts/fuzz_mz.py                  # every mutation of every golden file
    python scripts/fuzz_mz.py --list           # the case ids only
    python scripts/fuzz_mz.py --only ID --keep DIR   # rerun cases, keep their files

Exit status 1 when any run breaks a rule; the failures are listed after the summary table.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import random
import resource
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"

# The format, as container.py documents it (restated here so the fuzzer does not trust the
# reader it tests).
MAGIC = b"\x89MZIP\r\n\x1a"
SHORT_MAGIC = MAGIC[:2]  # version 6 on: these two bytes, then the version byte
STORED = 0xFFFFFFFF
_PREFIX = struct.Struct("<8sHI")
_U32 = struct.Struct("<I")
_TRAILER = struct.Struct("<QI")
# Version 4: frames and the seek index after them.
INDEX_MAGIC = b"MZINDEX\x1a"
MAX_FRAME = 1 << 40
V4_SIZES = {"block_size": 1 << 16, "frame_size": 4 << 20}  # left out of a v4 header


def v4_size(header, key):
    """A version-4 (or 5) header's block or frame size: absent means V4_SIZES's."""
    return header.get(key, V4_SIZES[key])


_ENTRY = struct.Struct("<QQI")  # per frame: compressed size, original size, CRC32
_INDEX_TAIL = struct.Struct("<IQ8s")  # index CRC, index length, magic
INDEX_FIXED = 4 + 4 + _TRAILER.size + _INDEX_TAIL.size  # the index without its entries

ADDRESS_SPACE = 1 << 30  # RLIMIT_AS of every run
MAX_RSS = 10**9  # bytes: acceptance bound on peak RSS
MAX_SECONDS = 30.0  # acceptance bound on one run's wall time
TIMEOUT = 60.0  # a run still going after this long is killed (and fails)
# Filling a cold Numba cache (every decoder compiled) takes minutes on a loaded 2-core machine
# and more than ADDRESS_SPACE: it is done once, unlimited, before the workers start.
WARM_TIMEOUT = 1800.0

EXTREMES = (0, -1, 2**31, 2**63, 1e308, True, "str", [], {}, None)
SIZES = (0, 1, 2**16, 2**24, 2**32 - 1)
DEEP = 100_000
_RAW = "\x00raw:"  # a string value replaced by raw JSON text when the header is serialised


# ------------------------------------------------------------------------- parsing


@dataclass
class Block:
    at: int  # offset of n_bytes
    n_bytes: int
    n_words: int
    payload: tuple  # (start, end) of the words or the stored bytes
    name: str = ""  # "block3"; in a version-4 stream "frame1.block0"

    @property
    def stored(self):
        return self.n_words == STORED


@dataclass
class Frame:
    """One frame of a version-4 or 5 stream: its blocks, then u32 0, u64 length, u32 CRC."""

    at: int  # offset of its first block
    blocks: list
    end_at: int  # offset of its end marker
    length: int
    crc: int

    @property
    def stop(self):
        return self.end_at + 4 + _TRAILER.size


@dataclass
class Index:
    """The seek index of a version-4 or 5 stream, from its mark (u32 0) to its magic."""

    mark_at: int
    entries: list  # (compressed size, original size, CRC32) per frame
    length: int
    crc: int
    index_crc: int
    index_len: int

    @property
    def total_at(self):
        return self.mark_at + 8 + _ENTRY.size * len(self.entries)

    @property
    def stop(self):
        return self.total_at + _TRAILER.size + _INDEX_TAIL.size

    @property
    def regions(self):
        at = self.mark_at
        out = [("index.mark", at, at + 4), ("index.n_frames", at + 4, at + 8)]
        for i in range(len(self.entries)):
            e = at + 8 + _ENTRY.size * i
            out += [
                (f"index.entry{i}.packed_size", e, e + 8),
                (f"index.entry{i}.size", e + 8, e + 16),
                (f"index.entry{i}.crc", e + 16, e + 20),
            ]
        t = self.total_at
        out += [
            ("index.length", t, t + 8),
            ("index.crc", t + 8, t + 12),
            ("index.index_crc", t + 12, t + 16),
            ("index.index_len", t + 16, t + 24),
            ("index.magic", t + 24, t + 32),
        ]
        return out


@dataclass
class Stream:
    start: int
    version: int
    header_len: int
    header: dict
    blocks: list
    end_at: int  # offset of the end marker (u32 0)
    length: int
    crc: int
    stop: int  # offset after the trailer (version 4: after the index)
    frames: list = None  # version 4: its Frames
    index: Index = None  # version 4

    @property
    def trailers(self):
        """(name suffix, end marker offset, length, CRC) of every end: the stream's, or in
        version 4 each frame's."""
        if self.frames is None:
            return [("", self.end_at, self.length, self.crc)]
        return [(f".frame{i}", f.end_at, f.length, f.crc) for i, f in enumerate(self.frames)]

    @property
    def header_span(self):
        return self.start + _PREFIX.size, self.start + _PREFIX.size + self.header_len

    @staticmethod
    def _block_regions(blocks):
        out = []
        for b in blocks:
            out += [
                (f"{b.name}.n_bytes", b.at, b.at + 4),
                (f"{b.name}.n_words", b.at + 4, b.at + 8),
                (f"{b.name}.payload", *b.payload),
            ]
        return out

    @property
    def regions(self):
        """(name, start, end) of every region of the stream, in file order."""
        h0, h1 = self.header_span
        out = [
            ("magic", self.start, self.start + 8),
            ("version", self.start + 8, self.start + 10),
            ("header_len", self.start + 10, h0),
            ("header", h0, h1),
            ("header_crc", h1, h1 + 4),
        ]
        if self.frames is None:
            out += self._block_regions(self.blocks)
            out += [
                ("end", self.end_at, self.end_at + 4),
                ("length", self.end_at + 4, self.end_at + 12),
                ("crc", self.end_at + 12, self.stop),
            ]
        else:
            for i, f in enumerate(self.frames):
                out += self._block_regions(f.blocks)
                out += [
                    (f"frame{i}.end", f.end_at, f.end_at + 4),
                    (f"frame{i}.length", f.end_at + 4, f.end_at + 12),
                    (f"frame{i}.crc", f.end_at + 12, f.stop),
                ]
            out += self.index.regions
        return [r for r in out if r[2] > r[1]]


def parse(blob):
    """The streams of a valid .mz file."""
    streams, at = [], 0
    while at < len(blob):
        magic, version, header_len = _PREFIX.unpack_from(blob, at)
        assert magic == MAGIC, f"no stream at {at}"
        h0 = at + _PREFIX.size
        header = json.loads(blob[h0 : h0 + header_len])
        pos = h0 + header_len + 4
        if version >= 4:
            streams.append(_parse_frames(blob, at, version, header_len, header, pos))
            at = streams[-1].stop
            continue
        blocks, pos = _parse_blocks(blob, pos, version, "")
        length, crc = _TRAILER.unpack_from(blob, pos + 4)
        stop = pos + 4 + _TRAILER.size
        streams.append(Stream(at, version, header_len, header, blocks, pos, length, crc, stop))
        at = stop
    return streams


def _parse_blocks(blob, pos, version, prefix):
    """The blocks from ``pos`` up to an end marker; (blocks, offset of the end marker)."""
    blocks = []
    while True:
        (n_bytes,) = _U32.unpack_from(blob, pos)
        if n_bytes == 0:
            return blocks, pos
        (n_words,) = _U32.unpack_from(blob, pos + 4)
        size = n_bytes if n_words == STORED and version >= 3 else 4 * n_words
        name = f"{prefix}block{len(blocks)}"
        blocks.append(Block(pos, n_bytes, n_words, (pos + 8, pos + 8 + size), name))
        pos += 8 + size


def _parse_frames(blob, at, version, header_len, header, pos):
    """A version-4 stream from its first frame at ``pos``: frames up to the index's mark,
    then the index, checked against the frames (the golden files are valid)."""
    frames = []
    while _U32.unpack_from(blob, pos)[0] != 0:
        blocks, end_at = _parse_blocks(blob, pos, version, f"frame{len(frames)}.")
        length, crc = _TRAILER.unpack_from(blob, end_at + 4)
        frames.append(Frame(pos, blocks, end_at, length, crc))
        pos = frames[-1].stop
    mark_at = pos
    (n,) = _U32.unpack_from(blob, pos + 4)
    entries = [_ENTRY.unpack_from(blob, pos + 8 + _ENTRY.size * i) for i in range(n)]
    total = pos + 8 + _ENTRY.size * n
    length, crc = _TRAILER.unpack_from(blob, total)
    index_crc, index_len, magic = _INDEX_TAIL.unpack_from(blob, total + _TRAILER.size)
    index = Index(mark_at, entries, length, crc, index_crc, index_len)
    assert magic == INDEX_MAGIC and index_len == INDEX_FIXED + _ENTRY.size * n
    assert entries == [(f.stop - f.at, f.length, f.crc) for f in frames]
    assert zlib.crc32(blob[mark_at + 4 : total + _TRAILER.size]) == index_crc
    blocks = [b for f in frames for b in f.blocks]
    end_at = frames[-1].end_at
    return Stream(
        at, version, header_len, header, blocks, end_at, length, crc, index.stop, frames, index
    )


def index_bytes(entries, length, crc, n=None, index_crc=None, index_len=None, magic=None):
    """A seek index (from its mark to its magic) as the writer makes it; each of ``n``
    (frames declared), ``index_crc``, ``index_len`` and ``magic`` replaces the value the
    writer would have put there."""
    body = _U32.pack(len(entries) if n is None else n)
    body += b"".join(_ENTRY.pack(*e) for e in entries) + _TRAILER.pack(length, crc)
    tail = _INDEX_TAIL.pack(
        zlib.crc32(body) if index_crc is None else index_crc,
        INDEX_FIXED + _ENTRY.size * len(entries) if index_len is None else index_len,
        INDEX_MAGIC if magic is None else magic,
    )
    return _U32.pack(0) + body + tail


def with_header(blob, stream, header, version=None, raw=None):
    """``blob`` with ``stream``'s header JSON replaced (``raw`` bytes, or ``header``
    serialised as the writer does), its length and CRC made valid again."""
    if raw is None:
        raw = serialise(header)
    version = stream.version if version is None else version
    h1 = stream.header_span[1]
    prefix = _PREFIX.pack(MAGIC, version, len(raw))
    return blob[: stream.start] + prefix + raw + _U32.pack(zlib.crc32(raw)) + blob[h1 + 4 :]


def serialise(header):
    text = json.dumps(header, sort_keys=True, separators=(",", ":"))
    while (i := text.find(json.dumps(_RAW)[:-1])) >= 0:  # "\u0000raw:TEXT" -> TEXT
        j = text.index('"', i + 1)
        text = text[:i] + json.loads(text[i : j + 1])[len(_RAW) :] + text[j + 1 :]
    return text.encode()


def raw_json(text):
    return _RAW + text


def deep_value(depth):
    return raw_json("[" * depth + "]" * depth)


def put_u32(blob, at, value):
    return blob[:at] + _U32.pack(value) + blob[at + 4 :]


def end_stream(length, crc):
    return _U32.pack(0) + _TRAILER.pack(length, crc)


def empty_stream():
    """A valid empty version-3 stream (the short header: no settings, no block size)."""
    raw = serialise({"model_sha256": None})
    return _PREFIX.pack(MAGIC, 3, len(raw)) + raw + _U32.pack(zlib.crc32(raw)) + end_stream(0, 0)


# ------------------------------------------------------------------------- mutations


@dataclass
class Case:
    id: str  # GOLDEN/NAME.mz:category:detail
    category: str
    blob: bytes
    expected: bytes  # what decompress must write if it exits 0 (None: it must fail)
    span: tuple = (0, 0)  # the range (START, END) of the range command
    ranged: bytes = None  # what the range command slices when it exits 0 (None: it fails)


def cases(root=GOLDEN):
    """Every mutation of every golden file under ``root``/v*/ (ids unique, order fixed)."""
    out, seen = [], set()
    files = sorted(Path(root).glob("v*/*.mz"))
    known = known_fields(f.read_bytes() for f in files if not compact(f.read_bytes()))
    for mz in files:
        blob, original = mz.read_bytes(), mz.with_suffix(".bin").read_bytes()
        name = f"{mz.parent.name}/{mz.name}"
        spans = list(ranges(blob, original).values())
        if compact(blob):
            made = compact_mutations(name, blob, original)
        else:
            made = mutations(name, blob, original, known)
        for category, detail, mutated, expected, *ranged in made:
            case_id = f"{name}:{category}:{detail}"
            if case_id in seen or mutated == blob:
                continue
            seen.add(case_id)
            span = spans[len(seen) % len(spans)]  # each kind of range in turn
            out.append(Case(case_id, category, mutated, expected, span, (ranged or [expected])[0]))
    return out


def compact(blob):
    """Whether ``blob`` begins with a version-6 stream (its two-byte magic, then the
    version byte where the long magic goes on with "Z")."""
    return len(blob) > 2 and blob[:2] == SHORT_MAGIC and blob[2] != MAGIC[2]


def varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def compact_mutations(name, blob, original):
    """(category, detail, mutated, expected) of a version-6 file, which has no JSON to
    re-serialise: truncation, every bit of its first 48 bytes flipped, those
    bytes set to extremes, varints that never end or declare 2^63 put at each of its first
    16 places, bytes inserted and deleted there, the final check broken, and
    concatenations. A mutation that decodes must give the original (a flip in the coder's
    padding may). Truncations at each of the first 64 and last 16 bytes and 32 others."""
    rng = random.Random(zlib.crc32(name.encode()))
    head = min(len(blob), 48)
    cuts = set(range(min(len(blob), 64))) | set(range(max(0, len(blob) - 16), len(blob)))
    cuts |= set(rng.sample(range(len(blob)), min(32, len(blob))))
    for cut in sorted(cuts):
        yield "truncate", f"at {cut}", blob[:cut], None
    for bit in range(8 * head):
        yield "flip", f"bit {bit}", _flip(blob, bit), original
    for at in range(head):
        for value in sorted({0, 1, 0x7F, 0x80, 0xFF} - {blob[at]}):
            mutated = blob[:at] + bytes([value]) + blob[at + 1 :]
            yield "byte", f"byte {at}={value:#x}", mutated, original
    for at in range(3, min(len(blob), 16)):
        for what, junk in (("endless varint", b"\xff" * 12), ("varint 2^63", varint(2**63)),
                           ("varint 2^32", varint(2**32)), ("zero byte", b"\x00")):  # fmt: skip
            yield "varint", f"{what} inserted at {at}", blob[:at] + junk + blob[at:], original
        yield "varint", f"byte {at} deleted", blob[:at] + blob[at + 1 :], original
    yield "check", "last byte flipped", blob[:-1] + bytes([blob[-1] ^ 1]), None
    yield "check", "zeroed", blob[:-4] + bytes(4), original if blob[-4:] == bytes(4) else None
    for bit in sorted(rng.sample(range(8 * head, 8 * len(blob)), min(32, 8 * (len(blob) - head)))):
        yield "flip", f"bit {bit}", _flip(blob, bit), original
    yield "concat", "twice", blob + blob, original * 2
    for cut in sorted({1, 3, len(blob) // 2, len(blob) - 1}):
        yield "concat", f"second cut at {cut}", blob + blob[:cut], None
    for junk in (b"\x00", b"\x89", SHORT_MAGIC, SHORT_MAGIC + b"\x06", SHORT_MAGIC + b"\x07",
                 MAGIC, b"\x00" * 64):  # fmt: skip
        yield "concat", f"then {len(junk)} bytes {junk[:8].hex()}", blob + junk, None
    yield from transform_mutations(blob, original)


# Version 7: a transformed segment's head in a frame (n_bytes, then TRANSFORM where n_words
# goes, u32 stream length, u32 record length, the record), or in the short form's header
# after the original's length (varint stream length, varint record length, the record).
TRANSFORM = 0xFFFFFFFD
SKIPPED = 0xFFFFFFFE
F_BASE, F_DIFF, F_PRIOR, F_DIGEST, F_RESUME, F_NAME, F_MTIME, F_LONG = (1 << i for i in range(8))
MAX_SEGMENT, MAX_STREAM, MAX_RECORD = 1 << 25, 1 << 29, 1 << 22


def _read_varint(blob, at):
    value, shift = 0, 0
    while True:
        byte = blob[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if byte < 0x80:
            return value, at


def transform_heads(blob):
    """(offset of the head's first field, offset of its record, record length, short) of
    each transformed segment of the first stream of a version-7 file ``blob``; short: the
    head is the short form's (varints in the header)."""
    if blob[2] != 7:
        return []
    flags, at = blob[3], 4
    if flags & F_BASE:
        at = _read_varint(blob, at)[1]
    if flags & F_DIFF:
        n, at = _read_varint(blob, at)
        at += n
    if flags & F_DIGEST:
        at += 32
    if flags & F_NAME:
        n, at = _read_varint(blob, at)
        at += n
    if flags & F_MTIME:
        at = _read_varint(blob, at)[1]
    if not flags & F_LONG:
        head = _read_varint(blob, at)[1]  # the original's length
        record_len, record_at = _read_varint(blob, _read_varint(blob, head)[1])
        return [(head, record_at, record_len, True)]
    for _ in range(3):  # block size, frame size, size + 1
        at = _read_varint(blob, at)[1]
    at += 4  # the header's CRC32
    heads = []
    while _U32.unpack_from(blob, at)[0]:  # frames up to the index's mark
        while (n_bytes := _U32.unpack_from(blob, at)[0]) != 0:
            (n_words,) = _U32.unpack_from(blob, at + 4)
            if n_words == TRANSFORM:
                (record_len,) = _U32.unpack_from(blob, at + 12)
                heads.append((at, at + 16, record_len, False))
                at += 16 + record_len
            else:
                at += 8 + (n_bytes if n_words in (STORED, SKIPPED) else 4 * n_words)
        at += 4 + _TRAILER.size
    return heads


def transform_mutations(blob, original):
    """The first and last transformed segment's head: every bit of its record (up to 64
    bytes) flipped, the record cut short, and each size it declares at the extremes."""
    heads = transform_heads(blob)
    for i, (head, record_at, record_len, short) in enumerate(dict.fromkeys(heads[:1] + heads[-1:])):
        name = f"head{i}"
        for bit in range(8 * min(record_len, 64)):
            yield (
                "transform",
                f"{name} record bit {bit}",
                _flip(blob, 8 * record_at + bit),
                original,
            )
        for cut in sorted({record_at, record_at + record_len // 2, record_at + record_len - 1}):
            yield "transform", f"{name} cut at {cut}", blob[:cut], None
        if short:
            extremes = (("stream", 0), ("stream", 1), ("stream", 1 << 24), ("record", 0),
                        ("record", record_len + 1), ("record", 1 << 22))  # fmt: skip
            for what, value in extremes:
                at = head if what == "stream" else _read_varint(blob, head)[1]
                end = _read_varint(blob, at)[1]
                mutated = blob[:at] + varint(value) + blob[end:]
                yield "transform", f"{name} {what} varint={value}", mutated, original
            continue
        (n_bytes,) = _U32.unpack_from(blob, head)
        (stream,) = _U32.unpack_from(blob, head + 8)
        for offset, what, values in (
            (0, "n_bytes", (1, n_bytes - 1, n_bytes + 1, MAX_SEGMENT, MAX_SEGMENT + 1)),
            (8, "stream", (0, 1, stream - 1, stream + 1, MAX_STREAM, MAX_STREAM + 1)),
            (12, "record", (0, 1, record_len - 1, record_len + 1, MAX_RECORD + 1, 2**32 - 1)),
        ):
            for value in values:
                mutated = put_u32(blob, head + offset, value)
                yield "transform", f"{name} {what}={value}", mutated, original
        yield "transform", f"{name} marker as n_words", put_u32(blob, head + 4, SKIPPED), original


def ranges(blob, original):
    """{kind: (START, END)} of the ranges the range command asks of a golden file: inside
    one frame (the second, if any), across the first frame's end, the whole original, and
    an empty one in the middle (without frames: the middle stands for a frame's edge).
    Version 6 (``compact``): the whole original and its second half."""
    n = len(original)
    if compact(blob):
        return {"whole": (0, n), "second half": (n // 2, n)}
    s = parse(blob)[0]
    sizes = [f.length for f in s.frames] if s.frames else [n]
    first = sizes[0]
    at, size = (first, sizes[1]) if len(sizes) > 1 else (0, first)
    edge = first if len(sizes) > 1 else n // 2
    return {
        "inside": (at + size // 3, at + min(size, max(size // 3 + 1, 2 * size // 3))),
        "edge": (max(0, edge - 7), min(n, edge + 7)),
        "whole": (0, n),
        "empty": (n // 2, n // 2),
    }


def known_fields(blobs):
    """{section: field names} of the model, train and mix settings over every golden file's
    first header, so that a header that leaves fields out (at their defaults) has them
    mutated too."""
    known = {"model": set(), "train": set(), "mix": set()}
    for blob in blobs:
        settings = parse(blob)[0].header.get("settings")
        for section, names in known.items():
            if isinstance(settings, dict) and isinstance(settings.get(section), dict):
                names |= set(settings[section])
    return {k: sorted(v) for k, v in known.items()}


def mutations(name, blob, original, known=None):
    """(category, detail, mutated bytes, expected output) of one golden file; ``known``:
    see ``known_fields``."""
    streams = parse(blob)
    ends = {
        s.stop: original[: sum(t.length for t in streams[: i + 1])] for i, s in enumerate(streams)
    }
    rng = random.Random(zlib.crc32(name.encode()))
    yield from truncations(blob, streams, ends)
    yield from prefix_fields(blob, streams[0], original)
    yield from header_fields(blob, streams[0], original, known or {})
    yield from nesting(blob, streams[0])
    yield from block_fields(blob, streams, original)
    yield from declared_sizes(blob, streams[0], original)
    yield from bit_flips(blob, streams, original, rng)
    yield from concatenations(blob, original, rng)
    yield from frame_size_field(blob, streams, original)
    if streams[0].frames is not None:
        yield from index_fields(blob, streams[0], original, rng)
        yield from frame_moves(blob, streams[0], original)


def truncations(blob, streams, ends):
    cuts = set()
    for s in streams:
        for _, start, end in s.regions:
            cuts |= {start, start + 1, (start + end) // 2, end - 1, end}
    for cut in sorted(c for c in cuts if 0 <= c < len(blob)):
        region = next((r for s in streams for r in s.regions if r[1] <= cut < r[2]), ("?",))
        # Cut at the end of a stream that others follow: the streams before the cut decode.
        yield "truncate", f"at {cut} ({region[0]})", blob[:cut], ends.get(cut, b"")


def prefix_fields(blob, s, original):
    for i in (0, 7):
        yield "magic", f"byte {i} flipped", _flip(blob, s.start + 8 * i), original
    yield "magic", "zeroed", bytes(8) + blob[8:], original
    # 5 relabels a version-4 file (its mixing coded by all nodes) as nibble coded, and back;
    # 6 is the next version, not yet read.
    for v in (0, 1, 2, 3, 4, 5, 6, 65535):
        if v != s.version:
            mutated = blob[:8] + struct.pack("<H", v) + blob[10:]
            yield "version", f"{v}", mutated, original
    for n in (0, s.header_len - 1, s.header_len + 1, 1 << 20, (1 << 20) + 1, 2**32 - 1):
        yield "header_len", f"{n}", put_u32(blob, 10, n), original
    h1 = s.header_span[1]
    yield "header_crc", "bit flipped", _flip(blob, 8 * h1 + 3), original
    h0 = s.header_span[0]
    yield "header", "byte flipped, crc kept", _flip(blob, 8 * (h0 + s.header_len // 2)), original


def _flip(blob, bit):
    b = bytearray(blob)
    b[bit // 8] ^= 1 << (bit % 8)
    return bytes(b)


def _fields(header, known):
    """Paths of every field of the header: top level, settings, and inside model, train and
    mix: those the golden file has, and the ``known`` ones of model and train (and of mix
    when the file has a mix)."""
    paths = [(k,) for k in header]
    settings = header.get("settings")
    if isinstance(settings, dict):
        paths += [("settings", k) for k in settings]
        for section in ("model", "train", "mix"):
            present = settings.get(section)
            names = list(present) if isinstance(present, dict) else []
            if section != "mix" or isinstance(present, dict):
                names += [k for k in known.get(section, ()) if k not in names]
            paths += [("settings", section, k) for k in names]
    return paths


def _has(header, path):
    d = header
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return False
        d = d[key]
    return True


def _set(header, path, value, delete=False):
    out = json.loads(json.dumps(header))
    d = out
    for key in path[:-1]:
        if not isinstance(d.get(key), dict):
            d[key] = {}
        d = d[key]
    if delete:
        del d[path[-1]]
    else:
        d[path[-1]] = value
    return out


def header_fields(blob, s, original, known):
    header = s.header
    for path in _fields(header, known):
        where = ".".join(path)
        for value in (*EXTREMES, raw_json("1e400")):
            shown = (
                value[len(_RAW) :] if isinstance(value, str) and value.startswith(_RAW) else value
            )
            mutated = with_header(blob, s, _set(header, path, value))
            yield "field", f"{where}={json.dumps(shown)}", mutated, original
        if _has(header, path):
            removed = with_header(blob, s, _set(header, path, 0, True))
            yield "field", f"{where} removed", removed, original
    dicts = [()]
    if isinstance(header.get("settings"), dict):
        dicts += [("settings",)] + [
            ("settings", k) for k in ("model", "train", "mix") if k in header["settings"]
        ]
    for path in dicts:
        where = ".".join(path) or "top"
        mutated = with_header(blob, s, _set(header, (*path, "zz_unknown"), 1))
        yield "unknown_key", where, mutated, original
    for raw, what in (
        (b"[]", "array"),
        (b'"str"', "string"),
        (b"1", "number"),
        (b"null", "null"),
        (b"", "empty"),
        (b"{", "unclosed"),
        (b"\xff\xfe{}", "bad utf-8"),
        (b'{"a":NaN}', "NaN"),
        (serialise(header)[:-1] + b',"block_size":1}', "duplicate key"),
    ):
        yield "header_json", what, with_header(blob, s, header, raw=raw), original
    sha = "ab" * 32
    yield (
        "field",
        "model_sha256 of an absent model",
        with_header(blob, s, {**header, "model_sha256": sha, "model_resume": False}),
        original,
    )
    # Version-3 fields: refused in older versions; at extremes with the version raised to 3.
    extras = {
        "name": ("", ".", "..", "a/b", "a\\b", "a\x00b", "x" * 5000, "\ud800", 7),
        "mtime": (*EXTREMES, 2**63 - 1),
        "size": (*EXTREMES, 2**63 - 1, len(original) + 1),
    }
    for key, values in extras.items():
        if s.version < 3 and key not in header:
            yield (
                "v3_field",
                f"{key} in v{s.version}",
                with_header(blob, s, {**header, key: 1}),
                original,
            )
        for value in values:
            mutated = with_header(blob, s, {**header, key: value}, version=max(s.version, 3))
            yield "v3_field", f"{key}={json.dumps(value)[:40]}", mutated, original
    if s.version < 3:
        yield "v3_field", "raised to v3", with_header(blob, s, header, version=3), original
    short = {k: v for k, v in header.items() if k not in ("settings", "block_size")}
    yield "v3_field", "short header before blocks", with_header(blob, s, short, version=3), original
    yield from model_sizes(blob, s, original)


def model_sizes(blob, s, original):
    """Well-formed headers that ask for a lot: the largest model and TBPTT the bounds allow,
    the largest mixing tables. Refused by the memory budget, or bounded in memory and time."""
    settings = s.header.get("settings")
    if not isinstance(settings, dict):
        return
    # The example of issue 15: 15.2 M parameters, under the 16 M bound.
    big = {"d_model": 2, "n_layer": 32, "d_inner": 16384, "d_conv": 16, "dt_rank": 1, "d_state": 1}
    for bptt in (1, 16, 1024):
        h = _set(s.header, ("settings", "model"), {**settings.get("model", {}), **big})
        h = _set(h, ("settings", "train", "bptt"), bptt)
        yield (
            "big_model",
            f"15M parameters bptt {bptt}",
            with_header(blob, s, h, version=max(s.version, 2 if bptt > 1 else 1)),
            original,
        )
    h = _set(
        s.header,
        ("settings", "model"),
        {**settings.get("model", {}), "d_model": 4096, "n_layer": 64, "d_inner": 16384},
    )
    yield "big_model", "gigantic model", with_header(blob, s, h), original
    tables = {"ctx_log": 25, "hist_log": 26, "match_log": 24, "apm_log": 20}
    for mix in ({}, {"mamba": True}, tables, {**tables, "mamba": True}):
        h = _set(s.header, ("settings", "mix"), {**(settings.get("mix") or {}), **mix})
        mutated = with_header(blob, s, h, version=max(s.version, 3))
        yield "big_model", f"mix {json.dumps(mix)}", mutated, original


def nesting(blob, s):
    deep = DEEP
    yield (
        "nesting",
        f"header {deep} deep",
        with_header(blob, s, None, raw=b"[" * deep + b"]" * deep),
        b"",
    )
    yield "nesting", f"header {deep} unclosed", with_header(blob, s, None, raw=b"[" * deep), b""
    yield (
        "nesting",
        f"header {deep} objects",
        with_header(blob, s, None, raw=b'{"a":' * deep + b"1" + b"}" * deep),
        b"",
    )
    for path in (("settings",), ("settings", "model", "d_model"), ("zz_unknown",)):
        if path[0] == "settings" and "settings" not in s.header:
            continue
        mutated = with_header(blob, s, _set(s.header, path, deep_value(deep)))
        yield "nesting", f"{'.'.join(path)} {deep} deep", mutated, b""
    mutated = with_header(blob, s, _set(s.header, ("zz_unknown",), deep_value(17)))
    yield "nesting", "zz_unknown 17 deep", mutated, b""


def block_fields(blob, streams, original):
    for si, s in enumerate(streams):
        for bi, b in enumerate(s.blocks):
            where = f"s{si}.{b.name}"
            for n in (*SIZES, b.n_bytes - 1, b.n_bytes + 1):
                yield "n_bytes", f"{where}={n}", put_u32(blob, b.at, n % 2**32), original
            for n in (*SIZES, b.n_words - 1, b.n_words + 1):
                yield "n_words", f"{where}={n}", put_u32(blob, b.at + 4, n % 2**32), original
            p0, p1 = b.payload
            for k in (0, 1, 2):  # n_words that the data present agrees with, but few
                if b.stored or k >= b.n_words:
                    continue
                few = blob[: b.at + 4] + _U32.pack(k) + blob[p0 : p0 + 4 * k] + blob[p1:]
                yield "few_words", f"{where} {k} words", few, original
                for n in (2**16, 2**24):
                    yield (
                        "few_words",
                        f"{where} {k} words {n} bytes",
                        put_u32(few, b.at, n),
                        original,
                    )
            yield "blocks", f"{where} repeated", blob[:p1] + blob[b.at : p1] + blob[p1:], original
            yield "blocks", f"{where} dropped", blob[: b.at] + blob[p1:], original
            chunk = original[sum(x.n_bytes for x in s.blocks[:bi]) :][: b.n_bytes]
            if si == 0 and len(streams) == 1 and len(chunk) == b.n_bytes:
                stored = _U32.pack(b.n_bytes) + _U32.pack(STORED) + chunk
                yield "stored", f"{where} as stored", _as_v3(blob, s, b, stored), original
                bad = _U32.pack(b.n_bytes) + _U32.pack(STORED) + bytes([chunk[0] ^ 1]) + chunk[1:]
                yield (
                    "stored",
                    f"{where} as stored, a byte changed",
                    _as_v3(blob, s, b, bad),
                    original,
                )
                longer = _U32.pack(b.n_bytes + 100) + _U32.pack(STORED) + chunk
                yield (
                    "stored",
                    f"{where} stored, n_bytes beyond the data",
                    _as_v3(blob, s, b, longer),
                    original,
                )
                yield (
                    "stored",
                    f"{where} n_words=STORED, v3",
                    _as_v3(blob, s, b, put_u32(blob[b.at : p1], 4, STORED)),
                    original,
                )
        for suffix, e, length, crc in s.trailers:
            where = f"s{si}{suffix}"
            for n in (0, 1, length + 1, 2**64 - 1):
                mutated = blob[: e + 4] + struct.pack("<Q", n) + blob[e + 12 :]
                yield "trailer", f"{where} length={n}", mutated, original
            yield "trailer", f"{where} crc+1", put_u32(blob, e + 12, (crc + 1) % 2**32), original
            yield "trailer", f"{where} end marker=1", put_u32(blob, e, 1), original
            yield "trailer", f"{where} end marker removed", blob[:e] + blob[e + 4 :], original


def _as_v3(blob, s, b, replacement):
    """``blob`` with block ``b`` replaced, as a version-3 file."""
    mutated = blob[: b.at] + replacement + blob[b.payload[1] :]
    return mutated[:8] + struct.pack("<H", max(3, s.version)) + mutated[10:]


def declared_sizes(blob, s, original):
    """Declared byte counts that the data present cannot produce."""
    settings = s.header.get("settings")
    if not isinstance(settings, dict):
        return
    body = blob[: s.header_span[1] + 4]
    framed = s.frames is not None
    if framed:  # one frame of any length, so that the blocks reach the decoder
        body = with_header(body, s, {**s.header, "frame_size": 0})
    block_size = v4_size(s.header, "block_size")
    for n_words in (0, 1, 2):
        junk = bytes(range(4 * n_words))
        blocks = (_U32.pack(block_size) + _U32.pack(n_words) + junk) * 200
        mutated = body + _one_frame(blocks + end_stream(200 * block_size, 0), framed)
        yield "declared", f"200 blocks of {block_size} with {n_words} words", mutated, original
    h = {**s.header, "block_size": 1 << 24, **({"frame_size": 0} if framed else {})}
    big = with_header(blob[: s.header_span[1] + 4], s, h)
    for n_words in (0, 1, 3):
        block = _U32.pack(1 << 24) + _U32.pack(n_words) + bytes(range(4 * n_words))
        mutated = big + _one_frame(block + end_stream(1 << 24, 0), framed)
        yield (
            "declared",
            f"block_size 2^24, one block of 2^24 with {n_words} words",
            mutated,
            original,
        )
    b = s.blocks[0] if s.blocks else None
    if b is not None and not b.stored:
        words = blob[b.payload[0] : b.payload[1]]
        block = _U32.pack(1 << 24) + _U32.pack(b.n_words) + words
        rest = blob[b.payload[1] : s.frames[0].stop] if framed else blob[b.payload[1] :]
        mutated = big + _one_frame(block + rest, framed)
        yield "declared", "block_size 2^24, first block declares 2^24 bytes", mutated, original
    yield (
        "declared",
        "blocks missing before the end",
        body + end_stream(len(original), s.crc),
        original,
    )
    if framed:
        # No frame at all: the index right after the header (a writer never makes one:
        # an empty input is a version-3 stream). Listing nothing, it holds nothing.
        yield "declared", "no frames, an empty index", body + index_bytes([], 0, 0), b""
        mutated = body + index_bytes([], len(original), s.crc)
        yield "declared", "no frames, the index claims the original", mutated, original


def _one_frame(frame, framed, length=None, crc=0):
    """``frame`` (blocks and end), followed in a framed stream by an index listing it (with
    the length its end declares)."""
    if not framed:
        return frame
    declared = _TRAILER.unpack_from(frame, len(frame) - _TRAILER.size)[0]
    length = declared if length is None else length
    return frame + index_bytes([(len(frame), length, crc)], length, crc)


def bit_flips(blob, streams, original, rng):
    for si, s in enumerate(streams):
        for b in s.blocks:
            bi = b.name  # "block3"; in version 4 "frame1.block0"
            p0, p1 = b.payload
            bits = sorted(rng.sample(range(8 * p0, 8 * p1), min(24, 8 * (p1 - p0))))
            for bit in bits:
                yield "flip", f"s{si}.{bi} bit {bit}", _flip(blob, bit), original
            for _ in range(4):
                many = blob
                picks = rng.sample(range(8 * p0, 8 * p1), min(8, 8 * (p1 - p0)))
                for bit in picks:
                    many = _flip(many, bit)
                yield (
                    "flip",
                    f"s{si}.{bi} bits {','.join(map(str, sorted(picks)))}",
                    many,
                    original,
                )
            for i in range(0, 32, 8):
                yield (
                    "flip",
                    f"s{si}.{bi} n_bytes bit {i}",
                    _flip(blob, 8 * b.at + i),
                    original,
                )
        for suffix, e, _, _ in s.trailers:
            for bit in rng.sample(range(8 * (e + 4), 8 * (e + 4 + _TRAILER.size)), 6):
                yield "flip", f"s{si}{suffix} trailer bit {bit}", _flip(blob, bit), original
    for _ in range(8):
        at = rng.randrange(len(blob))
        junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        mutated = blob[:at] + junk + blob[at + len(junk) :]
        yield "overwrite", f"{junk.hex()} at {at}", mutated, original


def concatenations(blob, original, rng):
    s = parse(blob)[-1]
    yield "concat", "twice", blob + blob, original + original
    yield "concat", "empty v3 stream after", blob + empty_stream(), original
    yield "concat", "empty v3 stream before", empty_stream() + blob, original
    for name, start, end in s.regions:
        for cut in {start + 1, (start + end) // 2}:
            if cut < len(blob):
                yield "concat", f"second cut at {cut} ({name})", blob + blob[:cut], original * 2
    second = parse(blob)[0]
    h1 = second.header_span[1]
    damaged = {
        "header crc flipped": _flip(blob, 8 * h1),
        "magic flipped": _flip(blob, 8 * 7),
        "version 65535": blob[:8] + b"\xff\xff" + blob[10:],
        "trailer crc+1": put_u32(blob, s.trailers[-1][1] + 12, (s.trailers[-1][3] + 1) % 2**32),
    }
    for b in second.blocks[:1]:
        bit = rng.randrange(8 * b.payload[0], 8 * b.payload[1])
        damaged[f"payload bit {bit} flipped"] = _flip(blob, bit)
        damaged["n_bytes 2^16"] = put_u32(blob, b.at, 1 << 16)
    for what, mutated in damaged.items():
        yield "concat", f"second with {what}", blob + mutated, original * 2
    for junk in (b"\x00", b"\x89", MAGIC[:5], MAGIC, bytes(range(8)), b"\x00" * 4096):
        yield "concat", f"then {len(junk)} bytes {junk[:8].hex()}", blob + junk, original


def frame_size_field(blob, streams, original):
    """The header's frame_size (versions 4 and 5) at extremes and next to the frames' sizes; in
    the header of an older version; and a version-3 stream turned into a valid version-4
    one (its blocks as one frame of any length, an index after them)."""
    s = streams[0]
    if "settings" not in s.header:  # the short header of an empty stream
        return
    if s.version < 4:
        for v in sorted({s.version, 3}):
            h = {**s.header, "frame_size": 500}
            mutated = with_header(blob, s, h, version=v)
            yield "frame_size", f"frame_size=500 in a v{v} header", mutated, original
        if s.version == 3 and len(streams) == 1 and s.blocks:
            frame = blob[s.header_span[1] + 4 : s.stop]
            index = index_bytes([(len(frame), s.length, s.crc)], s.length, s.crc)
            for fs, ok in ((0, True), (len(original), True), (len(original) - 1, False)):
                body = with_header(blob[: s.stop], s, {**s.header, "frame_size": fs}, 4)
                yield (
                    "frame_size",
                    f"as v4 with frame_size={fs}",
                    body + index,
                    original if ok else None,
                    original if ok else None,
                )
        return
    fs = v4_size(s.header, "frame_size")
    sizes = [f.length for f in s.frames]
    values = [0, 1, 2**40, 2**40 + 1, -1, -(2**63), 2**64, 1.5, 500.0, "500", True, None]
    values += [fs - 1, fs + 1, 2 * fs, max(sizes), max(sizes) - 1,
               v4_size(s.header, "block_size")]  # fmt: skip
    for value in values:
        mutated = with_header(blob, s, {**s.header, "frame_size": value})
        # Frames are cut every frame_size bytes: decompress refuses frames another
        # frame_size would not have cut. A range reads only the frames it needs: it may
        # decode (the original's bytes) where the frames it reads agree with frame_size.
        expected = original if _cut_by(value, sizes) else None
        yield "frame_size", f"frame_size={json.dumps(value)}", mutated, expected, original
    yield "frame_size", "in a v3 header", with_header(blob, s, s.header, version=3), original
    h = {k: v for k, v in s.header.items() if k != "frame_size"}
    yield "frame_size", "removed, v3 header", with_header(blob, s, h, version=3), original


def _cut_by(frame_size, sizes):
    """Whether a writer with this frame_size cuts frames of these sizes: every frame but the
    last full, none larger (0: one frame of any length)."""
    if not (isinstance(frame_size, int) and not isinstance(frame_size, bool)):
        return False
    if not 0 <= frame_size <= MAX_FRAME:
        return False
    if frame_size == 0:
        return len(sizes) == 1
    return all(n == frame_size for n in sizes[:-1]) and 0 < sizes[-1] <= frame_size


def _v4_parts(blob, s):
    """(bytes before the first frame, each frame's bytes)."""
    head = blob[: s.frames[0].at]
    raw = [blob[f.at : f.stop] for f in s.frames]
    return head, raw


def _frame_originals(s, original):
    out, at = [], 0
    for f in s.frames:
        out.append(original[at : at + f.length])
        at += f.length
    return out


def index_fields(blob, s, original, rng):
    """The seek index's fields changed behind a valid index CRC (recomputed, so the change
    reaches the checks behind it), its tail and mark, and bit flips in it."""
    ix = s.index
    head, tail_start = blob[: ix.mark_at], ix.stop
    after = blob[tail_start:]
    entries, n = list(ix.entries), len(ix.entries)

    def put(what, mutated_index, ranged=original):
        return "index", what, head + mutated_index + after, original, ranged

    for k in sorted({n - 1, n + 1, 0, 2 * n, 2**31, 2**32 - 1} - {n}):
        if k >= 0:
            yield put(f"n_frames={k}", index_bytes(entries, ix.length, ix.crc, n=k))
    yield put("an entry added", index_bytes([*entries, entries[-1]], ix.length, ix.crc))
    yield put(
        "an entry of 1 byte added, total fixed",
        index_bytes([*entries, (entries[-1][0], 1, 0)], ix.length + 1, ix.crc),
    )
    if n > 1:
        short = entries[:-1]
        yield put("last entry dropped", index_bytes(short, ix.length, ix.crc))
        left = ix.length - entries[-1][1]
        yield put("last entry dropped, total fixed", index_bytes(short, left, ix.crc))
        swapped = [entries[1], entries[0], *entries[2:]]
        yield put("entries 0 and 1 swapped", index_bytes(swapped, ix.length, ix.crc))
        moved = [
            (entries[0][0], entries[0][1] - 1, entries[0][2]),
            (entries[1][0], entries[1][1] + 1, entries[1][2]),
            *entries[2:],
        ]
        yield put("a byte moved from entry 0 to 1", index_bytes(moved, ix.length, ix.crc))
        packed = [
            (entries[0][0] - 1, *entries[0][1:]),
            (entries[1][0] + 1, *entries[1][1:]),
            *entries[2:],
        ]
        yield put("a packed byte moved from entry 0 to 1", index_bytes(packed, ix.length, ix.crc))
    for i in sorted({0, 1, n - 1} & set(range(n))):
        packed, size, crc = entries[i]
        changes = {
            "packed_size": (0, 1, packed - 1, packed + 1, 2**32, 2**63, 2**64 - 1),
            "size": (0, 1, size - 1, size + 1, 2**32, 2**63, 2**64 - 1),
            "crc": ((crc + 1) % 2**32, 0, 2**32 - 1),
        }
        for field_no, (name, values) in enumerate(changes.items()):
            for value in values:
                if value == entries[i][field_no]:
                    continue
                e = list(entries)
                e[i] = tuple(value if j == field_no else x for j, x in enumerate(e[i]))
                yield put(f"entry{i}.{name}={value}", index_bytes(e, ix.length, ix.crc))
                if name == "size":  # the total made to agree
                    total = ix.length - size + value
                    if total < 2**64:
                        yield put(
                            f"entry{i}.size={value}, total fixed",
                            index_bytes(e, total, ix.crc),
                        )
    for value in (0, 1, ix.length - 1, ix.length + 1, 2**63, 2**64 - 1):
        if 0 <= value != ix.length:
            yield put(f"length={value}", index_bytes(entries, value, ix.crc))
    for value in ((ix.crc + 1) % 2**32, 0):
        if value != ix.crc:
            # A range cannot check the CRC of the whole original: it may decode.
            yield put(f"crc={value}", index_bytes(entries, ix.length, value))
    fixed = INDEX_FIXED + _ENTRY.size * n
    for value in (0, 1, INDEX_FIXED, fixed - 1, fixed + 1, fixed + _ENTRY.size, len(blob),
                  len(blob) + 1, 2**63, 2**64 - 1):  # fmt: skip
        if value != fixed:
            yield put(
                f"index_len={value}", index_bytes(entries, ix.length, ix.crc, index_len=value)
            )
    yield put(
        "index_crc+1", index_bytes(entries, ix.length, ix.crc, index_crc=(ix.index_crc + 1) % 2**32)
    )
    for magic, what in (
        (bytes(8), "zeroed"),
        (MAGIC, "the stream's magic"),
        (INDEX_MAGIC[:-1] + b"\x00", "last byte changed"),
        (b"\x00" + INDEX_MAGIC[1:], "first byte changed"),
    ):
        yield put(f"magic {what}", index_bytes(entries, ix.length, ix.crc, magic=magic))
    good = blob[ix.mark_at : ix.stop]
    yield put("mark=1", _U32.pack(1) + good[4:])
    yield put("removed", b"")
    yield put("twice", good + good)
    yield put("mark only", _U32.pack(0))
    yield put("without its mark", good[4:])
    yield put("without its magic", good[:-8])
    yield put("8 zero bytes before the magic", good[:-8] + bytes(8) + good[-8:])
    yield put("the tail only", good[-_INDEX_TAIL.size :])
    # Bit flips anywhere in the index (the CRC then fails, or the tail is wrong).
    bits = range(8 * ix.mark_at, 8 * ix.stop)
    for bit in sorted(rng.sample(bits, min(32, len(bits)))):
        region = next(r[0] for r in ix.regions if r[1] <= bit // 8 < r[2])
        yield "flip", f"index bit {bit} ({region})", _flip(blob, bit), original
    for _ in range(4):
        many = blob
        picks = sorted(rng.sample(bits, 8))
        for bit in picks:
            many = _flip(many, bit)
        yield "flip", f"index bits {','.join(map(str, picks))}", many, original


def frame_moves(blob, s, original):
    """Frames swapped, dropped, repeated, with the index kept, with its entries made to
    agree (the CRC of the whole kept), or with all of it made to agree (then the file is
    valid if every frame but the last is still full: it decodes to the frames' bytes)."""
    head, raw = _v4_parts(blob, s)
    orig = _frame_originals(s, original)
    n = len(raw)
    fs = v4_size(s.header, "frame_size")
    ix = s.index
    old_index = blob[ix.mark_at : ix.stop]
    after = blob[ix.stop :]
    orders = {}
    pairs = {(0, 1), (n - 2, n - 1), (0, n - 1)} if n > 1 else set()
    for i, j in sorted(p for p in pairs if p[0] < p[1]):
        order = list(range(n))
        order[i], order[j] = j, i
        orders[f"frames {i} and {j} swapped"] = order
    for i in range(n):
        if n > 1:
            orders[f"frame {i} dropped"] = [k for k in range(n) if k != i]
        orders[f"frame {i} repeated"] = sorted([*range(n), i])
    if n > 1:
        orders["last frame moved first"] = [n - 1, *range(n - 1)]
    for what, order in orders.items():
        frames = b"".join(raw[k] for k in order)
        data = b"".join(orig[k] for k in order)
        entries = [ix.entries[k] for k in order]
        sizes = [len(orig[k]) for k in order]
        # Cut as a writer cuts: every frame but the last full (frame_size 0: one frame).
        valid = _cut_by(fs, sizes)
        yield "frames", f"{what}, index kept", head + frames + old_index + after, original
        agreed = index_bytes(entries, len(data), ix.crc)
        # A range checks each frame against its entry, not the CRC of the whole.
        yield (
            "frames",
            f"{what}, entries agree",
            head + frames + agreed + after,
            original,
            data,
        )
        fixed = index_bytes(entries, len(data), zlib.crc32(data))
        yield (
            "frames",
            f"{what}, index agrees",
            head + frames + fixed + after,
            data if valid else None,
            data,
        )


# ------------------------------------------------------------------------- running

COMMANDS = {
    "decompress": ["decompress", "-o", "out", "in.mz"],
    "info": ["info", "in.mz"],
    # A slice of the original (the case's span, START:END): through the seek index of a
    # single version-4 stream, decoding only the frames that hold it; any other file is
    # decoded from its start.
    "range": ["decompress", "--range", "{span}", "-o", "out", "in.mz"],
}
WRITES = ("decompress", "range")  # the commands that write "out" when they succeed


# ``--decode-jobs N``: decompress and range get ``-T N``. By default they run as a user's do
# (one worker process per core for a file of several frames, about 3 s to start them), which
# makes the whole set take most of a day; ``-T 1`` decodes the same frames in the process.
DECODE_JOBS = []


def argv_of(case, command):
    """The command line of ``command`` on ``case``."""
    span = f"{case.span[0]}:{case.span[1]}"
    argv = [span if a == "{span}" else a for a in COMMANDS[command]]
    return argv[:1] + DECODE_JOBS + argv[1:] if command in WRITES else argv


@dataclass
class Run:
    case: Case
    command: str
    code: int = None  # exit code; None: the run did not end (crash or timeout)
    stdout: bytes = b""
    stderr: str = ""
    seconds: float = 0.0
    rss: int = 0  # peak resident bytes of the run
    files: list = field(default_factory=list)  # files in the case's directory afterwards
    tmp_files: list = field(default_factory=list)  # files left in TMPDIR
    output: bytes = None  # the output file's bytes, if any
    input_intact: bool = True
    address_space: int = None  # RLIMIT_AS of the process that ran it
    note: str = ""  # why the run did not end

    @property
    def wanted(self):
        """What the command must have written if it exits 0; None: it must fail (the file
        is refused, or the range is past the end of what the file holds)."""
        if self.command == "range":
            start, end = self.case.span
            ranged = self.case.ranged
            return ranged[start:end] if ranged is not None and end <= len(ranged) else None
        return self.case.expected

    def failures(self):
        """Every rule this run breaks (empty: it behaved)."""
        out = []
        if self.code is None:
            return [f"did not finish: {self.note}"]
        if "Traceback" in self.stderr or "MemoryError" in self.stderr:
            out.append("traceback")
        if self.code == 0:
            if self.command in WRITES and self.output != self.wanted:
                if self.wanted is None:
                    out.append("wrong output (exit 0 where it must fail)")
                else:
                    out.append("wrong output" if self.output is not None else "no output")
            if self.command == "info" and not self.stdout.startswith(b"in.mz:\n"):
                out.append("info printed no header")
        else:
            line = self.stderr.removesuffix("\n")
            if self.code != 1:
                out.append(f"exit code {self.code}")
            if not line.startswith("mambazip: ") or "\n" in line:
                out.append(f"not one line on stderr ({self.stderr.count(chr(10))} lines)")
        expected = {"in.mz", "out"} if self.code == 0 and self.command in WRITES else {"in.mz"}
        if set(self.files) != expected or self.tmp_files:
            out.append("leftover " + ", ".join(sorted(set(self.files) - expected) + self.tmp_files))
        if not self.input_intact:
            out.append("input modified")
        if self.rss > MAX_RSS:
            out.append(f"RSS {self.rss / 1e6:.0f} MB")
        if self.seconds > MAX_SECONDS:
            out.append(f"{self.seconds:.1f} s")
        return out

    @property
    def label(self):
        if self.command == "range":
            return f"range {self.case.span[0]}:{self.case.span[1]}"
        return self.command

    def summary(self):
        last = self.stderr.strip().splitlines()[-1:] or [""]
        return (
            f"{self.case.id} [{self.label}] exit {self.code}, {self.seconds:.2f} s, "
            f"{self.rss / 1e6:.0f} MB: {'; '.join(self.failures())}; stderr: {last[0][:200]}"
        )


def golden_paths():
    return [str(p) for p in sorted(GOLDEN.glob("v*/*.mz"))]


_cache_filled = []


def fill_cache():
    """Decode every golden file once per process, without limits, so that the workers load
    compiled kernels instead of compiling them under RLIMIT_AS."""
    if _cache_filled:
        return
    subprocess.run(
        [sys.executable, "-m", "mambazip", "decompress", "-t", "-q", "-T", "1", *golden_paths()],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        cwd=tempfile.gettempdir(),
        check=True,
        timeout=WARM_TIMEOUT,
    )
    _cache_filled.append(True)


def _limit():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


class Worker:
    """A ``python fuzz_mz.py --worker`` process under RLIMIT_AS: one case per request."""

    def __init__(self, tmpdir):
        self.tmpdir = tmpdir
        env = {**os.environ, "TMPDIR": str(tmpdir)}
        self.log = open(Path(tmpdir).parent / f"worker-{id(self)}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            preexec_fn=_limit,
            env=env,
            cwd=tmpdir,
        )
        self.max_rss = 0
        self.alive = True
        self.alive = self.request({"warm": golden_paths()}, TIMEOUT * 10) is not None

    def request(self, message, timeout):
        """Send one request; the reply (a dict), or None if the worker died or timed out
        (it is then killed)."""
        if not self.alive:
            return None
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            self.close()
            return None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if sel.select(timeout):
                line = self.proc.stdout.readline()
                if line:
                    return json.loads(line)
        self.close(kill=True)
        return None

    def close(self, kill=False):
        if self.proc.poll() is None:
            if kill:
                self.proc.kill()
            else:
                self.proc.stdin.close()
        try:
            _, status, usage = os.wait4(self.proc.pid, 0)
            self.status = status
            self.max_rss = max(self.max_rss, usage.ru_maxrss * 1024)
        except ChildProcessError:
            self.status = self.proc.returncode
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.log.close()
        self.alive = False


def run_cases(
    cases,
    commands=tuple(COMMANDS),
    jobs=2,
    timeout=TIMEOUT,
    use_subprocess=False,
    keep=None,
    progress=None,
):
    """Run every command on every case; returns ([Run], worker peak RSS in bytes)."""
    todo = [(c, cmd) for c in cases for cmd in commands]
    fill_cache()
    runs = [None] * len(todo)
    peak = [0]
    with tempfile.TemporaryDirectory(prefix="fuzz_mz.") as base:

        def lane(lane_no):
            work = Path(base) / f"lane{lane_no}"
            tmpdir = work / "tmp"
            tmpdir.mkdir(parents=True)
            worker = None
            for i in range(lane_no, len(todo), jobs):
                case, command = todo[i]
                if not use_subprocess and (worker is None or not worker.alive):
                    worker = Worker(tmpdir)
                runs[i] = _run_one(case, command, work, tmpdir, worker, timeout, keep)
                if worker is not None and (
                    runs[i].code is None or "traceback" in runs[i].failures()
                ):
                    worker.close()  # a fresh process after anything unexpected
                    peak[0] = max(peak[0], worker.max_rss)
                if progress:
                    progress(runs[i])
            if worker is not None and worker.alive:
                worker.close()
                peak[0] = max(peak[0], worker.max_rss)

        with ThreadPoolExecutor(jobs) as pool:
            for lane_done in [pool.submit(lane, n) for n in range(jobs)]:
                lane_done.result()  # a lane's own error is the harness's, not a run's
    return runs, peak[0]


def _run_one(case, command, work, tmpdir, worker, timeout, keep):
    cdir = work / "case"
    shutil.rmtree(cdir, ignore_errors=True)
    cdir.mkdir()
    (cdir / "in.mz").write_bytes(case.blob)
    run = Run(case, command)
    argv = argv_of(case, command)
    start = time.perf_counter()
    if worker is None:
        reply = _subprocess_run(argv, cdir, tmpdir, timeout)
    else:
        reply = worker.request({"argv": argv, "cwd": str(cdir)}, timeout)
    run.seconds = time.perf_counter() - start
    if reply is None:
        run.note = (
            f"killed after {timeout:.0f} s"
            if run.seconds >= timeout
            else f"worker died (status {getattr(worker, 'status', '?')})"
        )
    else:
        run.code, run.rss, run.address_space = reply["code"], reply["rss"], reply["as"]
        run.stdout = (cdir / ".stdout").read_bytes()
        run.stderr = (cdir / ".stderr").read_text("utf-8", "replace")
    run.files = sorted(p.name for p in cdir.iterdir() if p.name not in (".stdout", ".stderr"))
    run.tmp_files = sorted(p.name for p in tmpdir.iterdir())
    if (cdir / "out").is_file():
        run.output = (cdir / "out").read_bytes()
    run.input_intact = (cdir / "in.mz").is_file() and (cdir / "in.mz").read_bytes() == case.blob
    if keep is not None and run.failures():
        dest = Path(keep) / _safe(f"{case.id}.{command}")
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(cdir, dest)
    for p in tmpdir.iterdir():
        (shutil.rmtree if p.is_dir() else os.unlink)(p)
    shutil.rmtree(cdir, ignore_errors=True)
    return run


def ascii_id(case_id):
    """``case_id`` in printable ASCII (a test id; non-ASCII and controls escaped)."""
    return case_id.encode("ascii", "backslashreplace").decode().replace("\x00", "\\x00")


def _safe(name):
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:150]


def _subprocess_run(argv, cdir, tmpdir, timeout):
    """The case as its own ``python -m mambazip`` process under RLIMIT_AS; its peak RSS
    from ``os.wait4``."""
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    with open(cdir / ".stdout", "wb") as out, open(cdir / ".stderr", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mambazip", *argv],
            cwd=cdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            preexec_fn=_limit,
        )
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            os.wait4(proc.pid, 0)
            return None
        time.sleep(0.01)
    proc.returncode = 0  # reaped here; keep Popen from waiting for it again
    if not os.WIFEXITED(status):
        return None
    return {"code": os.WEXITSTATUS(status), "rss": usage.ru_maxrss * 1024, "as": None}


# ------------------------------------------------------------------------- worker


def _peak_rss_reset():
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _peak_rss():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def worker_main():
    """Serve requests from stdin: run ``mambazip ARGV`` in ``cwd`` with fds 0, 1, 2 on the
    case's files; reply {"code", "rss"} on the original stdout. Exits after a run whose
    exception escaped the entry point (the parent then starts a fresh worker). A "warm"
    request decompresses (-t) the golden files it names, so that loading or compiling the
    kernels is not counted in the first case's time."""
    requests = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_RDWR)
    log = os.dup(2)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    from mambazip import cli, entry  # noqa: F401  (the heavy imports, once)

    def invoke(argv, out_fd, err_fd):
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        gc.collect()  # what earlier cases left in reference cycles is not this one's memory
        _peak_rss_reset()
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        escaped = False
        try:
            entry.run(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # what the interpreter prints for an escaped exception
            sys.stderr.write(traceback.format_exc())
            code, escaped = 1, True
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            rss = _peak_rss()
            # Frames decoded in worker processes (--jobs): the largest child reaped during
            # this run, when it is larger than any before (ru_maxrss is a maximum over all).
            after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            if after > children:
                rss = max(rss, after * 1024)
            os.dup2(devnull, 1)
            os.dup2(log, 2)
        return code, escaped, rss

    for line in requests:
        message = json.loads(line)
        if "warm" in message:
            code, _, _ = invoke(["decompress", "-t", "-q", *message["warm"]], devnull, log)
            replies.write(json.dumps({"code": code}) + "\n")
            replies.flush()
            continue
        os.chdir(message["cwd"])
        with open(".stdout", "wb") as out, open(".stderr", "wb") as err:
            code, escaped, rss = invoke(message["argv"], out.fileno(), err.fileno())
        os.chdir("/")
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        replies.write(json.dumps({"code": code, "rss": rss, "as": limit}) + "\n")
        replies.flush()
        if escaped:
            break


# ------------------------------------------------------------------------- report


def sample(all_cases, per_category, seed=15, fraction=0.0):
    """A fixed subset: of each (format version, category), ``per_category`` cases or the
    ``fraction`` of them if that is more, picked by a seeded generator, in their order."""
    groups = {}
    for c in all_cases:
        groups.setdefault((c.id.split("/")[0], c.category), []).append(c)
    rng = random.Random(seed)
    picked = set()
    for key in sorted(groups):
        group = groups[key]
        n = min(len(group), max(per_category, math.ceil(fraction * len(group))))
        picked |= {c.id for c in rng.sample(group, n)}
    return [c for c in all_cases if c.id in picked]


def info_refusals(runs):
    """Runs of info that failed on a file that decompress decoded (info reads the same
    framing, so it must list every file that decompresses)."""
    by = {(r.case.id, r.command): r for r in runs}
    return [
        r
        for (i, cmd), r in by.items()
        if cmd == "info"
        and r.code not in (0, None)
        and by.get((i, "decompress"))
        and by[i, "decompress"].code == 0
    ]


def table(runs, worker_rss):
    done = [r for r in runs if r.code is not None]
    rows = {
        "cases (files)": len({r.case.id for r in runs}),
        "runs": len(runs),
        "tracebacks": sum("traceback" in r.failures() for r in runs),
        "wrong outputs": sum("wrong output" in r.failures() for r in runs),
        "leftovers": sum(any(f.startswith("leftover") for f in r.failures()) for r in runs),
        "info refuses what decodes": len(info_refusals(runs)),
        "not one line": sum(any(f.startswith("not one line") for f in r.failures()) for r in runs),
        "unfinished (crash/timeout)": len(runs) - len(done),
        "runs above 1 GB RSS": sum(r.rss > MAX_RSS for r in runs),
        "runs above 30 s": sum(r.seconds > MAX_SECONDS for r in runs),
        "max RSS (MB)": f"{max((r.rss for r in runs), default=0) / 1e6:.0f}",
        "max RSS of a worker (MB)": f"{worker_rss / 1e6:.0f}",
        "max seconds": f"{max((r.seconds for r in runs), default=0):.2f}",
        "exit 0 (decoded or listed)": sum(r.code == 0 for r in runs),
        "failing runs": sum(bool(r.failures()) for r in runs),
    }
    width = max(map(len, rows))
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows.items())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--golden", default=str(GOLDEN), help="folder holding v*/NAME.mz")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=TIMEOUT)
    parser.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="only N cases per (version, category), as the test picks them",
    )
    parser.add_argument(
        "--fraction", type=float, default=0.0, help="with --sample: at least this share"
    )
    parser.add_argument("--only", action="append", metavar="ID", help="run only these case ids")
    parser.add_argument("--grep", metavar="TEXT", help="run only the cases whose id contains TEXT")
    parser.add_argument(
        "--folder",
        action="append",
        metavar="VN",
        help="run only the cases of these golden folders (v4: the format version 4 files)",
    )
    parser.add_argument(
        "--category", action="append", metavar="KIND", help="run only these kinds of mutation"
    )
    parser.add_argument("--command", action="append", choices=sorted(COMMANDS))
    parser.add_argument(
        "--subprocess",
        action="store_true",
        help="each run in its own python -m mambazip process (slow)",
    )
    parser.add_argument(
        "--decode-jobs",
        type=int,
        metavar="N",
        help="give decompress and range -T N (default: none, as a user runs them)",
    )
    parser.add_argument("--keep", metavar="DIR", help="copy the files of failing runs here")
    parser.add_argument("--list", action="store_true", help="print the case ids and exit")
    parser.add_argument("--json", metavar="FILE", help="write every run's outcome here")
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per run")
    args = parser.parse_args(argv)
    if args.worker:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        worker_main()
        return 0
    if args.decode_jobs is not None:
        DECODE_JOBS[:] = ["-T", str(args.decode_jobs)]
    todo = cases(args.golden)
    if args.sample:
        todo = sample(todo, args.sample, fraction=args.fraction)
    if args.only:
        todo = [c for c in todo if c.id in set(args.only)]
    if args.grep:
        todo = [c for c in todo if args.grep in c.id]
    if args.folder:
        todo = [c for c in todo if c.id.split("/")[0] in set(args.folder)]
    if args.category:
        todo = [c for c in todo if c.category in set(args.category)]
    if args.list:
        print("\n".join(c.id for c in todo))
        return 0
    commands = tuple(args.command or COMMANDS)
    n = len(todo) * len(commands)
    count = [0]
    start = time.perf_counter()

    def progress(run):
        count[0] += 1
        if args.verbose or run.failures():
            print(("FAIL " if run.failures() else "ok   ") + run.summary(), flush=True)
        elif count[0] % 200 == 0:
            print(f"... {count[0]}/{n} runs, {time.perf_counter() - start:.0f} s", flush=True)

    runs, worker_rss = run_cases(
        todo, commands, args.jobs, args.timeout, args.subprocess, args.keep, progress
    )
    if args.json:
        records = [
            {
                "id": r.case.id,
                "command": r.label,
                "code": r.code,
                "seconds": r.seconds,
                "rss": r.rss,
                "stderr": r.stderr,
                "failures": r.failures(),
            }
            for r in runs
        ]
        Path(args.json).write_text(json.dumps(records, indent=1))
    print()
    print(
        f"golden folders: {', '.join(sorted({c.id.split('/')[0] for c in todo}))}; "
        f"{time.perf_counter() - start:.0f} s with {args.jobs} jobs"
        + (f", decode {' '.join(DECODE_JOBS)}" if DECODE_JOBS else "")
    )
    print(table(runs, worker_rss))
    failing = [r for r in runs if r.failures()]
    refused = info_refusals(runs)
    for r in refused:
        print("  info refuses a file that decompresses: " + r.summary())
    if failing:
        print("\nfailures:")
        for r in failing:
            print("  " + r.summary())
    return 1 if failing or refused else 0


if __name__ == "__main__":
    sys.exit(main())
