"""The .mz file format, written and read as a stream.

    magic        8 bytes   b"\x89MZIP\r\n\x1a"
    version      u16 LE
    header_len   u32 LE    at most MAX_HEADER
    header       JSON      {"settings": {...}, "block_size": n, "model_sha256": null | hex,
                            "model_resume": bool (only with a model; from version 4
                            only when true),
                            from version 3: "name": str, "mtime": int, "size": int (each
                            optional); "settings" holds only what differs from V3_BASE;
                            "settings" and "block_size" may be left out of an empty stream;
                            version 4: "frame_size": int; block and frame sizes equal to
                            V4_SIZES are left out}
    header_crc   u32 LE    CRC32 of the header bytes
    blocks       each: u32 n_bytes (1..block_size), u32 n_words, n_words u32 LE range-coder
                 words; version 3: n_words = STORED means n_bytes raw bytes follow instead
    end          u32 0, then u64 original length, u32 CRC32 of the original bytes

Version 4 cuts the input into frames ("frame_size" in the header: the most original bytes
a frame holds, 0 for one frame of any length). Each frame is coded by a fresh predictor and
is what a version-3 stream holds after its header (blocks, then its own end), so frames code
and decode independently. After the last frame comes the seek index:

    u32 0                 the index's mark (a frame is never empty, so no block starts so)
    u32 n_frames
    per frame             u64 compressed size (its blocks and end), u64 original size,
                          u32 CRC32 of its original bytes
    u64 original length, u32 CRC32 of the whole original
    u32 CRC32 of the index from n_frames up to here
    u64 index length      from the mark to the end of INDEX_MAGIC: 40 + 20 n_frames
    INDEX_MAGIC           8 bytes, the last of the stream: a reader seeks to them

Version 5 keeps version 4's layout; only a coded block's words mean something else: the
context-mixing predictor codes each byte as two 16-symbol nibbles (its high nibble, then its
low nibble under a table that depends on the high one), evaluating only the byte's path in
the byte tree, where versions 3 and 4 code one 256-symbol table of all 255 nodes. It is
written whenever the settings mix (an unframed stream of them is one frame of any length);
the Mamba alone keeps writing versions 1 to 4. With ``mix.bits`` in the settings (version 5
and later) a byte is instead 8 two-symbol decisions, its high bit first, each table
{2^24 - r, r} with r the node's probability of a 1 in 24 bits.

Version 2 adds truncated BPTT (``bptt`` in the training settings). Version 3 adds the
context-mixing predictor (``mix`` in the settings), stored blocks (a block whose coded form
would be larger than its bytes is written raw; the predictor still learns it), the original
file's name, mtime and size, and the short header of an empty stream. Version 4 adds
frames and the seek index. Files that need no
newer feature are written in the oldest version that describes them, which older readers
decode. Several streams may follow each other in one file: they decode as one output.

Each block restarts the range coder (the model runs on across blocks), so the encoder writes
as it goes and the decoder needs only one block in memory. Everything needed to start
decoding precedes the payload; the length and checksum follow it. All declared sizes are
checked against bounds before anything is allocated.
"""

import dataclasses
import json
import struct
import zlib

import numpy as np

from .config import Settings
from .errors import ConfigError, FormatError, VersionError
from .limits import loads_json
from .transforms import record as transform_record

MAGIC = b"\x89MZIP\r\n\x1a"
VERSION = 7  # the newest version this module reads and writes
NIBBLES = 5  # the first version whose mixing codes a byte as two nibbles
MAX_HEADER = 1 << 20
MAX_HEADER_DEPTH = 16  # the settings nest 3 deep; deeper JSON is refused before it is parsed
MAX_BLOCK = 1 << 24
DEFAULT_BLOCK = 1 << 16
MAX_NAME = 4096  # bytes of UTF-8 in a stored file name
MAX_MTIME = 253402300800  # 10000-01-01: every later second is a corrupt header, not a date
STORED = 0xFFFFFFFF  # n_words of a block stored raw (version 3)
MAX_FRAME = 1 << 40
# A version-4 header leaves out a block or frame size equal to these (the defaults of the
# release that made version 4): part of the format, never edited.
V4_SIZES = {"block_size": 1 << 16, "frame_size": 4 << 20}
INDEX_MAGIC = b"MZINDEX\x1a"
_U32 = struct.Struct("<I")
_PREFIX = struct.Struct("<8sHI")
_TRAILER = struct.Struct("<QI")
_ENTRY = struct.Struct("<QQI")
_INDEX_TAIL = struct.Struct("<IQ8s")  # index CRC, index length, magic
INDEX_FIXED = _U32.size * 2 + _TRAILER.size + _INDEX_TAIL.size  # the index without entries


def max_words(n_bytes):
    """Bound on a block's coded size: every frequency is >= 2^-24, so a byte costs at most 24
    bits; the coder adds at most two words when it flushes."""
    return (24 * n_bytes + 31) // 32 + 2


def _read_exact(f, n, what):
    data = f.read(n)
    if len(data) != n:
        raise FormatError(f"truncated file: {what} is cut short")
    return data


def format_version(settings, extras=False, framed=False, nibbles=True):
    """The oldest format version that can describe ``settings`` (None: an empty stream) and,
    with ``extras``, a version-3 header's name, mtime, size and stored blocks; ``framed``:
    frames and a seek index (version 4). Mixing settings are version 5 (always framed)
    unless ``nibbles`` is false: mixing as versions 3 and 4 coded it, to write their files."""
    if nibbles and settings is not None and settings.mix is not None:
        return NIBBLES
    if framed:
        return 4
    if extras or settings is None or settings.mix is not None:
        return 3
    return 2 if settings.train.bptt > 1 else 1


def write_header(f, settings, block_size=DEFAULT_BLOCK, model_sha256=None, model_resume=False,
                 extras=None, frame_size=None, nibbles=True):  # fmt: skip
    """``model_sha256``: the checkpoint compression started from; ``model_resume``: whether
    it started from the checkpoint's optimizer state too, not only its weights. ``extras``:
    a dict of version-3 fields ("name", "mtime", "size"; None values are left out), or None
    for a header older versions can read. ``settings`` None: the short header of an empty
    stream (version 3). ``frame_size``: frames follow (version 4; 0: one frame of any
    length). ``nibbles``: as for ``format_version``. Returns the version written."""
    framed = frame_size is not None
    if framed and settings is None:
        raise ValueError("a framed stream needs settings")
    version = format_version(settings, extras is not None, framed, nibbles)
    if version >= NIBBLES and not framed:
        raise ValueError("a version-5 stream is framed (frame_size 0: one frame)")
    # Version 3 leaves out a null model hash; older versions always wrote it.
    fields = {} if version >= 3 and model_sha256 is None else {"model_sha256": model_sha256}
    if settings is not None:
        fields["settings"] = settings_diff(settings) if version >= 3 else settings.to_dict()
        if version < 4 or block_size != V4_SIZES["block_size"]:
            fields["block_size"] = block_size
    if model_sha256 is not None and (version < 4 or model_resume):
        # Only with a model, so that files without one keep their bytes; from version 4
        # only when true (false is what an absent field reads as), since a small file
        # started from a prior pays for every byte of its header.
        fields["model_resume"] = bool(model_resume)
    if extras is not None:
        fields.update({k: v for k, v in extras.items() if v is not None})
    if framed and frame_size != V4_SIZES["frame_size"]:
        fields["frame_size"] = frame_size
    header = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    f.write(_PREFIX.pack(MAGIC, version, len(header)))
    f.write(header)
    f.write(_U32.pack(zlib.crc32(header)))
    return version


