"""Compress and decompress streams: ``encode``, ``decode`` and ``decode_range`` take
``(source, destination, plan, observer)``; the plan (``plan.Plan``) is resolved before, the
observer (``observe.Observer``) hears how it goes. The predictor drives the range coder, block
by block (``blocks``), frame by frame (``frames``); an unframed stream (versions 1 to 3) is
coded as one frame is. Memory is bounded by one block, or by the frames in flight.

``compress_stream``, ``decompress_stream`` and ``decompress_range`` are the library's calls:
they take the plan's fields by name and build it.
"""

import dataclasses
import io
import math
import time

from . import container, frames, kernel_cache, transforms
from .blocks import CHUNK, SEGMENT, Stats, encode_short, encode_stream, read_up_to
from .errors import ConfigError, RangeError
from .limits import check_memory
from .observe import SILENT, InOriginalBytes, Report
from .plan import for_header, from_options
from .predict import memory_bytes


@dataclasses.dataclass(frozen=True)
class Source:
    """An input to compress and what is known of it: its ``name``, ``mtime`` (whole seconds)
    and ``size``, recorded in a version-3 header (``decode`` hands the first two back)."""

    file: object
    name: str = None
    mtime: int = None
    size: int = None


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


def encode(source, destination, plan, observer=SILENT):
    """Compress everything readable from ``source`` (a ``Source``, or a file) into
    ``destination``; returns ``Stats``. Mixing settings write version 6 (frames; without a
    frame size, one frame of any length, coded here), or 7 with ``plan.layout.transforms``
    (a short input only when a transform changes it); the Mamba alone writes what it wrote
    before frames unless ``plan.execution.frame_size`` asks for them. An empty input is
    never framed: a stream of no blocks, in the version that describes its header (3 with
    mixing: it codes no byte, so how a byte would be coded is moot)."""
    if not isinstance(source, Source):
        source = Source(source)
    began = time.perf_counter()
    settings, layout = plan.start.settings, plan.layout
    nibbles = layout.version is None or layout.version >= container.NIBBLES
    frame_size = plan.execution.frame_size
    if nibbles and settings.mix is not None and frame_size is None:
        frame_size = 0
    _check_memory(settings, plan.limits)
    out = _Counting(destination)
    extras = None
    if layout.stored_blocks or (source.name, source.mtime, source.size) != (None, None, None):
        extras = {"name": source.name, "mtime": source.mtime, "size": source.size}
    if source.name is not None and not container.valid_name(source.name):
        raise ConfigError(f"cannot store the file name {source.name!r}: not a plain file name")
    block = read_up_to(source.file, layout.block_size)
    if block and not nibbles and settings.mix is not None and settings.mix.bits:
        raise ConfigError(f"mix.bits needs format version 5 or later, not {layout.version}")
    newest = layout.version or container.VERSION
    compact = settings.mix is not None and newest >= container.COMPACT
    memo = None
    if compact and layout.transforms and newest >= container.TRANSFORMS:
        block += read_up_to(source.file, _first_segment(layout.block_size, frame_size, block))
        memo = _Transformed(block)
    # The prior is for text: what the predictor will code, the transformed data.
    looked_at = block if memo is None else memo.stream[: layout.block_size]
    plan = dataclasses.replace(plan, start=plan.start.for_input(looked_at))
    if plan.start.settings is not settings:  # a prior's own recipe
        settings = plan.start.settings
        _check_memory(settings, plan.limits)
    sha = _digest(plan)
    stats = Stats()
    short = (not block and sha is None
             and container.format_version(settings, extras, nibbles=False) == 3)  # fmt: skip
    framed = frame_size is not None and bool(block)
    if compact and len(block) < layout.block_size and len(block) <= (frame_size or len(block)):
        # The whole input is this block, within one frame: the short form, with no block
        # headers, end or index.
        predictor = _encode_short_form(source, out, block, memo, plan, stats, observer)
    elif compact:
        version = container.COMPACT if memo is None else container.TRANSFORMS
        out.write(container.compact_header(settings, sha, plan.start.resume, source.name,
                                           source.mtime, (layout.block_size, frame_size,
                                                          source.size), version))  # fmt: skip
        job = frames.FrameJob.of(plan, version, frame_size)
        predictor = frames.compress_frames(source, out, job, block, stats, plan, observer,
                                           transform=memo)  # fmt: skip
    elif framed:
        version = container.write_header(out, settings, layout.block_size, model_sha256=sha,
                                         model_resume=plan.start.resume, extras=extras,
                                         frame_size=frame_size, nibbles=nibbles)  # fmt: skip
        job = frames.FrameJob.of(plan, version, frame_size)
        predictor = frames.compress_frames(source, out, job, block, stats, plan, observer)
    else:
        version = container.write_header(out, None if short else _bytewise(settings),
                                         layout.block_size, model_sha256=sha,
                                         model_resume=plan.start.resume, extras=extras,
                                         nibbles=False)  # fmt: skip
        job = frames.FrameJob.of(plan, version, None)
        pending = [block]
        _, predictor = encode_stream(
            job, lambda: pending.pop() if pending else read_up_to(source.file, layout.block_size),
            out, stats, observer)  # fmt: skip
    if predictor is not None and (not framed or stats.frames <= 1):
        stats.open_learner = predictor.learner
        stats.part_names = predictor.part_names
    stats.compressed_bytes = out.count
    stats.seconds = time.perf_counter() - began
    if stats.original_bytes:
        kernel_cache.mark(settings)
    return stats


