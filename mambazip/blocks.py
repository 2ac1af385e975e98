"""Runs of blocks coded by one predictor: the loop a stream (versions 1 to 3) and each frame
of a framed stream (versions 4 and 5) share. Each block restarts the range coder while the
predictor runs on.

Compression runs the predictor over a chunk in one compiled call and then codes the chunk's
bytes with the tables it produced; decompression must decode a byte before it can feed it,
so it calls the same compiled loop one byte at a time. With nibbles (format 5) a byte is
two symbols of 16, its high nibble then its low nibble, and with mix.bits 8 symbols of 2:
the decoder decodes a byte in one compiled call (the low nibble's table needs the high
nibble, a bit's node the bits before it).
"""

import math
import zlib
from dataclasses import dataclass, field

import numpy as np

from . import container, transforms
from .coder import Decoder, Encoder, shortest_payload
from .errors import ChecksumError, FormatError
from .observe import SILENT, InOriginalBytes

CHUNK = 4096  # bytes per compiled call when compressing: pdfs of a chunk are 4 MB


@dataclass
class Stats:
    original_bytes: int = 0
    compressed_bytes: int = 0
    ideal_bits: float = 0.0  # sum of -log2 p(byte) under the float pdfs (compression only)
    seconds: float = 0.0
    # The Mamba's learner as coding left it, its unfinished segment not yet learned.
    open_learner: object = field(default=None, repr=False, compare=False)
    name: str = None  # decompression: the first stream's stored file name and mtime
    mtime: int = None
    part_names: tuple = ()  # compression: the predictor's parts, the columns of its trust
    frames: int = 0  # version 4: the frames coded or decoded

    @property
    def learner(self):
        """The Mamba's online learner as the stream ended, having learned every byte (None
        when no Mamba coded). The unfinished segment is learned here, when the learner is
        asked for (``--save-model``), not at the end of every stream: a run that saves no
        model never loads that update's compiled code (12 MB of a 1 KB input's 244 MB peak
        RSS). ``OnlineLearner.finish`` learns nothing the second time."""
        if self.open_learner is not None:
            self.open_learner.finish()
        return self.open_learner

    @property
    def bits_per_byte(self):
        """Coded bits per original byte, header and framing included."""
        return 8.0 * self.compressed_bytes / max(self.original_bytes, 1)


def read_up_to(f, n):
    """Read n bytes, or fewer only at end of stream (pipes return short reads)."""
    parts = []
    while n > 0:
        part = f.read(n)
        if not part:
            break
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


SEGMENT = 8 << 20  # original bytes a transformed segment holds (and up to a block more)


def encode_stream(job, read_block, out, stats, observer=SILENT, noise=None, transform=None):
    """Code one frame, or an unframed stream, of ``job`` (a ``frames.FrameJob``: its
    predictor, format version and whether blocks may be stored) from the blocks
    ``read_block()`` returns until it returns b"", each with a fresh range coder, into
    ``out``, then its end (length and CRC32); adds to ``stats``; returns (the CRC32, the
    predictor: None when every block was skipped, since it is made at the first block it
    codes). From version 6 a block ``Noise`` finds incompressible is skipped: stored, and
    neither coded nor learned; ``noise``: a ``Noise`` that already knows every block is.
    With ``job.transforms`` (version 7) the blocks are taken a segment (``SEGMENT``
    bytes) at a time and each segment a transform changes is written as its head and the
    blocks of its stream; ``transform``: what ``transforms.forward`` gives for a segment
    (a memo of it; None: ``forward`` itself)."""
    coder = _BlockCoder(job, out, stats, observer, noise)
    before, crc = stats.original_bytes, 0
    if job.transforms:
        for segment, pieces in _segments(read_block):
            stream, regions = (transform or _forward)(segment)
            if regions:
                # A run of skipped blocks ends where the segment's blocks begin and end.
                coder.flush()
                container.write_transform(out, len(segment), len(stream),
                                          transforms.record.encode(regions))  # fmt: skip
                pieces = [stream[i : i + job.block_size]
                          for i in range(0, len(stream), job.block_size)]  # fmt: skip
                coder.observer = InOriginalBytes(observer, len(segment), len(stream))
            for piece in pieces:
                coder.code(piece)
            if regions:
                coder.flush()
                coder.observer = observer
            crc = zlib.crc32(segment, crc)
            stats.original_bytes += len(segment)
    else:
        while block := read_block():
            coder.code(block)
            crc = zlib.crc32(block, crc)
            stats.original_bytes += len(block)
    coder.flush()
    container.write_end(out, stats.original_bytes - before, crc)
    if coder.predictor is not None:
        coder.predictor.settle()
    return crc, coder.predictor