def read_header(f, following=False):
    """Read and validate the header; returns its dict with "settings" as a ``Settings`` (None
    for the short header of an empty stream), "name", "mtime", "size" (None when absent) and
    "frame_size" (None before version 4). ``following``: the header of a stream after
    another one."""
    start = f.read(len(SHORT_MAGIC) + 1)
    if len(start) == len(SHORT_MAGIC) + 1 and start[:2] == SHORT_MAGIC and start[2] != MAGIC[2]:
        version = start[2]
        if version > VERSION:
            raise VersionError(
                f"file format version {version} is newer than this mambazip reads (version "
                f"{VERSION}); upgrade mambazip"
            )
        if version < COMPACT:
            raise FormatError(f"corrupt header: format version {version}")
        return _read_compact(f, version)
    prefix = start + f.read(_PREFIX.size - len(start))
    if len(prefix) < len(MAGIC) or prefix[: len(MAGIC)] != MAGIC:
        if following:
            raise FormatError("corrupt file: unexpected data after the end of the stream")
        raise FormatError("not a mambazip file (bad magic bytes)")
    if len(prefix) != _PREFIX.size:
        raise FormatError("truncated file: header is cut short")
    _, version, header_len = _PREFIX.unpack(prefix)
    if version > VERSION:
        raise VersionError(
            f"file format version {version} is newer than this mambazip reads (version "
            f"{VERSION}); upgrade mambazip"
        )
    if version < 1 or version >= COMPACT:
        raise FormatError(f"corrupt header: format version {version}")
    if header_len > MAX_HEADER:
        raise FormatError(f"corrupt header: declared length {header_len} exceeds {MAX_HEADER}")
    raw = _read_exact(f, header_len, "header")
    (crc,) = _U32.unpack(_read_exact(f, _U32.size, "header"))
    if zlib.crc32(raw) != crc:
        raise FormatError("corrupt header: checksum mismatch")
    header = _parse(raw, version)
    if version < 3 and any(header[k] is not None for k in ("name", "mtime", "size")):
        raise FormatError(f"corrupt header: name, mtime or size in a version {version} file")
    if header["settings"] is None and version < 3:
        raise FormatError("corrupt header: no settings")
    if (header["settings"] is not None
            and format_version(header["settings"], nibbles=False) > version):  # fmt: skip
        raise FormatError(f"corrupt header: settings need format version {version + 1}")
    mix = header["settings"].mix if header["settings"] is not None else None
    if mix is not None and mix.bits and version < NIBBLES:
        raise FormatError(f"corrupt header: mix.bits in a version {version} file")
    if version >= 4 and header["settings"] is None:
        raise FormatError("corrupt header: no settings")
    return {"version": version, **header}


def _parse(raw, version):
    header = loads_json(raw, "corrupt header", MAX_HEADER_DEPTH, MAX_HEADER, FormatError)
    try:
        if not isinstance(header, dict):
            raise TypeError("not a JSON object")
        empty = version >= 3 and "settings" not in header and "block_size" not in header
        stored = None if empty else header["settings"]
        settings = None if empty else (settings_from_diff(stored) if version >= 3 else
                                       Settings.from_dict(stored))  # fmt: skip
        if version >= 4:
            block_size = header.get("block_size", V4_SIZES["block_size"])
            frame_size = header.get("frame_size", V4_SIZES["frame_size"])
        else:
            block_size = None if empty else header["block_size"]
            frame_size = header.get("frame_size")
        sha = header.get("model_sha256")
        resume = header.get("model_resume", False)
        extras = {k: header.get(k) for k in ("name", "mtime", "size")}
    except (KeyError, TypeError, ConfigError) as exc:
        raise FormatError(f"corrupt header: {exc}") from None
    if not empty and not (_is_int(block_size) and 1 <= block_size <= MAX_BLOCK):
        raise FormatError(f"corrupt header: block size {block_size!r}")
    if sha is not None and not (isinstance(sha, str) and len(sha) == 64):
        raise FormatError(f"corrupt header: model SHA-256 {sha!r}")
    if not isinstance(resume, bool):
        raise FormatError(f"corrupt header: model_resume {resume!r}")
    name = extras["name"]
    if name is not None and not valid_name(name):
        raise FormatError("corrupt header: stored file name")
    for key, bound in (("mtime", MAX_MTIME), ("size", 1 << 63)):
        value = extras[key]
        if value is not None and not (_is_int(value) and 0 <= value < bound):
            raise FormatError(f"corrupt header: {key} {value!r}")
    if version < 4 and frame_size is not None:
        raise FormatError(f"corrupt header: frame_size in a version {version} file")
    if version >= 4 and not (_is_int(frame_size) and 0 <= frame_size <= MAX_FRAME):
        raise FormatError(f"corrupt header: frame size {frame_size!r}")
    return {"settings": settings, "block_size": block_size, "model_sha256": sha,
            "model_resume": resume, "frame_size": frame_size, **extras}  # fmt: skip


# Version 3 stores the settings as their difference from this baseline (the default preset
# of the release that made version 3), so a usual header is a few dozen bytes: for a small
# file the header is a good part of what it costs. Part of the format: never edit it.
V3_BASE = {
    "model": {
        "d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16, "d_conv": 4,
        "vocab": 256, "norm_eps": 1e-05, "proj_bias": False, "conv_bias": True,
        "x_proj_bias": False, "head_bias": False, "tie_embeddings": False
    },
    "train": {
        "optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
        "decay": 50000, "beta1": 0.9, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16
    },
    "mix": {
        "mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
        "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
        "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023, "combiner_lr": 8,
        "final_lr": 2, "apm_rate": 6, "full_log": 6, "slot_log": 8, "mamba_sel": 2,
        "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1
    },
    "seed": 0,
}  # fmt: skip


def _full_settings(settings):
    """Every field of every section, bptt included (``Settings.to_dict`` drops bptt 1), but
    the recipe knobs only where they differ from their defaults (``TrainConfig.to_dict``)."""
    train = settings.train.to_dict()
    mix = settings.mix.to_dict() if settings.mix is not None else None
    return {"model": dataclasses.asdict(settings.model), "train": train, "mix": mix,
            "seed": settings.seed}  # fmt: skip


def settings_diff(settings):
    """The version-3 form of ``settings``: per section, the fields that differ from V3_BASE
    (a section without any is left out); "mix": null for the Mamba alone."""
    full = _full_settings(settings)
    out = {}
    for section in ("model", "train", "mix"):
        if full[section] is None:
            out[section] = None
            continue
        base = V3_BASE[section]
        changed = {k: v for k, v in full[section].items() if k not in base or base[k] != v}
        if changed:
            out[section] = changed
    if full["seed"] != V3_BASE["seed"]:
        out["seed"] = full["seed"]
    return out


def settings_from_diff(stored):
    """``settings_diff`` read back: V3_BASE with the stored fields over it."""
    return _from_diff_against(stored, V3_BASE)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def valid_name(name):
    """A plain file name a header may hold: UTF-8, no directory part, no control characters,
    at most MAX_NAME bytes."""
    if not isinstance(name, str) or name in ("", ".", ".."):
        return False
    if "/" in name or "\\" in name or any(ord(c) < 32 for c in name):
        return False
    try:
        encoded = name.encode("utf-8")
    except UnicodeError:  # undecodable bytes of a file name (surrogate escapes)
        return False
    return len(encoded) <= MAX_NAME


def write_block(f, n_bytes, words):
    f.write(_U32.pack(n_bytes))
    f.write(_U32.pack(words.shape[0]))
    f.write(words.astype("<u4").tobytes())


