"""The .mz file format, written and read as a stream.

    magic        8 bytes   b"\\x89MZIP\\r\\n\\x1a"
    version      u16 LE
    header_len   u32 LE    at most MAX_HEADER
    header       JSON      {"settings": {...}, "block_size": n, "model_sha256": null | hex,
                            "model_resume": bool (only with a model)}
    header_crc   u32 LE    CRC32 of the header bytes
    blocks       each: u32 n_bytes (1..block_size), u32 n_words, n_words u32 LE range-coder words
    end          u32 0, then u64 original length, u32 CRC32 of the original bytes

Version 2 adds truncated BPTT (``bptt`` in the training settings). Files that need no
version-2 feature are written as version 1, which older readers decode.

Each block restarts the range coder (the model runs on across blocks), so the encoder writes
as it goes and the decoder needs only one block in memory. Everything needed to start
decoding precedes the payload; the length and checksum follow it. All declared sizes are
checked against bounds before anything is allocated.
"""

import json
import struct
import zlib

import numpy as np

from .config import Settings
from .errors import ConfigError, FormatError, VersionError

MAGIC = b"\x89MZIP\r\n\x1a"
VERSION = 2  # the newest version this module reads and writes
MAX_HEADER = 1 << 20
MAX_BLOCK = 1 << 24
DEFAULT_BLOCK = 1 << 16
_U32 = struct.Struct("<I")
_PREFIX = struct.Struct("<8sHI")
_TRAILER = struct.Struct("<QI")


def max_words(n_bytes):
    """Bound on a block's coded size: every frequency is >= 2^-24, so a byte costs at most 24
    bits; the coder adds at most two words when it flushes."""
    return (24 * n_bytes + 31) // 32 + 2


def _read_exact(f, n, what):
    data = f.read(n)
    if len(data) != n:
        raise FormatError(f"truncated file: {what} is cut short")
    return data


def format_version(settings):
    """The oldest format version that can describe ``settings``."""
    return 2 if settings.train.bptt > 1 else 1


def write_header(f, settings, block_size=DEFAULT_BLOCK, model_sha256=None, model_resume=False):
    """``model_sha256``: the checkpoint compression started from; ``model_resume``: whether
    it started from the checkpoint's optimizer state too, not only its weights."""
    fields = {
        "settings": settings.to_dict(),
        "block_size": block_size,
        "model_sha256": model_sha256,
    }
    if model_sha256 is not None:
        # Only with a model, so that files without one keep their bytes.
        fields["model_resume"] = bool(model_resume)
    header = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    f.write(_PREFIX.pack(MAGIC, format_version(settings), len(header)))
    f.write(header)
    f.write(_U32.pack(zlib.crc32(header)))


def read_header(f):
    """Read and validate the header; returns its dict with "settings" as a ``Settings``."""
    prefix = f.read(_PREFIX.size)
    if len(prefix) < len(MAGIC) or prefix[: len(MAGIC)] != MAGIC:
        raise FormatError("not a mambazip file (bad magic bytes)")
    if len(prefix) != _PREFIX.size:
        raise FormatError("truncated file: header is cut short")
    _, version, header_len = _PREFIX.unpack(prefix)
    if version > VERSION:
        raise VersionError(
            f"file format version {version} is newer than this mambazip reads (version "
            f"{VERSION}); upgrade mambazip"
        )
    if version < 1:
        raise FormatError(f"corrupt header: format version {version}")
    if header_len > MAX_HEADER:
        raise FormatError(f"corrupt header: declared length {header_len} exceeds {MAX_HEADER}")
    raw = _read_exact(f, header_len, "header")
    (crc,) = _U32.unpack(_read_exact(f, _U32.size, "header"))
    if zlib.crc32(raw) != crc:
        raise FormatError("corrupt header: checksum mismatch")
    try:
        header = json.loads(raw)
        settings = Settings.from_dict(header["settings"])
        block_size = header["block_size"]
        sha = header.get("model_sha256")
        resume = header.get("model_resume", False)
    except (ValueError, KeyError, TypeError, ConfigError) as exc:
        raise FormatError(f"corrupt header: {exc}") from None
    if format_version(settings) > version:
        raise FormatError(f"corrupt header: settings need format version {version + 1}")
    if not isinstance(block_size, int) or not 1 <= block_size <= MAX_BLOCK:
        raise FormatError(f"corrupt header: block size {block_size!r}")
    if sha is not None and not (isinstance(sha, str) and len(sha) == 64):
        raise FormatError(f"corrupt header: model SHA-256 {sha!r}")
    if not isinstance(resume, bool):
        raise FormatError(f"corrupt header: model_resume {resume!r}")
    return {"version": version, "settings": settings, "block_size": block_size,
            "model_sha256": sha, "model_resume": resume}  # fmt: skip


def write_block(f, n_bytes, words):
    f.write(_U32.pack(n_bytes))
    f.write(_U32.pack(words.shape[0]))
    f.write(words.astype("<u4").tobytes())


def write_end(f, length, crc):
    f.write(_U32.pack(0))
    f.write(_TRAILER.pack(length, crc))


def read_blocks(f, block_size):
    """Yield (n_bytes, words) per block; at the end yield ("end", (length, crc))."""
    while True:
        (n_bytes,) = _U32.unpack(_read_exact(f, _U32.size, "block header"))
        if n_bytes == 0:
            yield "end", _TRAILER.unpack(_read_exact(f, _TRAILER.size, "trailer"))
            return
        if n_bytes > block_size:
            raise FormatError(f"corrupt block: {n_bytes} bytes declared, block size {block_size}")
        (n_words,) = _U32.unpack(_read_exact(f, _U32.size, "block header"))
        if n_words > max_words(n_bytes):
            raise FormatError(f"corrupt block: {n_words} words for {n_bytes} bytes")
        raw = _read_exact(f, 4 * n_words, "block payload")
        yield n_bytes, np.frombuffer(raw, dtype="<u4").astype(np.uint32)
