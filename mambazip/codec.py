"""Compress and decompress streams: the online learner drives the range coder, block by block.

Compression runs the model over a chunk in one compiled call and then codes the chunk's bytes
with the pdfs it produced; decompression must decode a byte before it can feed it, so it
calls the same compiled loop one byte at a time. Memory is bounded by one block.
"""

import io
import math
import time
import zlib
from dataclasses import dataclass, field

import numpy as np

from . import container
from .coder import Decoder, Encoder
from .errors import CheckpointError, ChecksumError, ConfigError, FormatError
from .kernels.step import FREQ_BITS
from .limits import check_memory
from .predict import Predictor, memory_bytes

CHUNK = 4096  # bytes per compiled call when compressing: pdfs of a chunk are 4 MB


@dataclass
class Stats:
    original_bytes: int = 0
    compressed_bytes: int = 0
    ideal_bits: float = 0.0  # sum of -log2 p(byte) under the float pdfs (compression only)
    seconds: float = 0.0
    learner: object = field(default=None, repr=False, compare=False)  # where the Mamba ended
    name: str = None  # decompression: the first stream's stored file name and mtime
    mtime: int = None
    part_names: tuple = ()  # compression: the predictor's parts, the columns of its trust

    @property
    def bits_per_byte(self):
        """Coded bits per original byte, header and framing included."""
        return 8.0 * self.compressed_bytes / max(self.original_bytes, 1)


class _Counting:
    """Wraps a file and counts the bytes that pass through it."""

    def __init__(self, f):
        self.f = f
        self.count = 0
        self._ahead = b""

    def write(self, data):
        self.count += len(data)
        self.f.write(data)

    def read(self, n):
        data = self._ahead + self.f.read(n - len(self._ahead)) if n else b""
        self._ahead = data[n:]
        data = data[:n]
        self.count += len(data)
        return data

    def peek(self):
        """A byte ahead, or b"" at the end of the stream; read() returns it again."""
        if not self._ahead:
            self._ahead = self.f.read(1)
        return self._ahead


def _read_up_to(f, n):
    """Read n bytes, or fewer only at end of stream (pipes return short reads)."""
    parts = []
    while n > 0:
        part = f.read(n)
        if not part:
            break
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


def compress_stream(src, dst, settings, block_size=container.DEFAULT_BLOCK, progress=None,
                    model=None, resume=False, per_byte=None, replay_chunk=None, name=None,
                    mtime=None, size=None, memlimit=None, trust=None,
                    stored_blocks=None):  # fmt: skip
    """Compress everything readable from ``src`` into ``dst``. ``progress(n_bytes, bits)`` is
    called after each chunk with that chunk's size and ideal code length. ``model``: a
    ``checkpoint.Checkpoint`` to start from (its weights; with ``resume`` also its optimizer
    state), recorded in the header by its SHA-256. ``per_byte``: a list that receives each
    chunk's float64 -log2 p per byte; ``trust``: a list that receives each chunk's
    (n, parts) shares of the mixer's trust (``Predictor.advance``). ``replay_chunk``: see
    ``OnlineLearner``; it bounds memory and changes no bit of the output. ``name``, ``mtime``,
    ``size``: the input file's name, modification time (whole seconds) and size, recorded
    in a version-3 header (``decompress_stream`` hands them back). ``memlimit``: bytes the
    predictor may allocate (default ``limits.DEFAULT_MEMLIMIT``). ``stored_blocks``: write a
    block raw when coding it would cost more, which needs version 3 (True: write version 3
    whatever the settings; None: store blocks only when the settings or the name, mtime or
    size make the file version 3 anyway, so that the Mamba alone reproduces the files of
    versions 1 and 2 bit for bit; False: never)."""
    start = time.perf_counter()
    _check_memory(settings, replay_chunk, memlimit)
    out = _Counting(dst)
    predictor = Predictor(settings, model, resume, replay_chunk)
    sha = model.digest() if model else None
    extras = None
    if stored_blocks or (name, mtime, size) != (None, None, None):
        extras = {"name": name, "mtime": mtime, "size": size}
    if name is not None and not container.valid_name(name):
        raise ConfigError(f"cannot store the file name {name!r}: not a plain file name")
    block = _read_up_to(src, block_size)
    short = not block and sha is None and container.format_version(settings, extras) == 3
    version = container.write_header(out, None if short else settings, block_size,
                                     model_sha256=sha, model_resume=resume,
                                     extras=extras)  # fmt: skip
    stats = Stats()
    crc = 0
    while block:
        data = np.frombuffer(block, dtype=np.uint8)
        encoder = Encoder()
        for i in range(0, data.shape[0], CHUNK):
            chunk = data[i : i + CHUNK]
            shares = None
            if trust is not None and predictor.mixer is not None:
                shares = np.zeros((chunk.shape[0], len(predictor.part_names)), np.float32)
            freqs, p = predictor.advance(chunk, trust=shares)
            encoder.encode(chunk, freqs)
            byte_bits = -np.log2(p)
            if per_byte is not None:
                per_byte.append(byte_bits)
            if shares is not None:
                trust.append(shares)
            bits = float(byte_bits.sum())
            stats.ideal_bits += bits
            if progress:
                progress(chunk.shape[0], bits)
        words = encoder.finish()
        if version >= 3 and stored_blocks is not False and 4 * words.shape[0] > len(block):
            container.write_stored_block(out, block)
        else:
            container.write_block(out, data.shape[0], words)
        crc = zlib.crc32(block, crc)
        stats.original_bytes += data.shape[0]
        block = _read_up_to(src, block_size)
    predictor.finish()
    container.write_end(out, stats.original_bytes, crc)
    stats.compressed_bytes = out.count
    stats.seconds = time.perf_counter() - start
    stats.learner = predictor.learner
    stats.part_names = predictor.part_names
    return stats


