"""Compress and decompress streams: the online learner drives the range coder, block by block.

Compression runs the model over a chunk in one compiled call and then codes the chunk's bytes
with the pdfs it produced; decompression must decode a byte before it can feed it, so it
calls the same compiled loop one byte at a time. Memory is bounded by one block.
"""

import io
import time
import zlib
from dataclasses import dataclass, field

import numpy as np

from . import container
from .coder import Decoder, Encoder
from .errors import CheckpointError, ChecksumError, FormatError
from .model import OnlineLearner

CHUNK = 4096  # bytes per compiled call when compressing: pdfs of a chunk are 4 MB


@dataclass
class Stats:
    original_bytes: int = 0
    compressed_bytes: int = 0
    ideal_bits: float = 0.0  # sum of -log2 p(byte) under the float pdfs (compression only)
    seconds: float = 0.0
    learner: OnlineLearner = field(default=None, repr=False, compare=False)  # where it ended

    @property
    def bits_per_byte(self):
        """Coded bits per original byte, header and framing included."""
        return 8.0 * self.compressed_bytes / max(self.original_bytes, 1)


class _Counting:
    """Wraps a file and counts the bytes that pass through it."""

    def __init__(self, f):
        self.f = f
        self.count = 0

    def write(self, data):
        self.count += len(data)
        self.f.write(data)

    def read(self, n):
        data = self.f.read(n)
        self.count += len(data)
        return data


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
                    model=None, resume=False, per_byte=None, replay_chunk=None):  # fmt: skip
    """Compress everything readable from ``src`` into ``dst``. ``progress(n_bytes, bits)`` is
    called after each chunk with that chunk's size and ideal code length. ``model``: a
    ``checkpoint.Checkpoint`` to start from (its weights; with ``resume`` also its optimizer
    state), recorded in the header by its SHA-256. ``per_byte``: a list that receives each
    chunk's float64 -log2 p per byte. ``replay_chunk``: see ``OnlineLearner``; it bounds
    memory and changes no bit of the output."""
    start = time.perf_counter()
    out = _Counting(dst)
    learner = _learner(settings, model, resume, replay_chunk)
    sha = model.digest() if model else None
    container.write_header(out, settings, block_size, model_sha256=sha, model_resume=resume)
    stats = Stats()
    crc = 0
    while block := _read_up_to(src, block_size):
        data = np.frombuffer(block, dtype=np.uint8)
        encoder = Encoder()
        for i in range(0, data.shape[0], CHUNK):
            chunk = data[i : i + CHUNK]
            freqs, p = learner.advance(chunk)
            encoder.encode(chunk, freqs)
            byte_bits = -np.log2(p.astype(np.float64))
            if per_byte is not None:
                per_byte.append(byte_bits)
            bits = float(byte_bits.sum())
            stats.ideal_bits += bits
            if progress:
                progress(chunk.shape[0], bits)
        container.write_block(out, data.shape[0], encoder.finish())
        crc = zlib.crc32(block, crc)
        stats.original_bytes += data.shape[0]
    learner.finish()
    container.write_end(out, stats.original_bytes, crc)
    stats.compressed_bytes = out.count
    stats.seconds = time.perf_counter() - start
    stats.learner = learner
    return stats


def _learner(settings, model, resume, replay_chunk):
    if model:
        return model.learner(settings, resume, replay_chunk)
    return OnlineLearner(settings, replay_chunk=replay_chunk)


def decompress_stream(src, dst, progress=None, model=None, resume=False, replay_chunk=None):
    """Decompress a .mz stream from ``src`` into ``dst``; verifies length and checksum.
    ``model``/``resume``: the starting checkpoint, as given to ``compress_stream``;
    ``replay_chunk`` as there."""
    start = time.perf_counter()
    src = _Counting(src)
    header = container.read_header(src)
    _check_model(header, model, resume)
    settings = header["settings"]
    learner = _learner(settings, model, resume, replay_chunk)
    stats = Stats()
    crc = 0
    for n_bytes, words in container.read_blocks(src, header["block_size"]):
        if n_bytes == "end":
            length, expected_crc = words
            break
        decoder = Decoder(words)
        out = np.empty(n_bytes, dtype=np.uint8)
        for i in range(n_bytes):
            byte = decoder.decode(learner.freq)
            out[i] = byte
            learner.advance_byte(byte)
            if progress and (i + 1) % CHUNK == 0:
                progress(CHUNK, 0.0)
        if progress and n_bytes % CHUNK:
            progress(n_bytes % CHUNK, 0.0)
        block = out.tobytes()
        dst.write(block)
        crc = zlib.crc32(block, crc)
        stats.original_bytes += n_bytes
    learner.finish()
    if stats.original_bytes != length:
        raise FormatError(f"corrupt file: {stats.original_bytes} bytes decoded, {length} declared")
    if crc != expected_crc:
        raise ChecksumError("checksum mismatch: the decoded data is corrupt")
    if src.read(1):
        raise FormatError("corrupt file: unexpected data after the end of the stream")
    stats.compressed_bytes = src.count
    stats.seconds = time.perf_counter() - start
    stats.learner = learner
    return stats


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