def _forward(segment):
    return transforms.forward(segment)


def _segments(read_block):
    """(segment, its blocks) of the blocks ``read_block()`` returns: blocks joined until
    they hold SEGMENT bytes or the end comes."""
    while block := read_block():
        pieces, size = [block], len(block)
        while size < SEGMENT and (block := read_block()):
            pieces.append(block)
            size += len(block)
        yield b"".join(pieces), pieces


class _BlockCoder:
    """Writes blocks of one frame: each coded by the predictor (made at the first block that
    needs it) or stored, or from version 6 skipped when ``Noise`` finds it incompressible;
    a run of skipped blocks is written as one (up to MAX_BLOCK bytes) at ``flush``."""

    def __init__(self, job, out, stats, observer, noise):
        self.job, self.out, self.stats, self.observer = job, out, stats, observer
        self.noise = Noise() if noise is None and job.version >= container.COMPACT else noise
        self.predictor = None
        self.skipped = []

    def code(self, block):
        data = np.frombuffer(block, dtype=np.uint8)
        if self.noise is not None and self.noise.incompressible(data):
            if sum(map(len, self.skipped)) + len(block) > container.MAX_BLOCK:
                self.flush()
            self.skipped.append(block)
            self.observer.progress(data.shape[0], 8.0 * data.shape[0])
            return
        self.flush()
        self.predictor = self.predictor or self.job.predictor()
        words = _code(self.predictor, data, self.stats, self.observer)
        stored = self.job.version >= 3 and self.job.stored_blocks is not False
        if stored and 4 * words.shape[0] > len(block):
            container.write_stored_block(self.out, block)
        else:
            container.write_block(self.out, data.shape[0], words)

    def flush(self):
        if self.skipped:
            container.write_skipped_block(self.out, b"".join(self.skipped))
            self.skipped.clear()


def encode_short(job, block, stats, observer=SILENT):
    """The short form's payload of ``block``, a whole input (version 6): the range coder's
    shortest words, or the bytes themselves when those are no longer or ``Noise`` finds
    them incompressible; returns (payload, the predictor, or None when none coded)."""
    data = np.frombuffer(block, dtype=np.uint8)
    stats.original_bytes += data.shape[0]
    if not block or Noise().incompressible(data):
        observer.progress(data.shape[0], 8.0 * data.shape[0])
        return block, None
    predictor = job.predictor()
    tables = []
    words = _code(predictor, data, stats, observer, tables)
    symbols = np.concatenate([t[0] for t in tables])
    payload = shortest_payload(words, symbols, np.concatenate([t[1] for t in tables]))
    predictor.settle()
    return (payload if len(payload) < len(block) else block), predictor