def _encode_short_form(source, out, block, memo, plan, stats, observer):
    """Write ``block``, the whole input, in the short form; returns the predictor that
    coded it (None: stored). When a transform changes it (``memo``), both the transformed
    form (version 7) and the bytes as they are (version 6) are coded and the shorter is
    written: an input this small costs little to code twice, and so never grows by a
    transform that does not pay for its record."""
    forms = [(block, container.COMPACT, b"")]
    if memo is not None and memo.regions and len(memo.stream) < container.MAX_BLOCK:
        record = transforms.record.encode(memo.regions)
        head = container.short_transform(len(memo.stream), record)
        forms.insert(0, (memo.stream, container.TRANSFORMS, head))
    best = None
    for coded, version, head in forms:
        settings = plan.start.settings
        if plan.layout.small_input:  # by what the predictor codes, as the header names it
            settings = container.small_input_settings(settings, len(coded))
        header = container.compact_header(settings, _digest(plan), plan.start.resume,
                                          source.name, source.mtime, version=version)  # fmt: skip
        header += container.varint(len(block)) + head
        sized = container.short_settings(settings, len(coded))
        job = frames.FrameJob.of(_with_settings(plan, sized), version, 0)
        tried = Stats()
        watch = SILENT if best is not None else observer
        if best is None and head:
            watch = InOriginalBytes(observer, len(block), len(coded))
        payload, predictor = encode_short(job, coded, tried, watch)
        size = len(header) + len(container.varint(len(payload))) + len(payload)
        if best is None or size < best[0]:
            best = size, header, payload, predictor, tried
    _, header, payload, predictor, tried = best
    stats.ideal_bits += tried.ideal_bits
    stats.original_bytes += len(block)
    container.write_short(out, header, block, payload)
    return predictor


def _digest(plan):
    return plan.start.model.digest() if plan.start.model else None