def write_stored_block(f, data):
    """A version-3 block of raw bytes (its coded form would have been larger)."""
    f.write(_U32.pack(len(data)))
    f.write(_U32.pack(STORED))
    f.write(data)


def write_skipped_block(f, data):
    """A version-6 block of raw bytes that the predictor skips."""
    f.write(_U32.pack(len(data)))
    f.write(_U32.pack(SKIPPED))
    f.write(data)


def write_end(f, length, crc):
    f.write(_U32.pack(0))
    f.write(_TRAILER.pack(length, crc))


def read_blocks(f, block_size, version):
    """Yield (n_bytes, payload) per block: payload the uint32 range-coder words, or for a
    stored block (version 3) the raw bytes; at the end yield ("end", (length, crc)). From
    version 7 a ``Transformed`` payload (n_bytes: the segment's original length) announces
    that the blocks after it, exactly its ``stream_length`` bytes, are a transformed
    segment; each of those blocks' n_bytes counts transformed bytes."""
    inside = 0  # transformed bytes still to come in the blocks of a segment
    while True:
        (n_bytes,) = _U32.unpack(_read_exact(f, _U32.size, "block header"))
        if n_bytes == 0:
            if inside:
                raise FormatError("corrupt block: the stream ends inside a transformed segment")
            yield "end", _TRAILER.unpack(_read_exact(f, _TRAILER.size, "trailer"))
            return
        if block_size is None or n_bytes > max(block_size, MAX_BLOCK * (version >= COMPACT),
                                               MAX_SEGMENT * (version >= TRANSFORMS)):  # fmt: skip
            raise FormatError(f"corrupt block: {n_bytes} bytes declared, block size {block_size}")
        (n_words,) = _U32.unpack(_read_exact(f, _U32.size, "block header"))
        if n_words == TRANSFORM and version >= TRANSFORMS:
            if inside:
                raise FormatError("corrupt block: a transformed segment inside another")
            head = read_transform(f, n_bytes)
            inside = head.stream_length
            yield n_bytes, head
            continue
        if n_bytes > inside > 0:
            raise FormatError("corrupt block: a block crosses the end of a transformed segment")
        inside = max(inside - n_bytes, 0)
        if n_bytes > max(block_size, MAX_BLOCK * (version >= COMPACT)):
            raise FormatError(f"corrupt block: {n_bytes} bytes declared, block size {block_size}")
        if n_words == SKIPPED and version >= COMPACT:
            # A run of skipped blocks is one, of up to MAX_BLOCK bytes.
            yield n_bytes, Skipped(_read_exact(f, n_bytes, "stored block"))
            continue
        if n_bytes > block_size:
            raise FormatError(f"corrupt block: {n_bytes} bytes declared, block size {block_size}")
        if n_words == STORED and version >= 3:
            yield n_bytes, _read_exact(f, n_bytes, "stored block")
            continue
        if n_words > max_words(n_bytes):
            raise FormatError(f"corrupt block: {n_words} words for {n_bytes} bytes")
        raw = _read_exact(f, 4 * n_words, "block payload")
        yield n_bytes, np.frombuffer(raw, dtype="<u4").astype(np.uint32)


