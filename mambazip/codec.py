"""Compress and decompress streams: the predictor drives the range coder, block by block
(``blocks``), over the whole stream or frame by frame (``frames``). Memory is bounded by
one block, or by the frames in flight.
"""

import io
import math
import time

from . import container, frames, kernel_cache, priors
from .blocks import CHUNK, Stats, check_end, decode_blocks, encode_blocks, read_up_to
from .errors import CheckpointError, ConfigError, RangeError
from .limits import check_memory
from .predict import Predictor, memory_bytes


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

    def peek(self, n=1):
        """Up to ``n`` bytes ahead (fewer only at the end of the stream); read() returns them
        again."""
        while len(self._ahead) < n and (more := self.f.read(n - len(self._ahead))):
            self._ahead += more
        return self._ahead[:n]


def compress_stream(src, dst, settings, block_size=container.DEFAULT_BLOCK, progress=None,
                    model=None, resume=False, per_byte=None, replay_chunk=None, name=None,
                    mtime=None, size=None, memlimit=None, trust=None,
                    stored_blocks=None, frame_size=None, jobs=1, scheduler=None,
                    prior=None, version=None):  # fmt: skip
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
    versions 1 and 2 bit for bit; False: never). ``frame_size``: cut the input into frames
    of this many bytes (version 4; 0: one frame), coded by up to ``jobs`` worker processes
    or on the Dask cluster at ``scheduler`` (an address); an empty input is the short empty
    stream of version 3. ``per_byte`` and ``trust`` need the unframed stream. ``prior``: a
    preset's prior (``priors``), the start when no ``model`` is given and the input looks
    like text (``priors.looks_like_text`` of its first block). Mixing settings write version 5
    (frames; an unframed stream is one frame of any length, coded here); ``version`` 3 or 4
    writes them as those versions did (all 255 nodes of the byte tree, one 256-symbol
    table: how the golden files of those versions are reproduced)."""
    if frame_size is not None and (per_byte is not None or trust is not None):
        raise ValueError("per_byte and trust need the unframed stream (frame_size None)")
    nibbles = version is None or version >= container.NIBBLES
    if nibbles and settings.mix is not None and frame_size is None:
        frame_size = 0  # version 5 is framed: one frame of any length, coded in this process
    start = time.perf_counter()
    _check_memory(settings, replay_chunk, memlimit)
    out = _Counting(dst)
    extras = None
    if stored_blocks or (name, mtime, size) != (None, None, None):
        extras = {"name": name, "mtime": mtime, "size": size}
    if name is not None and not container.valid_name(name):
        raise ConfigError(f"cannot store the file name {name!r}: not a plain file name")
    block = read_up_to(src, block_size)
    if model is None and prior is not None and priors.looks_like_text(block):
        model = prior
    sha = model.digest() if model else None
    short = (not block and sha is None
             and container.format_version(settings, extras, nibbles=False) == 3)  # fmt: skip
    framed = frame_size is not None and bool(block)
    # An empty input is never framed: a stream of no blocks, in the version that describes
    # its header (3 with mixing: it codes no byte, so how a byte would be coded is moot).
    version = container.write_header(out, None if short else settings, block_size,
                                     model_sha256=sha, model_resume=resume, extras=extras,
                                     frame_size=frame_size if framed else None,
                                     nibbles=nibbles and framed)  # fmt: skip
    stats = Stats()
    if framed:
        job = frames.FrameJob(settings, block_size, frame_size, model, resume, replay_chunk,
                                  version)  # fmt: skip
        jobs = frames.plan_jobs(job, jobs, memlimit, size)
        predictor = frames.compress_frames(src, out, job, block, jobs, scheduler, stats,
                                           progress, memlimit, per_byte, trust)  # fmt: skip
        if predictor is not None and stats.frames == 1:
            predictor.finish()
            stats.learner = predictor.learner
            stats.part_names = predictor.part_names
        stats.compressed_bytes = out.count
        stats.seconds = time.perf_counter() - start
        kernel_cache.mark(settings)
        return stats
    predictor = Predictor(settings, model, resume, replay_chunk)
    pending = [block]

    def read_block():
        return pending.pop() if pending else read_up_to(src, block_size)

    crc = encode_blocks(read_block, out, predictor, version, stored_blocks, stats, progress,
                        per_byte, trust)  # fmt: skip
    predictor.finish()
    container.write_end(out, stats.original_bytes, crc)
    stats.compressed_bytes = out.count
    stats.seconds = time.perf_counter() - start
    stats.learner = predictor.learner
    stats.part_names = predictor.part_names
    kernel_cache.mark(settings)
    return stats


def _check_memory(settings, replay_chunk, memlimit):
    check_memory(memory_bytes(settings, replay_chunk, CHUNK), memlimit, "the model and its tables")


def decompress_stream(src, dst, progress=None, model=None, resume=False, replay_chunk=None,
                      memlimit=None, on_header=None, jobs=1, scheduler=None):  # fmt: skip
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
        if header["version"] >= 4:
            stats.learner = _decompress_frames(src, dst, header, stats, progress, model, resume,
                                               replay_chunk, memlimit, jobs, scheduler)  # fmt: skip
        else:
            stats.learner = _decompress_one(src, dst, header, stats, progress, model, resume,
                                            replay_chunk, memlimit)  # fmt: skip
        if header["settings"] is not None:
            kernel_cache.mark(header["settings"])
        if not src.peek():
            break
        header = container.read_header(src, following=True)
    stats.compressed_bytes = src.count
    stats.seconds = time.perf_counter() - start
    return stats


def _decompress_one(src, dst, header, stats, progress, model, resume, replay_chunk, memlimit):
    """One stream after its header; returns the Mamba's learner where it ended (or None)."""
    model = _shipped_prior(header, model, memlimit)
    _check_model(header, model, resume)
    settings = header["settings"]
    predictor = None
    if settings is not None:
        _check_memory(settings, replay_chunk, memlimit)
        predictor = Predictor(settings, model, resume, replay_chunk)
    blocks = container.read_blocks(src, header["block_size"], header["version"])
    decoded, crc, length, expected_crc = decode_blocks(blocks, dst, predictor, progress)
    if predictor is not None:
        predictor.finish()
    check_end(decoded, crc, length, expected_crc)
    stats.original_bytes += decoded
    return predictor.learner if predictor is not None else None