def _check_memory(settings, replay_chunk, memlimit):
    check_memory(memory_bytes(settings, replay_chunk, CHUNK), memlimit, "the model and its tables")


def decompress_stream(src, dst, progress=None, model=None, resume=False, replay_chunk=None,
                      memlimit=None, on_header=None):  # fmt: skip
    """Decompress a .mz stream from ``src`` into ``dst``, and any .mz streams that follow it
    (concatenated files decode as one output); verifies each stream's length and checksum.
    ``model``/``resume``: the starting checkpoint, as given to ``compress_stream``;
    ``replay_chunk`` as there. ``memlimit``: bytes a header may make the predictor allocate
    (checked before allocating). ``on_header(header)`` is called with the first stream's
    header (``container.read_header``) before decoding starts. The returned Stats carries
    the first stream's stored ``name`` and ``mtime`` (None when absent)."""
    start = time.perf_counter()
    src = _Counting(src)
    stats = Stats()
    header = container.read_header(src)
    stats.name, stats.mtime = header["name"], header["mtime"]
    if on_header:
        on_header(header)
    while True:
        stats.learner = _decompress_one(src, dst, header, stats, progress, model, resume,
                                        replay_chunk, memlimit)  # fmt: skip
        if not src.peek():
            break
        header = container.read_header(src, following=True)
    stats.compressed_bytes = src.count
    stats.seconds = time.perf_counter() - start
    return stats


def _decompress_one(src, dst, header, stats, progress, model, resume, replay_chunk, memlimit):
    """One stream after its header; returns the Mamba's learner where it ended (or None)."""
    _check_model(header, model, resume)
    settings = header["settings"]
    predictor = None
    if settings is not None:
        _check_memory(settings, replay_chunk, memlimit)
        predictor = Predictor(settings, model, resume, replay_chunk)
    decoded = 0
    crc = 0
    for n_bytes, payload in container.read_blocks(src, header["block_size"], header["version"]):
        if n_bytes == "end":
            length, expected_crc = payload
            break
        if isinstance(payload, bytes):
            block = payload
            for i in range(0, n_bytes, CHUNK):
                predictor.advance(np.frombuffer(block, dtype=np.uint8)[i : i + CHUNK])
                if progress:
                    progress(min(CHUNK, n_bytes - i), 0.0)
        else:
            block = _decode_block(predictor, payload, n_bytes, progress)
        dst.write(block)
        crc = zlib.crc32(block, crc)
        decoded += n_bytes
    if predictor is not None:
        predictor.finish()
    if decoded != length:
        raise FormatError(f"corrupt file: {decoded} bytes decoded, {length} declared")
    if crc != expected_crc:
        raise ChecksumError("checksum mismatch: the decoded data is corrupt")
    stats.original_bytes += decoded
    return predictor.learner if predictor is not None else None


def _decode_block(predictor, words, n_bytes, progress):
    """Decode one coded block. The range coder writes a word per 32 bits of information, so
    a block can hold at most 32 bits per word (plus the coder's 64-bit state) of code
    length: once the decoded bytes cost more than that, the words cannot be this block's,
    and decoding stops there rather than running on for the block's declared length. Where
    the predictor bounds the cost of every byte from below, a block declaring more bytes
    than its words can pay for is refused before decoding."""
    budget = 32.0 * (words.shape[0] + 2)
    if n_bytes * predictor.min_byte_bits > budget:
        raise FormatError("corrupt file: a block declares more bytes than its data can hold")
    decoder = Decoder(words)
    spent = 0.0
    out = np.empty(n_bytes, dtype=np.uint8)
    for i in range(n_bytes):
        freq = predictor.freq
        byte = decoder.decode(freq)
        spent += FREQ_BITS - math.log2(freq[byte])
        if spent > budget:
            raise FormatError("corrupt file: a block decodes to more than its data can hold")
        out[i] = byte
        predictor.advance_byte(byte)
        if progress and (i + 1) % CHUNK == 0:
            progress(CHUNK, 0.0)
    if progress and n_bytes % CHUNK:
        progress(n_bytes % CHUNK, 0.0)
    return out.tobytes()


def _check_model(header, model, resume):
    """The starting model must be the one the file was compressed from, given the same way."""
    want, want_resume = header["model_sha256"], header["model_resume"]
    flag = "--resume" if want_resume else "--model"
    if want is None:
        if model is not None:
            raise CheckpointError(
                "this file was compressed without a starting model; "
                "decompress it without --model or --resume"
            )
        return
    if model is None:
        raise CheckpointError(
            f"this file was compressed starting from a model (SHA-256 {want}); "
            f"give that checkpoint with {flag}"
        )
    if model.digest() != want:
        raise CheckpointError(
            f"wrong model: this file was compressed starting from SHA-256 {want}, "
            f"the given model has {model.digest()}"
        )
    if resume != want_resume:
        raise CheckpointError(
            f"this file was compressed with {flag} from this checkpoint; give it with {flag}"
        )


def compress(data, settings, block_size=container.DEFAULT_BLOCK):
    """bytes -> .mz bytes."""
    out = io.BytesIO()
    compress_stream(io.BytesIO(data), out, settings, block_size)
    return out.getvalue()


def decompress(blob):
    """.mz bytes -> the original bytes."""
    out = io.BytesIO()
    decompress_stream(io.BytesIO(blob), out)
    return out.getvalue()