def max_frame_bytes(frame_size, block_size):
    """Bound on the compressed size of a frame of ``frame_size`` original bytes (its blocks
    and end), for buffering a whole frame."""
    blocks = -(-frame_size // block_size)
    per_block = 2 * _U32.size + max(4 * max_words(block_size), block_size)
    return blocks * per_block + _U32.size + _TRAILER.size


def read_frame(f, block_size, frame_size, keep=True):
    """The raw bytes of the next frame (its blocks and end), checked block by block against
    the header's sizes but not decoded (``keep`` False: only their number, holding no more
    than a block); None when the index's mark comes instead (the mark is then consumed:
    ``read_index`` reads on)."""
    raw = _read_exact(f, _U32.size, "frame")
    (n_bytes,) = _U32.unpack(raw)
    if n_bytes == 0:
        return None
    parts, count = [], 0

    def take(data):
        nonlocal count
        count += len(data)
        if keep:
            parts.append(data)

    take(raw)
    total = inside = 0
    while n_bytes:
        if n_bytes > max(block_size, MAX_BLOCK, MAX_SEGMENT):
            raise FormatError(f"corrupt block: {n_bytes} bytes declared, block size {block_size}")
        raw = _read_exact(f, _U32.size, "block header")
        take(raw)
        (n_words,) = _U32.unpack(raw)
        if n_bytes > inside > 0 or (inside and n_words == TRANSFORM):
            raise FormatError("corrupt block: a block crosses the end of a transformed segment")
        if not inside:
            total += n_bytes
        if frame_size and total > frame_size:
            raise FormatError(f"corrupt frame: more than the frame size of {frame_size} bytes")
        if n_words == TRANSFORM:
            # Its record is parsed where the frame is decoded (read_blocks); here only its
            # sizes are checked, so that the frame is bounded before it is buffered.
            fixed = _read_exact(f, _TRANSFORM_HEAD.size, "transform record")
            take(fixed)
            inside, record_len = _transform_sizes(fixed, n_bytes)
            take(_read_exact(f, record_len, "transform record"))
            raw = _read_exact(f, _U32.size, "block header")
            take(raw)
            (n_bytes,) = _U32.unpack(raw)
            continue
        inside = max(inside - n_bytes, 0)
        if n_bytes > max(block_size, MAX_BLOCK):
            raise FormatError(f"corrupt block: {n_bytes} bytes declared, block size {block_size}")
        # Only a run of skipped blocks (version 6) is longer than a block.
        if n_bytes > block_size and n_words != SKIPPED:
            raise FormatError(f"corrupt block: {n_bytes} bytes declared, block size {block_size}")
        raw_block = n_words in (STORED, SKIPPED)
        if not raw_block and n_words > max_words(n_bytes):
            raise FormatError(f"corrupt block: {n_words} words for {n_bytes} bytes")
        take(_read_exact(f, n_bytes if raw_block else 4 * n_words, "block payload"))
        raw = _read_exact(f, _U32.size, "block header")
        take(raw)
        (n_bytes,) = _U32.unpack(raw)
    if inside:
        raise FormatError("corrupt block: the frame ends inside a transformed segment")
    take(_read_exact(f, _TRAILER.size, "frame end"))
    return b"".join(parts) if keep else count


def all_skipped(raw):
    """Whether the frame ``raw`` (``read_frame``'s bytes) holds skipped blocks only (version
    6): decoding it needs no predictor. Its sizes are checked where it is decoded."""
    at = 0
    while at + 2 * _U32.size <= len(raw):
        n_bytes, n_words = struct.unpack_from("<II", raw, at)
        if n_bytes == 0:
            return at > 0
        if n_words != SKIPPED:
            return False
        at += 2 * _U32.size + n_bytes
    return False


def frame_blocks(f, header):
    """``read_blocks`` of one frame of a version-4 stream, its sizes checked against the
    header's frame size (in original bytes: a transformed segment's blocks count as its
    original length)."""
    frame_size, total, inside = header["frame_size"], 0, 0
    for n_bytes, payload in read_blocks(f, header["block_size"], header["version"]):
        if inside and not isinstance(payload, Transformed):
            inside -= n_bytes  # read_blocks ends every segment's blocks where its stream ends
        elif n_bytes != "end":
            inside = payload.stream_length if isinstance(payload, Transformed) else 0
            total += n_bytes
            if frame_size and total > frame_size:
                raise FormatError(f"corrupt frame: more than the frame size of {frame_size} bytes")
        yield n_bytes, payload


@dataclasses.dataclass(frozen=True)
class Frame:
    """One frame of the seek index; offsets are from the start of the stream (compressed)
    and of its original."""

    packed_offset: int
    packed_size: int
    offset: int
    size: int
    crc: int


@dataclasses.dataclass(frozen=True)
class Index:
    frames: tuple
    length: int  # of the whole original
    crc: int

    def overlapping(self, start, end):
        """The frames that hold a byte of the original's [start, end)."""
        if start >= end:
            return []
        return [fr for fr in self.frames if fr.offset < end and start < fr.offset + fr.size]


def write_index(f, entries, length, crc):
    """``entries``: (compressed size, original size, CRC32) per frame, in order."""
    body = _U32.pack(len(entries))
    body += b"".join(_ENTRY.pack(*e) for e in entries) + _TRAILER.pack(length, crc)
    tail = _INDEX_TAIL.pack(zlib.crc32(body), INDEX_FIXED + _ENTRY.size * len(entries),
                            INDEX_MAGIC)  # fmt: skip
    f.write(_U32.pack(0) + body + tail)


def read_index(f, n_frames, packed_start, frame_size):
    """The index after its mark, read in order by a reader that has read ``n_frames``
    frames; ``packed_start``: the stream offset of the first frame; ``frame_size``: the
    header's."""
    (declared,) = _U32.unpack(_read_exact(f, _U32.size, "index"))
    if declared != n_frames:
        raise FormatError(f"corrupt index: {declared} frames listed, {n_frames} in the stream")
    body = _U32.pack(declared) + _read_exact(f, _ENTRY.size * declared + _TRAILER.size, "index")
    tail = _read_exact(f, _INDEX_TAIL.size, "index")
    return _parse_index(body, tail, packed_start, frame_size)


def _parse_index(body, tail, packed_start, frame_size):
    crc, index_len, magic = _INDEX_TAIL.unpack(tail)
    if magic != INDEX_MAGIC:
        raise FormatError("corrupt index: bad magic bytes")
    if zlib.crc32(body) != crc:
        raise FormatError("corrupt index: checksum mismatch")
    if index_len != _U32.size + len(body) + _INDEX_TAIL.size:
        raise FormatError(f"corrupt index: declared length {index_len}")
    (n,) = _U32.unpack_from(body)
    if len(body) != _U32.size + n * _ENTRY.size + _TRAILER.size:
        raise FormatError(f"corrupt index: {n} frames declared in {len(body)} bytes")
    if n == 0:  # an empty input is written as the empty stream of version 3
        raise FormatError("corrupt index: no frames")
    frames, packed, offset = [], packed_start, 0
    for i in range(n):
        packed_size, size, frame_crc = _ENTRY.unpack_from(body, _U32.size + i * _ENTRY.size)
        # A frame's place in the original is its number times the frame size: a reader of a
        # slice trusts the listed sizes only as far as they are the cuts a writer makes.
        if size == 0 or (frame_size and size > frame_size) or (i < n - 1 and size != frame_size):
            raise FormatError(f"corrupt index: frame {i + 1} of {size} bytes, frame size "
                              f"{frame_size}")  # fmt: skip
        frames.append(Frame(packed, packed_size, offset, size, frame_crc))
        packed, offset = packed + packed_size, offset + size
    length, total_crc = _TRAILER.unpack_from(body, _U32.size + n * _ENTRY.size)
    if length != offset:
        raise FormatError(f"corrupt index: {offset} bytes in frames, {length} declared")
    return Index(tuple(frames), length, total_crc)


def index_from_end(f):
    """The seek index of the seekable ``f``, a single version-4 stream, read from its end
    without reading the frames: (header, Index). None when ``f`` holds no index that
    accounts for every byte after its header: a file of an older version, several streams
    one after the other (the index at the end is the last one's), or a damaged end. Such a
    file is read in order instead, which finds what is wrong with it, if anything."""
    f.seek(0)
    header = read_header(f)
    packed_start = f.tell()
    if header["version"] < 4:
        return None
    end = f.seek(0, 2)
    try:
        index, index_len = _index_at(f, packed_start, end, header["frame_size"])
    except FormatError:
        return None
    if packed_start + sum(fr.packed_size for fr in index.frames) != end - index_len:
        return None
    return header, index


def _index_at(f, packed_start, end, frame_size):
    if end - packed_start < INDEX_FIXED:
        raise FormatError("truncated file: no seek index at the end")
    f.seek(end - _INDEX_TAIL.size)
    tail = _read_exact(f, _INDEX_TAIL.size, "index")
    index_len = _INDEX_TAIL.unpack(tail)[1]
    if not INDEX_FIXED <= index_len <= end - packed_start:
        raise FormatError(f"corrupt index: declared length {index_len}")
    f.seek(end - index_len)
    if _read_exact(f, _U32.size, "index") != _U32.pack(0):
        raise FormatError("corrupt index: no mark before it")
    body = _read_exact(f, index_len - _U32.size - _INDEX_TAIL.size, "index")
    return _parse_index(body, tail, packed_start, frame_size), index_len


def scan_frames(f, header):
    """The seek index of a version-4 stream read in order from ``f`` (after its header),
    each frame checked block by block against it but not decoded. A short-form stream
    (version 6) is one frame without an index: its Index is made from the one block."""
    packed_start = f.tell()
    if header.get("short"):
        *_, (_, (length, crc)) = read_short(f, header)
        return Index((Frame(packed_start, f.tell() - packed_start, 0, length, crc),) if length
                     else (), length, crc)  # fmt: skip
    sizes = []
    while (size := read_frame(f, header["block_size"], header["frame_size"], False)) is not None:
        sizes.append(size)
    index = read_index(f, len(sizes), packed_start, header["frame_size"])
    if [fr.packed_size for fr in index.frames] != sizes:
        raise FormatError("corrupt index: its sizes do not match the frames")
    return index


# Version 6: the compact container. Its header is binary: the magic's first two bytes, the
# version byte (never "Z", MAGIC's third byte, so one read of three bytes tells the two
# layouts apart), a flags byte, then only the fields the flags announce:
#
#     SHORT_MAGIC  2 bytes, version 1 byte, flags 1 byte
#     base         varint, with F_BASE (else 0): the index of the V6_BASES entry the
#                  settings are a diff from
#     diff         with F_DIFF: varint length, then settings_diff's JSON against that base
#     model        F_PRIOR: the base's prior (its SHA-256 is checked when it is loaded, not
#                  stored); F_DIGEST: 32 bytes, the SHA-256 of a user's --model; F_RESUME
#     name         with F_NAME: varint length, UTF-8; mtime with F_MTIME: varint
#     long form    with F_LONG: varint block size, varint frame size, varint size + 1
#                  (0: unknown), u32 CRC32 of the header; then frames and the seek index as
#                  in version 5, where a block may also be SKIPPED
#     short form   without F_LONG (the whole input is one block): varint n bytes, varint m,
#                  m payload bytes (m == n: the bytes stored, else the range coder's words
#                  big-endian, the last one cut after its last nonzero byte), then u32
#                  CRC32 of the original XOR CRC32 of the header (every byte before n's end)
#
# A block stored because the noise estimate found nothing to gain (blocks.incompressible)
# is SKIPPED: the predictor neither codes nor learns it, on both sides. A run of skipped
# blocks is written as one block of up to MAX_BLOCK bytes.
SHORT_MAGIC = MAGIC[:2]
COMPACT = 6  # the first version of the compact container
SKIPPED = 0xFFFFFFFE  # n_words of a block stored raw that the predictor skips (version 6)
F_BASE, F_DIFF, F_PRIOR, F_DIGEST, F_RESUME, F_NAME, F_MTIME, F_LONG = (1 << i for i in range(8))
MAX_DIFF = 1 << 16  # bytes of a settings diff: every field of every section is far less
MAX_VARINT = 10  # bytes: a varint of up to 70 bits; every bound checked is below 2^64

# The settings a version-6 header is a diff from, with the prior each base names by its
# index (the presets of the release that made version 6). Part of the format: never edit or
# reorder an entry; a preset that changes is appended as a new one.
V6_BASES = (
    # default
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 2, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "level": 2},
      "seed": 0},
     "e60d1a9d222512f57f7d32ad1f4d02531df2f7c8204ff77b17f11cb335854aaf"),
    # fast
    ({"model": {"d_model": 48, "n_layer": 1, "d_inner": 96, "dt_rank": 3, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0015, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 100000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"head": 2.0}},
      "mix": {"mamba": False, "max_order": 5, "word": True, "sparse": False, "match": True,
              "final": True, "apm": True, "ctx_log": 20, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 8, "final_lr": 2, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 0, "mamba_lr": 0, "mamba_w0": 16, "mamba_eapm": 0,
              "contexts": ["classes"], "found_sel": True},
      "seed": 0},
     None),
    # max
    ({"model": {"d_model": 128, "n_layer": 16, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0003, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 100000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"head": 2.0}},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 24, "hist_log": 24, "match_log": 24,
              "match_min": 6, "apm_log": 20, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 8, "final_lr": 2, "apm_rate": 6, "full_log": 24, "slot_log": 24,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1,
              "contexts": ["classes", "column", "word3", "matched"], "found_sel": True,
              "c2_sel": True, "final_sel": 1},
      "seed": 0},
     None),
    # default's small-input counterpart (SMALL_BASES): for the first few KB fewer context
    # models (orders 0 to 4, no sparse ones, level 0's parts) whose weights learn 4x faster
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}},
      "mix": {"mamba": True, "max_order": 4, "word": True, "sparse": False, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 16, "final_lr": 8, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "level": 0},
      "seed": 0},
     "e60d1a9d222512f57f7d32ad1f4d02531df2f7c8204ff77b17f11cb335854aaf"),
    # default with level 3 (the nest context, the runs), from 2026-12-03
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 2, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "level": 3},
      "seed": 0},
     "e60d1a9d222512f57f7d32ad1f4d02531df2f7c8204ff77b17f11cb335854aaf"),
    # default with level 3 and the prior f13eff77, from 2026-12-03
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 2, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "level": 3},
      "seed": 0},
     "f13eff77a58e12406f94c1a325429d737ac3546ce234d00b5669acffca7a6622"),
    # entry 3 with the prior f13eff77: entry 5's small-input counterpart
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}},
      "mix": {"mamba": True, "max_order": 4, "word": True, "sparse": False, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 16, "final_lr": 8, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "level": 0},
      "seed": 0},
     "f13eff77a58e12406f94c1a325429d737ac3546ce234d00b5669acffca7a6622"),
    # default with level 4, the Mamba promoted, final_lr 1 and no rerun, from 2026-12-03
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 4},
      "seed": 0},
     "f13eff77a58e12406f94c1a325429d737ac3546ce234d00b5669acffca7a6622"),
    # entry 7 with overlapped updates (each lands a segment late) and mix level 5 (the match
    # model's recovery and second candidate), from 2026-12-04
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 5},
      "seed": 0},
     "f13eff77a58e12406f94c1a325429d737ac3546ce234d00b5669acffca7a6622"),
    # entry 8 from the prior, with the default preset's "prior_train" (lr 2e-4), from 2026-12-04
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0002, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 5},
      "seed": 0},
     "f13eff77a58e12406f94c1a325429d737ac3546ce234d00b5669acffca7a6622"),
    # entry 8 with mix level 6 (each weight row's own rate, the history maps by depth), from
    # 2026-12-04
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 6},
      "seed": 0},
     "f13eff77a58e12406f94c1a325429d737ac3546ce234d00b5669acffca7a6622"),
    # entry 10 from the prior, with the default preset's "prior_train" (lr 2e-4), from
    # 2026-12-04
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0002, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 6},
      "seed": 0},
     "f13eff77a58e12406f94c1a325429d737ac3546ce234d00b5669acffca7a6622"),
    # entry 10 with mix level 7 (the byte histories, the history and run inputs at half),
    # from 2026-12-05
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 7},
      "seed": 0},
     "f13eff77a58e12406f94c1a325429d737ac3546ce234d00b5669acffca7a6622"),
    # entry 12 from the prior, with the default preset's "prior_train" (lr 2e-4), from
    # 2026-12-05
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0002, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 7},
      "seed": 0},
     "f13eff77a58e12406f94c1a325429d737ac3546ce234d00b5669acffca7a6622"),
    # entry 12 with the prior 31e2540a (f13eff77 trained on) as the default preset's, from
    # 2026-12-05
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 7},
      "seed": 0},
     "31e2540acba86080e033b04226888bfb9987b58a299574b6696f67489df5fe7c"),
    # entry 13 from the prior 31e2540a
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0002, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 7},
      "seed": 0},
     "31e2540acba86080e033b04226888bfb9987b58a299574b6696f67489df5fe7c"),
    # entry 6 (the small-input counterpart of entries 12 to 15) from the prior 31e2540a
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}},
      "mix": {"mamba": True, "max_order": 4, "word": True, "sparse": False, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 16, "final_lr": 8, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "level": 0},
      "seed": 0},
     "31e2540acba86080e033b04226888bfb9987b58a299574b6696f67489df5fe7c"),
    # fast with mix level 7 and orders 0-4 (entry 1's context side was level 0), from
    # 2026-12-06
    ({"model": {"d_model": 48, "n_layer": 1, "d_inner": 96, "dt_rank": 3, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0015, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 100000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"head": 2.0}},
      "mix": {"mamba": False, "max_order": 4, "word": True, "sparse": False, "match": True,
              "final": True, "apm": True, "ctx_log": 20, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 8, "final_lr": 2, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 0, "mamba_lr": 0, "mamba_w0": 16, "mamba_eapm": 0, "level": 7},
      "seed": 0},
     None),
    # entry 14 coding each byte as 8 binary decisions (mix.bits), the default preset's from
    # 2026-12-07
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 7,
              "bits": True},
      "seed": 0},
     "31e2540acba86080e033b04226888bfb9987b58a299574b6696f67489df5fe7c"),
    # entry 15 with mix.bits, the default preset from its prior
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0002, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 7,
              "bits": True},
      "seed": 0},
     "31e2540acba86080e033b04226888bfb9987b58a299574b6696f67489df5fe7c"),
    # entry 17 with mix.bits, orders 0-5 and the sparse contexts: the fast preset's from
    # 2026-12-07
    ({"model": {"d_model": 48, "n_layer": 1, "d_inner": 96, "dt_rank": 3, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0015, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 100000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"head": 2.0}},
      "mix": {"mamba": False, "max_order": 5, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 20, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 8, "final_lr": 2, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 0, "mamba_lr": 0, "mamba_w0": 16, "mamba_eapm": 0, "level": 7,
              "bits": True},
      "seed": 0},
     None),
    # entry 18 with four more contexts (indirect1, indirect2, wordgap, wordclass), two more
    # weight sets (c3, hibits) and the quiet deterministic inputs (det_inputs 3), the
    # default preset's from 2026-12-07 (its second change that day)
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 7,
              "bits": True,
              "contexts": ["indirect1", "indirect2", "wordgap", "wordclass"],
              "sets": ["c3", "hibits"], "det_inputs": 3},
      "seed": 0},
     "31e2540acba86080e033b04226888bfb9987b58a299574b6696f67489df5fe7c"),
    # entry 19 with the same contexts, sets and inputs, the default preset from its prior
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0002, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 7,
              "bits": True,
              "contexts": ["indirect1", "indirect2", "wordgap", "wordclass"],
              "sets": ["c3", "hibits"], "det_inputs": 3},
      "seed": 0},
     "31e2540acba86080e033b04226888bfb9987b58a299574b6696f67489df5fe7c"),
    # entry 21 with the found set by the models that have seen each node (found_node) and a
    # dead zone of 8 in place of level 2's 32, the default preset's from 2026-12-07 (its
    # third change that day)
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 7,
              "bits": True,
              "contexts": ["indirect1", "indirect2", "wordgap", "wordclass"],
              "sets": ["c3", "hibits"], "det_inputs": 3, "found_node": True,
              "dead_zone": 8},
      "seed": 0},
     "31e2540acba86080e033b04226888bfb9987b58a299574b6696f67489df5fe7c"),
    # entry 22 with found_node and dead_zone 8, the default preset from its prior
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0002, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 7,
              "bits": True,
              "contexts": ["indirect1", "indirect2", "wordgap", "wordclass"],
              "sets": ["c3", "hibits"], "det_inputs": 3, "found_node": True,
              "dead_zone": 8},
      "seed": 0},
     "31e2540acba86080e033b04226888bfb9987b58a299574b6696f67489df5fe7c"),
    # entry 23 with the word1b context, the bit histories as states (states 1), the match
    # model's recovery up to 6 misses of 16, the counters slowing to 1/16.5 and the order-4
    # APM, the default preset's from 2026-12-07 (its fourth change that day)
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 15, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 7,
              "bits": True,
              "contexts": ["indirect1", "indirect2", "wordgap", "wordclass", "word1b"],
              "sets": ["c3", "hibits"], "det_inputs": 3, "found_node": True,
              "dead_zone": 8, "states": 1, "match_recover": 6, "sse_order4": True},
      "seed": 0},
     "31e2540acba86080e033b04226888bfb9987b58a299574b6696f67489df5fe7c"),
    # entry 24 with the same, the default preset from its prior
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0002, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 15, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 7,
              "bits": True,
              "contexts": ["indirect1", "indirect2", "wordgap", "wordclass", "word1b"],
              "sets": ["c3", "hibits"], "det_inputs": 3, "found_node": True,
              "dead_zone": 8, "states": 1, "match_recover": 6, "sse_order4": True},
      "seed": 0},
     "31e2540acba86080e033b04226888bfb9987b58a299574b6696f67489df5fe7c"),
    # entry 25 with combiners learning 1.5 times as fast and the pos4 set (sets c3, hibits,
    # pos4), the default preset's mix for an input that does not look like text (its
    # "binary_mix"), from 2026-12-07
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 15, "map_limit": 1023,
              "combiner_lr": 6, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 7,
              "bits": True,
              "contexts": ["indirect1", "indirect2", "wordgap", "wordclass", "word1b"],
              "sets": ["c3", "hibits", "pos4"], "det_inputs": 3, "found_node": True,
              "dead_zone": 8, "states": 1, "match_recover": 6, "sse_order4": True},
      "seed": 0},
     None),
    # entry 25 with the word set (sets c3, hibits, word), the default preset from 2026-12-07
    # (its fifth change that day)
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 15, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 7,
              "bits": True,
              "contexts": ["indirect1", "indirect2", "wordgap", "wordclass", "word1b"],
              "sets": ["c3", "hibits", "word"], "det_inputs": 3, "found_node": True,
              "dead_zone": 8, "states": 1, "match_recover": 6, "sse_order4": True},
      "seed": 0},
     "31e2540acba86080e033b04226888bfb9987b58a299574b6696f67489df5fe7c"),
    # entry 28 from the prior, the default preset on text
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0002, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 15, "map_limit": 1023,
              "combiner_lr": 4, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 7,
              "bits": True,
              "contexts": ["indirect1", "indirect2", "wordgap", "wordclass", "word1b"],
              "sets": ["c3", "hibits", "word"], "det_inputs": 3, "found_node": True,
              "dead_zone": 8, "states": 1, "match_recover": 6, "sse_order4": True},
      "seed": 0},
     "31e2540acba86080e033b04226888bfb9987b58a299574b6696f67489df5fe7c"),
    # entry 27 with the record model (predictor/record.py): its three contexts and the
    # record_pos set, the default preset's mix for an input that does not look like text
    # from 2026-12-08
    ({"model": {"d_model": 128, "n_layer": 3, "d_inner": 256, "dt_rank": 8, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0005, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 50000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"embed": 2.0, "head": 4.0}, "rerun": False, "overlap": True},
      "mix": {"mamba": True, "max_order": 6, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 22, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 15, "map_limit": 1023,
              "combiner_lr": 6, "final_lr": 1, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 2, "mamba_lr": 4, "mamba_w0": 16, "mamba_eapm": 1, "promote": True,
              "level": 7,
              "bits": True,
              "contexts": ["indirect1", "indirect2", "wordgap", "wordclass", "word1b",
                           "record", "record2", "recpos"],
              "sets": ["c3", "hibits", "pos4", "record_pos"], "det_inputs": 3,
              "found_node": True, "dead_zone": 8, "states": 1, "match_recover": 6,
              "sse_order4": True},
      "seed": 0},
     None),
    # entry 20 with the record model (its three contexts and the record_pos set) and the
    # pos4 set, the fast preset's mix for an input that does not look like text from
    # 2026-12-08
    ({"model": {"d_model": 48, "n_layer": 1, "d_inner": 96, "dt_rank": 3, "d_state": 16,
                "d_conv": 4, "vocab": 256, "norm_eps": 1e-05, "proj_bias": False,
                "conv_bias": True, "x_proj_bias": False, "head_bias": False,
                "tie_embeddings": False},
      "train": {"optimizer": "adam", "lr": 0.0015, "scope": ["all"], "clip": 0.0, "warmup": 0,
                "decay": 100000, "beta1": 0.0, "beta2": 0.999, "adam_eps": 1e-08, "bptt": 16,
                "lr_scale": {"head": 2.0}},
      "mix": {"mamba": False, "max_order": 5, "word": True, "sparse": True, "match": True,
              "final": True, "apm": True, "ctx_log": 20, "hist_log": 24, "match_log": 22,
              "match_min": 6, "apm_log": 16, "counter_limit": 14, "map_limit": 1023,
              "combiner_lr": 8, "final_lr": 2, "apm_rate": 6, "full_log": 6, "slot_log": 8,
              "mamba_sel": 0, "mamba_lr": 0, "mamba_w0": 16, "mamba_eapm": 0, "level": 7,
              "bits": True, "contexts": ["record", "record2", "recpos"],
              "sets": ["pos4", "record_pos"]},
      "seed": 0},
     None),
)  # fmt: skip