def _code(predictor, data, stats, observer, tables=None):
    """The range coder's words of one block, ``data`` (n,) uint8, coded by ``predictor``;
    ``tables``: a list that receives each chunk's (symbols, frequency rows)."""
    encoder = Encoder()
    for i in range(0, data.shape[0], CHUNK):
        chunk = data[i : i + CHUNK]
        shares = None
        if observer.trust and predictor.context is not None:
            shares = np.zeros((chunk.shape[0], len(predictor.part_names)), np.float32)
        freqs, p = predictor.advance(chunk, trust=shares, then=data[i + CHUNK : i + 2 * CHUNK])
        if predictor.bits:
            symbols, rows = np.unpackbits(chunk), freqs.reshape(-1, 2)
        elif predictor.nibbles:
            symbols, rows = nibbles_of(chunk), freqs.reshape(-1, 16)
        else:
            symbols, rows = chunk, freqs
        encoder.encode(symbols, rows)
        if tables is not None:
            tables.append((symbols.copy(), rows.copy()))
        byte_bits = -np.log2(p)
        if observer.per_byte:
            observer.coded(byte_bits, shares)
        bits = float(byte_bits.sum())
        stats.ideal_bits += bits
        observer.progress(chunk.shape[0], bits)
    return encoder.finish()


class Noise:
    """The cheap, deterministic estimate that decides whether a block (of version 6) is
    skipped: when its bytes, the differences of neighbours and its byte pairs are each as
    uniform as random bytes are (Pearson's chi-square within six standard deviations of its
    mean), no order-0, delta or order-1 model can gain on it; and when none of its
    sampled 8-byte strings was seen before in the frame or the block, neither can the match
    model. A block shorter than NOISE_MIN is never skipped (too few bytes to tell)."""

    SLOTS = 1 << 18  # remembered strings: a fixed table, older ones overwritten

    def __init__(self):
        self.seen = np.zeros(self.SLOTS, np.uint64)

    def incompressible(self, data):
        repeats = self._remember(data)
        if data.shape[0] < NOISE_MIN or repeats:
            return False
        # Each byte pair folded into 12 bits (16 pairs a value, for independent uniform
        # bytes each equally often): a 64 KB table costs five times as much.
        pairs = (data[:-1].astype(np.uint16) << 4) ^ data[1:]
        return (_uniform(np.bincount(data, minlength=256))
                and _uniform(np.bincount(data[1:] - data[:-1], minlength=256))
                and _uniform(np.bincount(pairs, minlength=1 << 12)))  # fmt: skip

    def _remember(self, data):
        """Whether an 8-byte string after a zero byte (one in 256 places of random data)
        repeats one seen before; remembers them all."""
        at = np.flatnonzero(data[:-8] == 0)[:MAX_ANCHORS]
        if not at.shape[0]:
            return False
        keys = np.zeros(at.shape[0], np.uint64)
        for k in range(1, 9):
            keys = (keys << np.uint64(8)) | data[at + k].astype(np.uint64)
        keys |= np.uint64(1)  # never 0, the empty slot
        slots = (keys * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - 18)
        repeats = bool((self.seen[slots] == keys).any()) or np.unique(keys).shape[0] < keys.shape[0]
        self.seen[slots] = keys
        return repeats


class AllNoise(Noise):
    """The estimate of a frame already found to be noise throughout (``frames.FrameJob``)."""

    def __init__(self):
        pass

    def incompressible(self, data):
        return True


NOISE_MIN = 4096
MAX_ANCHORS = 4096  # strings sampled per block: random bytes have 256 per 64 KB


def _uniform(counts):
    """Pearson's chi-square of ``counts`` against equal counts, sum((c - n/k)^2 / (n/k)) =
    k sum(c^2) / n - n, within six standard deviations (sqrt(2 (k - 1))) of its mean."""
    k, n = counts.shape[0], int(counts.sum())
    chi2 = k * int(np.dot(counts, counts)) / n - n
    return chi2 <= (k - 1) + 6.0 * math.sqrt(2.0 * (k - 1))


def nibbles_of(data):
    """(2n,) uint8: each byte of data (n,) uint8 as its high nibble, then its low nibble."""
    out = np.empty(2 * data.shape[0], np.uint8)
    out[0::2] = data >> 4
    out[1::2] = data & 15
    return out