def _first_segment(block_size, frame_size, block):
    """How many bytes to read after ``block`` (the first block read) for the whole first
    segment that ``blocks.encode_stream`` transforms: none for an input of one block."""
    if len(block) < block_size:
        return 0
    want = -(-SEGMENT // block_size) * block_size
    return max(0, (min(want, frame_size) if frame_size else want) - len(block))


class _Transformed:
    """``transforms.forward`` of the first segment, computed once: for the text test that
    chooses the prior, and again by ``blocks.encode_stream`` (as its ``transform``) when
    that segment comes; any other segment is transformed as it comes."""

    def __init__(self, segment):
        self.segment = segment
        self.stream, self.regions = transforms.forward(segment)

    def __call__(self, segment):
        if self.segment is not None and segment == self.segment:
            result = self.stream, self.regions
            self.segment = self.stream = self.regions = None  # it comes once: let it go
            return result
        return transforms.forward(segment)


def _with_settings(plan, settings):
    return dataclasses.replace(plan, start=dataclasses.replace(plan.start, settings=settings))


def _bytewise(settings):
    """settings as a version-3 or 4 header holds them: their mixing without mix.bits, which
    those versions cannot code (a non-empty input with it is refused before this; an empty
    one codes no byte)."""
    if settings.mix is None or not settings.mix.bits:
        return settings
    return dataclasses.replace(settings, mix=dataclasses.replace(settings.mix, bits=False))


def _check_memory(settings, limits):
    check_memory(memory_bytes(settings, limits.replay_chunk, CHUNK), limits.memlimit,
                 "the model and its tables")  # fmt: skip


def decode(source, destination, plan, observer=SILENT):
    """Decompress a .mz stream from ``source`` into ``destination``, and any .mz streams that
    follow it (concatenated files decode as one output); verifies each stream's length and
    checksum. ``plan.start`` gives the model a file was compressed from (its settings come
    from the header); ``observer.header`` hears the first stream's header before decoding
    starts. The returned Stats carries the first stream's stored ``name`` and ``mtime``
    (None when absent)."""
    began = time.perf_counter()
    src = _Counting(source)
    stats = Stats()
    header = container.read_header(src)
    stats.name, stats.mtime = header["name"], header["mtime"]
    observer.header(header)
    while True:
        job = _job_of(header, plan)
        if header.get("short"):
            blocks = container.read_short(src, header)
            decoded, _, predictor = job.decode_stream(blocks, destination, observer)
            stats.original_bytes += decoded
        elif header["version"] >= 4:
            predictor = frames.decompress_frames(src, destination, header, job, stats, plan,
                                                 observer)  # fmt: skip
        else:
            blocks = container.read_blocks(src, header["block_size"], header["version"])
            decoded, _, predictor = job.decode_stream(blocks, destination, observer)
            stats.original_bytes += decoded
        stats.open_learner = predictor.learner if predictor is not None else None
        if header["settings"] is not None:
            kernel_cache.mark(header["settings"])
        if not src.peek():
            break
        header = container.read_header(src, following=True)
    stats.compressed_bytes = src.count
    stats.seconds = time.perf_counter() - began
    return stats


def _job_of(header, plan):
    """The job of the frames (or the one unframed stream) of ``header``, once its start (the
    given model, or a shipped prior) is checked and its memory is."""
    start = for_header(header, plan.start, plan.limits.memlimit)
    if header.get("short"):
        sized = container.short_settings(start.settings, header["coded_size"])
        start = dataclasses.replace(start, settings=sized)
    if start.settings is not None:
        _check_memory(start.settings, plan.limits)
    layout = dataclasses.replace(plan.layout, block_size=header["block_size"])
    resolved = dataclasses.replace(plan, start=start, layout=layout)
    return frames.FrameJob.of(resolved, header["version"], header.get("frame_size"))


def frame_job(header, plan):
    """The job that decodes the frames of the stream of ``header`` under ``plan``, its start
    and memory checked: what ``mambazip.open`` decodes a frame at a time with."""
    return _job_of(header, plan)


def decode_range(source, destination, span, plan, observer=SILENT):
    """Write bytes [start, end) of ``span`` of the original of the seekable .mz file
    ``source`` to ``destination`` (``end`` None: to the end). A single framed stream decodes
    only the frames that hold them, found in its seek index; any other file is decoded from
    its start. A range past the end of the original is refused (RangeError): before
    anything is written when the index is read, after the part that exists otherwise (the
    command line writes to a temporary file, removed on any error)."""
    began = time.perf_counter()
    start, end = span
    located = container.index_from_end(source)
    source.seek(0)
    if located is None:
        # Decoded whole (to check every checksum), kept only where the slice falls; whether
        # the slice fits is known only at the end (the command line's output is a temporary
        # file until it succeeds).
        kept = frames.Slice(destination, start, math.inf if end is None else end)
        stats = decode(source, kept, plan, observer)
        end = _check_range(start, end, stats.original_bytes)
    else:
        header, index = located
        end = _check_range(start, end, index.length)
        stats = Stats(name=header["name"], mtime=header["mtime"])
        stats.frames = frames.decode_range(source, destination, header, index, (start, end),
                                           _job_of(header, plan), plan, observer)  # fmt: skip
    stats.original_bytes = end - start
    stats.seconds = time.perf_counter() - began
    return stats


def _check_range(start, end, length):
    end = length if end is None else end
    if not 0 <= start <= end:
        raise RangeError(f"range {start}:{end} is not START:END with 0 <= START <= END")
    if end > length:
        raise RangeError(f"range {start}:{end} is past the end of the original ({length} bytes)")
    return end


def compress_stream(src, dst, settings, block_size=container.DEFAULT_BLOCK, **options):
    """``encode`` for the library: compress everything readable from ``src`` into ``dst``
    with ``settings``. ``options`` by name: ``progress(n_bytes, bits)`` after each chunk,
    ``per_byte`` and ``trust`` lists that receive each chunk's -log2 p per byte and the
    context side's trust shares (``observe.Report``); the input's ``name``, ``mtime`` and
    ``size`` (``Source``); and any field of the plan's parts (``plan.from_options``): ``model``,
    ``resume``, ``prior``, ``memlimit``, ``replay_chunk``, ``frame_size``, ``jobs``,
    ``scheduler``, ``stored_blocks``, ``version``, ``small_input``."""
    observer = _report(options)
    source = Source(src, *(options.pop(key, None) for key in ("name", "mtime", "size")))
    plan = from_options(settings=settings, block_size=block_size, **options)
    return encode(source, dst, plan, observer)


def decompress_stream(src, dst, **options):
    """``decode`` for the library; ``options`` by name: ``progress``, ``on_header(header)``
    (before decoding starts), and ``model``, ``resume``, ``memlimit``, ``replay_chunk``,
    ``jobs``, ``scheduler`` (``plan.from_options``)."""
    observer = _report(options)
    return decode(src, dst, from_options(**options), observer)


def decompress_range(f, dst, start, end, **options):
    """``decode_range`` of bytes [start, end) for the library; ``options`` as for
    ``decompress_stream``."""
    observer = _report(options)
    return decode_range(f, dst, (start, end), from_options(**options), observer)


def _report(options):
    """The observer of the ``options`` that name one, taken out of ``options``."""
    keys = ("progress", "per_byte", "trust", "on_header")
    return Report(*(options.pop(key, None) for key in keys))


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