# A short-form input of at most SMALL_INPUT bytes that a preset's settings would code (those
# of the V6_BASES entry on the left) is coded with the entry on the right (plan.Layout's
# small_input). The header names that entry, so the reader follows no rule of its own.
# Measured on alice29.txt's first 50 / 200 / 1,000 / 4,000 / 8,000 bytes: 51 / 112 / 434 /
# 1,455 / 2,655 bytes become 36 / 87 / 396 / 1,419 / 2,638; at 16,000 they would cost 0.5 %
# (benchmarks/bench-2026-12-03-small-inputs.md).
SMALL_INPUT = 8192
SMALL_BASES = {0: 3, 4: 3, 5: 6, 7: 6, 8: 6, 9: 6, 10: 6, 11: 6, 12: 6, 13: 6, 14: 6, 15: 6, 18: 6,
               19: 6, 21: 6, 22: 6, 23: 6, 24: 6, 25: 6, 26: 6, 27: 6, 28: 6, 29: 6,
               30: 6}  # fmt: skip


def small_input_settings(settings, n):
    """The settings a short-form input of ``n`` bytes is coded with when a preset chose
    ``settings``: the small-input counterpart of their base (SMALL_BASES) when they are that
    base exactly and 0 < n <= SMALL_INPUT, else ``settings`` (an empty input codes nothing:
    naming the counterpart would cost a byte)."""
    if 0 < n <= SMALL_INPUT and settings.mix is not None:
        for index, small in SMALL_BASES.items():
            if not _diff_against(settings, V6_BASES[index][0]):
                return Settings.from_dict(V6_BASES[small][0])
    return settings


