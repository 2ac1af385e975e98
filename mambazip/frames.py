"""Frames (format versions 4 and 5): the input cut into pieces that are coded independently, each
by a fresh predictor from the same start (the seeded init, or the starting checkpoint), so
that frames code on every core or a cluster and a slice of the original decodes alone.

Frames are cut every ``frame_size`` original bytes: every frame but the last is full, which
the decoder checks, so a frame's number gives its place in the original. A frame holds
what a version-3 stream holds after its header (blocks, each with a fresh range coder, then
its length and CRC32); the seek index after the last frame lists them (``container``).

Compression and decompression run through an executor (``workers``): frames are read in
order, at most ``2 * slots`` of them are in flight, and their results are written in
order, so memory stays bounded for input of any length (stdin included) and the output
does not depend on the executor. With one slot, frames are coded in this process as they
stream, a block at a time, whatever their size.
"""

import collections
import dataclasses
import io
import itertools
import zlib

import numpy as np

from . import container, workers
from .blocks import (
    CHUNK,
    AllNoise,
    Noise,
    Stats,
    check_end,
    decode_blocks,
    encode_stream,
    read_up_to,
)
from .config import Settings
from .errors import ChecksumError, FormatError
from .limits import DEFAULT_MEMLIMIT, check_memory
from .observe import SILENT
from .predict import Predictor, memory_bytes

DEFAULT_FRAME = 4 << 20


@dataclasses.dataclass(frozen=True)
class FrameJob:
    """All a worker needs to code or decode any frame of one stream."""

    settings: Settings
    block_size: int
    frame_size: int
    model: object = None  # a checkpoint.Checkpoint every frame starts from
    resume: bool = False
    replay_chunk: int = None
    version: int = container.VERSION  # of the stream: from 5, mixing codes nibbles
    stored_blocks: bool = True  # as plan.Layout has it; a framed stream stores blocks
    transforms: bool = False  # whether frames may hold transformed segments (version 7)
    memlimit: int = None  # bounds what one process decoding a frame holds (None: the default)

    @classmethod
    def of(cls, plan, version, frame_size):
        """The job of a stream of format ``version`` under ``plan``, its start resolved
        (``plan.Start``): frames of ``frame_size`` bytes (0: one of any length), which store
        the blocks they cannot gain on, or with ``frame_size`` None the one unframed stream
        of versions 1 to 3, which stores them as ``plan.layout`` says."""
        start, layout = plan.start, plan.layout
        stored = True if frame_size is not None else layout.stored_blocks
        transforms = layout.transforms and version >= container.TRANSFORMS
        return cls(start.settings, layout.block_size, frame_size or 0, start.model, start.resume,
                   plan.limits.replay_chunk, version, stored, transforms,
                   plan.limits.memlimit)  # fmt: skip

    @property
    def frame_buffer_bytes(self):
        """What the parent holds of one frame in flight: its original and coded bytes."""
        return self.frame_size + container.max_frame_bytes(self.frame_size, self.block_size)

    def check_segment(self, original, stream):
        """Refuse a transformed segment whose stream and original would not fit in the
        memory limit beside the model: a file declares both (up to container.MAX_STREAM and
        MAX_SEGMENT), and the decoder holds both before it can write a byte of it."""
        model = memory_bytes(self.settings, self.replay_chunk, CHUNK) if self.settings else 0
        check_memory(model + stream + original, self.memlimit,
                     "decoding a transformed segment beside the model")  # fmt: skip

    def predictor(self):
        return Predictor(self.settings, self.model, self.resume, self.replay_chunk,
                         self.version >= container.NIBBLES)  # fmt: skip

    def all_noise(self, data):
        """Whether every block of the frame ``data`` is skipped (version 6), as
        ``blocks.encode_stream`` finds them: such a frame needs no predictor."""
        if self.version < container.COMPACT:
            return False
        noise, view = Noise(), np.frombuffer(data, dtype=np.uint8)
        return all(noise.incompressible(view[i : i + self.block_size])
                   for i in range(0, len(data), self.block_size))  # fmt: skip

    def encode(self, data, noise=False):
        """One frame of ``data`` -> (its compressed bytes, ideal bits); ``noise``: the frame
        is known to be skipped throughout (``all_noise``)."""
        src, out = io.BytesIO(data), io.BytesIO()
        stats = Stats()
        encode_stream(self, lambda: src.read(self.block_size), out, stats,
                      noise=AllNoise() if noise else None)  # fmt: skip
        return out.getvalue(), stats.ideal_bits

    def decode_stream(self, blocks, dst, observer=None):
        """Decode one frame's ``blocks``, or an unframed stream's, into ``dst``; returns
        (length, CRC32, predictor: None for a stream without settings, which codes none).
        ``observer``: an ``observe.Observer`` (None: nobody watches)."""
        observer = observer or SILENT
        decoded, crc, length, expected_crc, predictor = decode_blocks(
            blocks, dst, self.predictor, observer, self.check_segment
        )
        check_end(decoded, crc, length, expected_crc)
        return decoded, crc, predictor

    def decode_frame(self, raw, version, number):
        """The original bytes of frame ``number`` (from 0) of a stream of format ``version``,
        ``raw`` as ``container.read_frame`` returns it."""
        out = io.BytesIO()
        header = {"block_size": self.block_size, "frame_size": self.frame_size,
                  "version": version}  # fmt: skip
        src = io.BytesIO(raw)
        _in_frame(number, self.frame_size, self.decode_stream,
                  container.frame_blocks(src, header), out)  # fmt: skip
        if src.tell() != len(raw):
            raise FormatError(f"corrupt index: {_where(number, self.frame_size)} ends before "
                              f"the size it lists")  # fmt: skip
        return out.getvalue()