def decode_blocks(blocks, dst, make_predictor, observer=SILENT, check_segment=None):
    """Decode the (n_bytes, payload) of ``blocks`` (``container.read_blocks``) into ``dst``
    up to their end, with the predictor ``make_predictor()`` makes at the first block that
    needs it; returns (bytes decoded, their CRC32, declared length, declared CRC32, the
    predictor or None). ``check_segment(original, stream)`` raises if a transformed
    segment of those lengths may not be held (``FrameJob.check_segment``)."""
    decoded = 0
    crc = 0
    predictor = None
    segment = None  # a transformed segment: its original length, head, stream so far
    watch = observer  # in a segment: its progress in original bytes
    for n_bytes, payload in blocks:
        if n_bytes == "end":
            length, expected_crc = payload
            break
        if isinstance(payload, container.Transformed):
            if check_segment is not None:
                check_segment(n_bytes, payload.stream_length)
            segment = (n_bytes, payload, bytearray())
            watch = InOriginalBytes(observer, n_bytes, payload.stream_length)
            continue
        if isinstance(payload, container.Skipped):
            block = bytes(payload)
            watch.progress(n_bytes, 0.0)
        elif isinstance(payload, bytes):
            predictor = predictor or make_predictor()
            block = payload
            stored = np.frombuffer(block, dtype=np.uint8)
            for i in range(0, n_bytes, CHUNK):
                predictor.advance(stored[i : i + CHUNK], then=stored[i + CHUNK : i + 2 * CHUNK])
                watch.progress(min(CHUNK, n_bytes - i), 0.0)
        else:
            predictor = predictor or make_predictor()
            block = _decode_block(predictor, payload, n_bytes, watch)
        if segment is not None:
            # The blocks of a transformed segment (read_blocks checks that they end where
            # its stream does), gathered in one buffer: the original once it is whole.
            original_length, head, stream = segment
            stream += block
            if len(stream) < head.stream_length:
                continue
            block = transforms.inverse(stream, head.regions, original_length)
            n_bytes, segment, watch = original_length, None, observer
        dst.write(block)
        crc = zlib.crc32(block, crc)
        decoded += n_bytes
    if predictor is not None:
        predictor.settle()
    return decoded, crc, length, expected_crc, predictor


def check_end(decoded, crc, length, expected_crc):
    if decoded != length:
        raise FormatError(f"corrupt file: {decoded} bytes decoded, {length} declared")
    if crc != expected_crc:
        raise ChecksumError("checksum mismatch: the decoded data is corrupt")


def _decode_block(predictor, words, n_bytes, observer):
    """Decode one coded block. The range coder writes a word per 32 bits of information, so
    a block can hold at most 32 bits per word (plus the coder's 64-bit state) of code
    length: once the decoded bytes cost more than that, the words cannot be this block's,
    and decoding stops there rather than running on for the block's declared length. Where
    the predictor bounds the cost of every byte from below, a block declaring more bytes
    than its words can pay for is refused before decoding."""
    budget = 32.0 * (words.shape[0] + 2)
    if n_bytes * predictor.min_byte_bits > budget:
        raise FormatError("corrupt file: a block declares more bytes than its data can hold")
    decoder = Decoder(words, budget)
    if predictor.nibbles:
        return _decode_nibbles(predictor, decoder, n_bytes, observer)
    out = np.empty(n_bytes, dtype=np.uint8)
    for i in range(n_bytes):
        byte = decoder.decode(predictor.freq)
        out[i] = byte
        predictor.advance_byte(byte)
        if (i + 1) % CHUNK == 0:
            observer.progress(CHUNK, 0.0)
    if n_bytes % CHUNK:
        observer.progress(n_bytes % CHUNK, 0.0)
    return out.tobytes()


def _decode_nibbles(predictor, decoder, n_bytes, observer):
    """_decode_block's loop for format 5, a chunk at a time: the predictor decodes each
    byte's two nibbles (or its 8 bits) inside its compiled loop (Predictor.decode_nibbles)."""
    out = np.empty(n_bytes, dtype=np.uint8)
    for start in range(0, n_bytes, CHUNK):
        stop = min(start + CHUNK, n_bytes)
        decoder.check(predictor.decode_nibbles(decoder, out, start, stop))
        observer.progress(stop - start, 0.0)
    return out.tobytes()