# Version 7: transforms (``mambazip.transforms``). Its header is version 6's. In the long
# form a frame may hold, before any of its blocks, a transformed segment:
#
#     u32 n_bytes     the segment's original length (1..MAX_SEGMENT)
#     u32 TRANSFORM   in the place of n_words
#     u32 stream      the transformed stream's length (1..MAX_STREAM)
#     u32 r           the record's length (1..MAX_RECORD)
#     record          r bytes: ``transforms.record`` (the regions and the CRC32 of each
#                     region's original bytes)
#
# then blocks as usual (coded, stored or skipped) of exactly ``stream`` bytes: the stream
# the predictor codes. The decoder inverts the transforms once the stream is whole (a
# segment is held in memory, bounded by these limits and by the memory limit: see
# frames.FrameJob.check_segment) and the frame's CRC32 covers the
# original bytes. The short form of version 7 is version 6's with, after n (the original
# length), varint stream length (< MAX_BLOCK), varint r (1..MAX_RECORD) and the record,
# all covered by the check; its payload codes the stream. A file without any transform
# in its short form is written as version 6.
TRANSFORMS = 7  # the first version with transformed segments
TRANSFORM = 0xFFFFFFFD  # n_words of a transformed segment's head (version 7)
MAX_SEGMENT = 1 << 25  # original bytes of a segment (the writer's are up to 8 MB and a block)
MAX_STREAM = 1 << 29  # bytes of a transformed segment's stream (deflate.Budget: 256 MB)
MAX_RECORD = 1 << 22  # bytes of a transform record (its regions are bounded at 65,536)
_TRANSFORM_HEAD = struct.Struct("<II")  # stream length, record length