def plan_jobs(job, jobs, memlimit=None, size=None):
    """How many frames ``job`` may code at once within ``memlimit``: each worker holds a
    predictor and a frame in and out, and the parent up to two frames per worker. One (the
    frames coded in this process as they stream) when two do not fit, when frames are
    unbounded (frame size 0), or when the input's ``size`` (if known) is one frame:
    starting workers would cost more than it saves."""
    limit = DEFAULT_MEMLIMIT if memlimit is None else memlimit
    if job.frame_size and size is not None:
        jobs = min(jobs, -(-size // job.frame_size))
    if jobs <= 1 or job.frame_size == 0:
        return 1
    per_job = memory_bytes(job.settings, job.replay_chunk) + 3 * job.frame_buffer_bytes
    return max(1, min(jobs, limit // per_job))


def _slots(job, plan, size):
    """(jobs, scheduler, memlimit) for coding ``size`` bytes of frames (None: unknown)."""
    memlimit = plan.limits.memlimit
    return plan_jobs(job, plan.execution.jobs, memlimit, size), plan.execution.scheduler, memlimit


def _executor(job, jobs, scheduler):
    """``scheduler``: None, an address, or a ``workers.Scheduler`` (address and timeout)."""
    if scheduler is not None:
        return workers.Cluster(job, scheduler)
    return workers.Processes(job, jobs)


def _here(frame_size, jobs, scheduler):
    """Whether frames are coded in this process as they stream, a block at a time: with one
    job, and for frames of any length (frame size 0), which no worker should buffer."""
    return frame_size == 0 or (jobs == 1 and scheduler is None)


def _in_order(job, jobs, scheduler, tasks, on_result, memlimit=None):
    """Run ``tasks`` ((method, args, context, here) from an iterator) on the executor of
    ``jobs`` and ``scheduler``, at most 2 * slots in flight (fewer if ``memlimit`` cannot hold
    that many frames in and out), and give each (result, context) to ``on_result`` in order.
    On any error or signal the executor is ended at once. A task marked ``here`` (a frame of
    noise alone, which needs no predictor) runs in this process, and so does a single task:
    workers are started at the first task that needs them, since starting them costs more
    than such a task."""
    tasks = iter(tasks)
    first = next(tasks, None)
    second = next(tasks, None) if first is not None else None
    if second is None:
        if first is not None:
            method, args, context, _ = first
            on_result(getattr(job, method)(*args), context)
        return
    pool, depth = None, 1
    pending = collections.deque()
    try:
        for method, args, context, here in itertools.chain((first, second), tasks):
            if here:
                pending.append((_Done(getattr(job, method)(*args)), context))
            else:
                if pool is None:
                    pool = _executor(job, jobs, scheduler)
                    limit = DEFAULT_MEMLIMIT if memlimit is None else memlimit
                    depth = max(1, min(2 * pool.slots, limit // job.frame_buffer_bytes))
                pending.append((pool.submit(method, *args), context))
            while len(pending) >= depth:
                handle, ctx = pending.popleft()
                on_result(handle.result(), ctx)
        while pending:
            handle, ctx = pending.popleft()
            on_result(handle.result(), ctx)
    except BaseException:
        if pool is not None:
            pool.abort()
        raise
    if pool is not None:
        pool.close()


class _Done:
    """The result of a task run here, handed on as a worker's is."""

    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


class _Reader:
    """Reads the input frame by frame (block by block, or a whole frame at once) and keeps
    the CRC32 of everything read."""

    def __init__(self, src, first, frame_size, block_size):
        self.src, self.ahead = src, first
        self.frame_size, self.block_size = frame_size, block_size
        self.crc = 0
        self.left = None  # bytes the current frame may still take; None: no bound

    def _take(self, n):
        if len(self.ahead) < n:
            self.ahead += read_up_to(self.src, n - len(self.ahead))
        data, self.ahead = self.ahead[:n], self.ahead[n:]
        self.crc = zlib.crc32(data, self.crc)
        return data

    def next_frame(self):
        """Whether another frame begins; its bytes come from ``block``."""
        if not self.ahead:
            self.ahead = read_up_to(self.src, self.block_size)
        self.left = self.frame_size or None
        return bool(self.ahead)

    def block(self):
        want = self.block_size if self.left is None else min(self.block_size, self.left)
        data = self._take(want) if want else b""
        if self.left is not None:
            self.left -= len(data)
        return data

    def frame(self):
        return self._take(self.frame_size)


def compress_frames(source, out, job, first, stats, plan, observer=SILENT, transform=None):
    """Code the frames of ``first`` (bytes already read) and the rest of ``source`` (a
    ``codec.Source``) into ``out`` (after the header), then the index; adds to ``stats``.
    Returns the predictor the last frame ended in when the frames were coded here (None
    from workers). Per-byte observers need the frames coded here. ``transform``: as for
    ``blocks.encode_stream``, for the frames coded here."""
    frame_size, (jobs, scheduler, memlimit) = job.frame_size, _slots(job, plan, source.size)
    reader = _Reader(source.file, first, frame_size, job.block_size)
    entries = []
    predictor = None
    if _here(frame_size, jobs, scheduler):
        while reader.next_frame():
            start, before = out.count, stats.original_bytes
            crc, predictor = encode_stream(job, reader.block, out, stats, observer,
                                           transform=transform)  # fmt: skip
            entries.append((out.count - start, stats.original_bytes - before, crc))
    else:
        if observer.per_byte:
            raise ValueError("a per-byte observer needs the frames coded in this process")

        def frames():
            while data := reader.frame():
                noise = job.all_noise(data)
                yield "encode", (data, noise), (len(data), zlib.crc32(data)), noise

        def write(result, context):
            packed, bits = result
            n, crc = context
            out.write(packed)
            stats.original_bytes += n
            stats.ideal_bits += bits
            entries.append((len(packed), n, crc))
            observer.progress(n, bits)

        _in_order(job, jobs, scheduler, frames(), write, memlimit)
    container.write_index(out, entries, stats.original_bytes, reader.crc)
    stats.frames += len(entries)
    return predictor


def _where(number, frame_size):
    """How an error names frame ``number`` (from 0): every frame before it is full."""
    return f"frame {number + 1} (from original byte {number * frame_size})"


def _in_frame(number, frame_size, call, *args):
    try:
        return call(*args)
    except (FormatError, ChecksumError) as exc:
        raise type(exc)(f"{_where(number, frame_size)}: {exc}") from None


class _Checked:
    """Writes through to ``f`` and keeps the CRC32 and length of what passed."""

    def __init__(self, f):
        self.f, self.crc, self.count = f, 0, 0

    def write(self, data):
        self.crc = zlib.crc32(data, self.crc)
        self.count += len(data)
        self.f.write(data)


def decompress_frames(src, dst, header, job, stats, plan, observer=SILENT):
    """Decode the frames of a version-4 or 5 stream from ``src`` (a ``codec._Counting`` after
    the header) into ``dst``, then check them against the index; adds to ``stats``. Returns
    the predictor the last frame ended in when the frames were decoded here."""
    frame_size, version = header["frame_size"], header["version"]
    jobs, scheduler, memlimit = _slots(job, plan, header["size"])
    packed_start = src.count
    out = _Checked(dst)
    entries = []
    predictor = None

    def full_before(number):
        # Frames are cut at frame_size: a frame after a short one is not this stream's.
        if number and (frame_size == 0 or entries[-1][1] != frame_size):
            raise FormatError(f"corrupt file: {_where(number, frame_size)} follows a frame "
                              f"shorter than the frame size")  # fmt: skip

    if _here(frame_size, jobs, scheduler):
        while src.peek(4) != _MARK:
            full_before(len(entries))
            start = src.count
            blocks = container.frame_blocks(src, header)
            n, crc, predictor = _in_frame(len(entries), frame_size, job.decode_stream,
                                          blocks, out, observer)  # fmt: skip
            entries.append((src.count - start, n, crc))
        src.read(len(_MARK))
    else:

        def frames():
            number = 0
            while True:
                raw = _in_frame(number, frame_size, container.read_frame, src,
                                job.block_size, frame_size)  # fmt: skip
                if raw is None:
                    return
                yield ("decode_frame", (raw, version, number), len(raw),
                       container.all_skipped(raw))  # fmt: skip
                number += 1

        def write(data, packed_size):
            full_before(len(entries))
            out.write(data)
            entries.append((packed_size, len(data), zlib.crc32(data)))
            observer.progress(len(data), 0.0)

        _in_order(job, jobs, scheduler, frames(), write, memlimit)
    index = container.read_index(src, len(entries), packed_start, frame_size)
    listed = [(fr.packed_size, fr.size, fr.crc) for fr in index.frames]
    if listed != entries or (index.length, index.crc) != (out.count, out.crc):
        raise FormatError("corrupt index: it does not match the frames")
    stats.original_bytes += out.count
    stats.frames += len(entries)
    return predictor if len(entries) == 1 else None


_MARK = b"\0\0\0\0"  # the index's mark where a frame's first block would start


class Slice:
    """Passes on to ``f`` only the bytes [start, end) of what is written through it."""

    def __init__(self, f, start, end, offset=0):
        self.f, self.start, self.end, self.at = f, start, end, offset

    def write(self, data):
        begin, self.at = self.at, self.at + len(data)
        low, high = max(self.start - begin, 0), min(self.end, self.at) - begin
        if low < high:
            self.f.write(data[low:high])


def decode_range(f, dst, header, index, span, job, plan, observer=SILENT):
    """Write the original's bytes [start, end) of ``span`` to ``dst``, decoding only the
    frames that hold them (``index``: ``container.index_from_end(f)``); returns how many
    that was."""
    frame_size, version = header["frame_size"], header["version"]
    start, end = span
    wanted = index.overlapping(start, end)
    jobs, scheduler, memlimit = _slots(job, plan, len(wanted) * frame_size)
    numbers = {fr: i for i, fr in enumerate(index.frames)}

    def check(fr, size, crc):
        if (size, crc) != (fr.size, fr.crc):
            raise FormatError(f"corrupt index: {_where(numbers[fr], frame_size)} does not "
                              f"match it")  # fmt: skip
        observer.progress(fr.size, 0.0)

    if _here(frame_size, jobs, scheduler):
        for fr in wanted:
            f.seek(fr.packed_offset)
            out = Slice(dst, start, end, fr.offset)
            blocks = container.frame_blocks(f, header)
            size, crc, _ = _in_frame(numbers[fr], frame_size, job.decode_stream, blocks, out)
            if f.tell() != fr.packed_offset + fr.packed_size:
                raise FormatError(f"corrupt index: {_where(numbers[fr], frame_size)} ends "
                                  f"before the size it lists")  # fmt: skip
            check(fr, size, crc)
        return len(wanted)

    def frames():
        for fr in wanted:
            f.seek(fr.packed_offset)
            raw = f.read(fr.packed_size)
            if len(raw) != fr.packed_size:
                raise FormatError("truncated file: a frame is cut short")
            yield "decode_frame", (raw, version, numbers[fr]), fr, container.all_skipped(raw)

    def write(data, fr):
        check(fr, len(data), zlib.crc32(data))
        Slice(dst, start, end, fr.offset).write(data)

    _in_order(job, jobs, scheduler, frames(), write, memlimit)
    return len(wanted)