def _decompress_frames(src, dst, header, stats, progress, model, resume, replay_chunk, memlimit,
                       jobs, scheduler):  # fmt: skip
    """One framed stream (version 4) after its header; returns the Mamba's learner where it
    ended when the stream is one frame decoded here (else None)."""
    job = _frame_job(header, model, resume, replay_chunk, memlimit)
    jobs = frames.plan_jobs(job, jobs, memlimit, header["size"])
    predictor = frames.decompress_frames(src, dst, header, job, jobs, scheduler, stats,
                                         progress, memlimit)  # fmt: skip
    if predictor is None:
        return None
    predictor.finish()
    return predictor.learner


def _frame_job(header, model, resume, replay_chunk, memlimit):
    """The job of a framed stream's frames, from its header, once its starting model (a
    shipped prior if none is given) and its memory are checked."""
    model = _shipped_prior(header, model, memlimit)
    _check_model(header, model, resume)
    _check_memory(header["settings"], replay_chunk, memlimit)
    return frames.FrameJob(header["settings"], header["block_size"], header["frame_size"],
                             model, resume, replay_chunk, header["version"])  # fmt: skip


def decompress_range(f, dst, start, end, progress=None, model=None, resume=False,
                     replay_chunk=None, memlimit=None, jobs=1, scheduler=None):  # fmt: skip
    """Write bytes [start, end) of the original of the seekable .mz file ``f`` to ``dst``
    (``end`` None: to the end). A single framed stream decodes only the frames that hold
    them, found in its seek index; any other file is decoded from its start. A range past
    the end of the original is refused (RangeError): before anything is written when the
    index is read, after the part that exists otherwise (the command line writes to a
    temporary file, removed on any error)."""
    begin = time.perf_counter()
    located = container.index_from_end(f)
    f.seek(0)
    if located is None:
        # Decoded whole (to check every checksum), kept only where the slice falls; whether
        # the slice fits is known only at the end (the command line's output is a temporary
        # file until it succeeds).
        stats = decompress_stream(f, frames.Slice(dst, start, math.inf if end is None else end),
                                  progress, model, resume, replay_chunk, memlimit, jobs=jobs,
                                  scheduler=scheduler)  # fmt: skip
        end = _check_range(start, end, stats.original_bytes)
    else:
        header, index = located
        end = _check_range(start, end, index.length)
        job = _frame_job(header, model, resume, replay_chunk, memlimit)
        wanted = len(index.overlapping(start, end))
        jobs = frames.plan_jobs(job, jobs, memlimit, wanted * job.frame_size)
        stats = Stats(name=header["name"], mtime=header["mtime"])
        stats.frames = frames.decode_range(f, dst, header, index, start, end, job, jobs,
                                           scheduler, progress, memlimit)  # fmt: skip
    stats.original_bytes = end - start
    stats.seconds = time.perf_counter() - begin
    return stats


def _check_range(start, end, length):
    end = length if end is None else end
    if not 0 <= start <= end:
        raise RangeError(f"range {start}:{end} is not START:END with 0 <= START <= END")
    if end > length:
        raise RangeError(f"range {start}:{end} is past the end of the original ({length} bytes)")
    return end


def _shipped_prior(header, model, memlimit):
    """``model``, or when none is given and the file was compressed from a prior that ships
    with mambazip (``priors``), that prior."""
    sha = header["model_sha256"]
    if model is None and not header["model_resume"] and priors.shipped(sha):
        return priors.load(sha, memlimit)
    return model


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
    if model is None and want_resume:
        raise CheckpointError(
            f"this file was compressed starting from a model (SHA-256 {want}); "
            f"give that checkpoint with {flag}"
        )
    if model is None:
        # A header names a prior and a user's --model alike, by SHA-256 only.
        raise CheckpointError(
            f"this file was compressed starting from the model with SHA-256 {want}, which "
            f"this installation does not ship: if it is a prior of another mambazip release, "
            f"install that release; if it is your checkpoint, give it with --model"
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