@dataclasses.dataclass(frozen=True)
class Transformed:
    """The head of a transformed segment: the regions of its record (``transforms.Region``)
    and the length of the stream that the blocks after it hold."""

    stream_length: int
    regions: tuple


def _transform_sizes(fixed, n_bytes):
    """(stream length, record length) of a segment head's fixed part, checked."""
    stream_length, record_len = _TRANSFORM_HEAD.unpack(fixed)
    if not 1 <= n_bytes <= MAX_SEGMENT:
        raise FormatError(f"corrupt block: a transformed segment of {n_bytes} bytes")
    if not 1 <= stream_length <= MAX_STREAM:
        raise FormatError(f"corrupt block: a transformed stream of {stream_length} bytes")
    if not 1 <= record_len <= MAX_RECORD:
        raise FormatError(f"corrupt block: a transform record of {record_len} bytes")
    return stream_length, record_len


def read_transform(f, n_bytes):
    """The ``Transformed`` head of a segment of ``n_bytes`` original bytes, after its
    marker."""
    stream_length, record_len = _transform_sizes(
        _read_exact(f, _TRANSFORM_HEAD.size, "transform record"), n_bytes
    )
    raw = _read_exact(f, record_len, "transform record")
    return Transformed(stream_length, transform_record.decode(raw, n_bytes, stream_length))


def write_transform(f, n_bytes, stream_length, record):
    """The head of a transformed segment (version 7): its blocks follow."""
    f.write(_U32.pack(n_bytes) + _U32.pack(TRANSFORM))
    f.write(_TRANSFORM_HEAD.pack(stream_length, len(record)) + record)


def varint(value):
    """``value`` >= 0 as LEB128: seven bits a byte, low first, the top bit set but on the
    last byte."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varint(f, what, bound):
    """A varint from ``f``, refused unless it is below ``bound``, before its value is used."""
    value = 0
    for i in range(MAX_VARINT):
        (byte,) = _read_exact(f, 1, what)
        value |= (byte & 0x7F) << (7 * i)
        if value >= bound:
            raise FormatError(f"corrupt header: {what} exceeds {bound - 1}")
        if byte < 0x80:
            return value
    raise FormatError(f"corrupt header: {what} is not a varint")


class _Recording:
    """Reads through to ``f`` and keeps what it read (the bytes a header's check covers)."""

    def __init__(self, f, first):
        self.f, self.data = f, bytearray(first)

    def read(self, n):
        data = self.f.read(n)
        self.data += data
        return data


def _diff_against(settings, base):
    """``settings_diff`` of ``settings`` against the full settings ``base``. A field the
    settings leave out at its default (a recipe knob, a mixing option) is written too
    where the base sets it otherwise."""
    full = _full_settings(settings)
    out = {}
    for section in ("model", "train", "mix"):
        if full[section] is None:
            out[section] = None
            continue
        given, have = full[section], base[section]
        values = {k: given[k] if k in given else _default_form(settings, section, k)
                  for k in given.keys() | have.keys()}  # fmt: skip
        changed = {k: _plain(v) for k, v in values.items() if k not in have or have[k] != _plain(v)}
        if changed:
            out[section] = changed
    if full["seed"] != base["seed"]:
        out["seed"] = full["seed"]
    return out


def _default_form(settings, section, key):
    """A field ``to_dict`` leaves out (at its default), as ``to_dict`` would write it."""
    value = getattr(getattr(settings, section), key)
    return dict(value) if key == "lr_scale" else value


def _plain(value):
    """A settings value as JSON reads it back (tuples as lists)."""
    return json.loads(json.dumps(value))


def _from_diff_against(stored, base):
    """The settings of ``base`` (a settings dict) with the stored fields over it."""
    if not isinstance(stored, dict) or set(stored) - {"model", "train", "mix", "seed"}:
        raise TypeError("settings must be an object of model, train, mix and seed")
    data = {"seed": stored.get("seed", base["seed"])}
    for section in ("model", "train", "mix"):
        changed = stored.get(section, {})
        if section == "mix" and changed is None:
            continue
        if not isinstance(changed, dict):
            raise TypeError(f"settings.{section} must be an object")
        data[section] = {**base[section], **changed}
    return Settings.from_dict(data)


def _encode_diff(diff):
    return json.dumps(diff, sort_keys=True, separators=(",", ":")).encode() if diff else b""


def compact_header(settings, model_sha256=None, model_resume=False, name=None, mtime=None,
                   long=None, version=COMPACT):  # fmt: skip
    """The bytes of a version-6 header up to its form: ``long`` None for the short form
    (the caller appends the input's length), else (block size, frame size, size or None),
    the long form, its header CRC included. The base is the one the settings and the model
    differ least from. ``version`` 7: the same header for a stream that may hold
    transformed segments."""
    if settings is None or settings.mix is None:
        raise ValueError("a version-6 stream holds mixing settings")
    if model_resume and model_sha256 is None:
        raise ValueError("model_resume needs a model")

    def cost(i):
        base, prior = V6_BASES[i]
        uses_prior = model_sha256 is not None and model_sha256 == prior and not model_resume
        diff = _encode_diff(_diff_against(settings, base))
        return len(diff) + (32 if model_sha256 is not None and not uses_prior else 0), i

    _, index = min(cost(i) for i in range(len(V6_BASES)))
    base, prior = V6_BASES[index]
    diff = _encode_diff(_diff_against(settings, base))
    flags, fields = 0, []
    if index:
        flags |= F_BASE
        fields.append(varint(index))
    if diff:
        flags |= F_DIFF
        fields += [varint(len(diff)), diff]
    if model_sha256 is not None:
        if model_sha256 == prior and not model_resume:
            flags |= F_PRIOR
        else:
            flags |= F_DIGEST | (F_RESUME if model_resume else 0)
            fields.append(bytes.fromhex(model_sha256))
    if name is not None:
        encoded = name.encode("utf-8")
        flags |= F_NAME
        fields += [varint(len(encoded)), encoded]
    if mtime is not None:
        flags |= F_MTIME
        fields.append(varint(mtime))
    if long is not None:
        block_size, frame_size, size = long
        flags |= F_LONG
        fields += [varint(block_size), varint(frame_size), varint(0 if size is None else size + 1)]
    header = SHORT_MAGIC + bytes([version, flags]) + b"".join(fields)
    if long is not None:
        header += _U32.pack(zlib.crc32(header))
    return header


def _read_compact(f, version):
    """The rest of a version-6 header after its magic and version byte."""
    rec = _Recording(f, SHORT_MAGIC + bytes([version]))
    (flags,) = _read_exact(rec, 1, "header")
    index = read_varint(rec, "base", len(V6_BASES)) if flags & F_BASE else 0
    base, prior = V6_BASES[index]
    settings = base_settings = None
    if flags & F_DIFF:
        raw = _read_exact(rec, read_varint(rec, "settings length", MAX_DIFF), "header")
        stored = loads_json(raw, "corrupt header", MAX_HEADER_DEPTH, MAX_DIFF, FormatError)
        try:
            settings = _from_diff_against(stored, base)
        except (TypeError, ConfigError) as exc:
            raise FormatError(f"corrupt header: {exc}") from None
        if settings.mix is None:
            raise FormatError("corrupt header: a version-6 stream without mixing settings")
    else:
        base_settings = Settings.from_dict(base)
    if flags & F_PRIOR and flags & (F_DIGEST | F_RESUME):
        raise FormatError("corrupt header: both the base's prior and a model")
    if flags & F_PRIOR and prior is None:
        raise FormatError(f"corrupt header: base {index} has no prior")
    if flags & F_RESUME and not flags & F_DIGEST:
        raise FormatError("corrupt header: resume without a model")
    sha = prior if flags & F_PRIOR else None
    if flags & F_DIGEST:
        sha = _read_exact(rec, 32, "header").hex()
    name = mtime = None
    if flags & F_NAME:
        raw = _read_exact(rec, read_varint(rec, "name length", MAX_NAME + 1), "header")
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            name = None
        if name is None or not valid_name(name):
            raise FormatError("corrupt header: stored file name")
    if flags & F_MTIME:
        mtime = read_varint(rec, "mtime", MAX_MTIME)
    header = {"version": version, "settings": settings or base_settings, "model_sha256": sha,
              "model_resume": bool(flags & F_RESUME), "name": name, "mtime": mtime}  # fmt: skip
    if flags & F_LONG:
        block_size = read_varint(rec, "block size", MAX_BLOCK + 1)
        frame_size = read_varint(rec, "frame size", MAX_FRAME + 1)
        size = read_varint(rec, "size", (1 << 63) + 1)
        if block_size < 1:
            raise FormatError("corrupt header: block size 0")
        (crc,) = _U32.unpack(_read_exact(f, _U32.size, "header"))
        if zlib.crc32(bytes(rec.data)) != crc:
            raise FormatError("corrupt header: checksum mismatch")
        return {**header, "short": False, "block_size": block_size, "frame_size": frame_size,
                "size": size - 1 if size else None}  # fmt: skip
    size = read_varint(rec, "size", MAX_BLOCK)
    transformed = None
    if version >= TRANSFORMS:
        stream_length = read_varint(rec, "transformed length", MAX_BLOCK)
        raw = _read_exact(rec, read_varint(rec, "record length", MAX_RECORD + 1), "header")
        if not size or not stream_length or not raw:
            raise FormatError("corrupt header: a version-7 short form without a transform")
        regions = transform_record.decode(raw, size, stream_length)
        transformed = Transformed(stream_length, regions)
    coded = size if transformed is None else transformed.stream_length
    # The block size is any larger than what is coded; the smallest one the writer uses.
    return {**header, "short": True, "block_size": max(DEFAULT_BLOCK, coded + 1), "frame_size": 0,
            "size": size, "coded_size": coded, "transformed": transformed,
            "check": zlib.crc32(bytes(rec.data))}  # fmt: skip


def short_settings(settings, n):
    """The settings a short-form stream of ``n`` bytes is coded with: the header's, with the
    context table, the history ring and the match table cut to what ``n`` bytes can fill
    (64 to 128 slots and 32 to 64 match entries a byte, a ring that never wraps), so
    that a small input neither allocates nor zeroes the preset's hundreds of MB. Both
    sides derive them from the size in the header; nothing of them is stored."""
    mix, bits = settings.mix, max(n, 1).bit_length()
    sized = dataclasses.replace(mix, ctx_log=min(mix.ctx_log, max(12, bits + 7)),
                                hist_log=min(mix.hist_log, max(12, bits + 1)),
                                match_log=min(mix.match_log, max(10, bits + 6)))  # fmt: skip
    return dataclasses.replace(settings, mix=sized)


def short_transform(stream_length, record):
    """What follows the original's length in a version-7 short form's header."""
    return varint(stream_length) + varint(len(record)) + record


def write_short(f, header, data, payload):
    """The short form's body after ``header`` (``compact_header`` and the varint length of
    ``data``, and in version 7 ``short_transform``): ``payload`` the coded bytes, or the
    coded data itself when stored; ``data`` the original."""
    f.write(header)
    f.write(varint(len(payload)))
    f.write(payload)
    f.write(_U32.pack(zlib.crc32(data) ^ zlib.crc32(header)))


class Skipped(bytes):
    """The raw bytes of a block the predictor skips (version 6)."""


def read_short(f, header):
    """``read_blocks`` of a short-form stream: its one block (none when empty), then its
    end."""
    n = header["coded_size"]
    m = read_varint(f, "payload length", n + 1)
    payload = _read_exact(f, m, "block payload")
    (check,) = _U32.unpack(_read_exact(f, _U32.size, "end"))
    if header["transformed"] is not None:
        yield header["size"], header["transformed"]
    if n:
        if m == n:
            yield n, Skipped(payload)
        else:
            words = -(-m // 4)
            if words > max_words(n):
                raise FormatError(f"corrupt block: {words} words for {n} bytes")
            padded = payload + bytes(4 * words - m)
            yield n, np.frombuffer(padded, dtype=">u4").astype(np.uint32)
    yield "end", (header["size"], check ^ header["check"])
