"""``mambazip.open``: a .mz file as a Python file object, as ``gzip.open`` and ``lzma.open``
give theirs.

Reading decodes one frame at a time into a buffer of its own and hands out its bytes only
once the frame's length and CRC32 have been checked, so that no byte of a damaged frame is
ever returned; the error (``BadMzFileError``, an ``OSError`` as ``gzip.BadGzipFile`` is) comes
where the damage is found. A seekable single stream with a seek index is read through the
index: ``seek`` decodes only the frame that holds the new position. Anything else (a pipe,
concatenated streams, a file of a version before frames, a damaged index) is read in order,
and a backward ``seek`` in a seekable one starts over from its beginning. A file object is
read from its beginning (position 0) when it can seek. Memory is bounded by one frame (a
frame of unbounded size spills to a temporary file).

Writing runs ``codec.encode`` on a thread that reads what ``write`` hands it through a short
queue: the one coder of the command line, under the same kind of plan, coding each frame
as it fills; ``close`` waits for the end of the stream and its index.
"""

import builtins
import io
import os
import queue
import tempfile
import threading

from . import codec, container, frames
from .errors import BadMzFileError, ChecksumError, FormatError
from .plan import Execution, Layout, Limits, Plan, Start
from .plan import start as plan_start

_MODES = {"r", "rb", "rt", "w", "wb", "wt", "x", "xb", "xt", "a", "ab", "at"}
_PIECE = 1 << 16  # what the writer's queue holds per item: the queue bounds its memory
_DEPTH = 16


def open(file, mode="rb", *, settings="default", frame_size=frames.DEFAULT_FRAME, memlimit=None,
         encoding=None, errors=None, newline=None):  # fmt: skip
    """Open the .mz file ``file`` (a path, or a binary file object) in ``mode``: ``rb`` (the
    default), ``wb``, ``xb`` (only a new file), ``ab`` (a new stream appended; the streams of
    a file read as one), or ``rt``/``wt``/``xt``/``at`` for text with ``encoding``,
    ``errors`` and ``newline`` as ``io.TextIOWrapper`` takes them. Writing codes with
    ``settings``: a ``Settings`` (from the seeded init), or a preset's name (from its prior
    on text, as ``mambazip.compress`` with ``preset``), in frames of
    ``frame_size`` bytes, as ``mambazip compress -n`` does; ``memlimit`` bounds the memory
    the model may take (bytes; None: ``limits.DEFAULT_MEMLIMIT``)."""
    if mode not in _MODES:
        raise ValueError(f"invalid mode {mode!r}: one of rb, wb, xb, ab, rt, wt, xt, at")
    text = "t" in mode
    if not text and (encoding, errors, newline) != (None, None, None):
        raise ValueError("encoding, errors and newline are for text modes only")
    limits = Limits(memlimit)
    if mode[0] == "r":
        raw = _Reader(*_file(file, "rb"), Plan(limits=limits))
        binary = io.BufferedReader(raw, buffer_size=io.DEFAULT_BUFFER_SIZE)
    else:
        preset = isinstance(settings, str)
        start = plan_start(settings) if preset else Start(settings)
        layout = Layout(stored_blocks=True, small_input=preset)
        plan = Plan(start, limits, Execution(frame_size=frame_size), layout)
        raw = _Writer(*_file(file, mode[0] + "b"), plan)
        binary = io.BufferedWriter(raw, buffer_size=_PIECE)
    if text:
        return io.TextIOWrapper(binary, encoding=io.text_encoding(encoding), errors=errors,
                                newline=newline)  # fmt: skip
    return binary


def _file(file, mode):
    """(binary file object, whether it is ours to close)."""
    if isinstance(file, (str, bytes, os.PathLike)):
        return builtins.open(file, mode), True
    if not (hasattr(file, "read") or hasattr(file, "write")):
        raise TypeError("file must be a path or a binary file object")
    return file, False


def _bad(exc):
    return BadMzFileError(str(exc))


class _Reader(io.RawIOBase):
    """The original bytes of a .mz file, a verified frame at a time."""

    def __init__(self, fp, owned, plan):
        self._fp, self._owned, self._plan = fp, owned, plan
        self._pos = 0  # in the original
        self._frame = None  # the verified bytes at hand: [_frame_start, _frame_end) of the original
        self._frame_start = self._frame_end = 0
        self._index = self._in_order = None
        try:
            located = container.index_from_end(fp) if _seekable(fp) else None
            if located is not None:
                self._header, self._index = located
                self._job = codec.frame_job(self._header, plan)
            else:
                self._restart()
        except (FormatError, ChecksumError) as exc:
            self._close_file()
            raise _bad(exc) from None
        except BaseException:
            self._close_file()
            raise

    def readable(self):
        return True

    def seekable(self):
        return self._index is not None or _seekable(self._fp)

    def tell(self):
        return self._pos

    def readinto(self, b):
        try:
            if self._frame is None or self._pos >= self._frame_end:
                self._frame = None
                if not self._load():
                    return 0
            data = self._frame.read(len(b))  # SpooledTemporaryFile has readinto from 3.11
        except (FormatError, ChecksumError) as exc:
            raise _bad(exc) from None
        memoryview(b).cast("B")[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def _load(self):
        """The frame that holds ``_pos``, verified; False at the end of the original."""
        if self._index is None:
            while True:
                loaded = next(self._in_order, None)
                if loaded is None:
                    return False
                start, spool, size = loaded
                end = start + size
                if self._pos < end:  # a forward seek passes over whole frames
                    self._hold(spool, start, end)
                    return True
        if self._pos >= self._index.length:
            return False
        frame_size = self._header["frame_size"]
        fr = self._index.frames[self._pos // frame_size if frame_size else 0]
        spool = _spool()
        frames.decode_range(self._fp, spool, self._header, self._index,
                            (fr.offset, fr.offset + fr.size), self._job, self._plan)  # fmt: skip
        self._hold(spool, fr.offset, fr.offset + fr.size)
        return True

    def _hold(self, spool, start, end):
        spool.seek(self._pos - start)
        self._frame, self._frame_start, self._frame_end = spool, start, end

    def seek(self, offset, whence=io.SEEK_SET):
        if not self.seekable():
            raise io.UnsupportedOperation("seek: this .mz file is read from a pipe")
        if whence == io.SEEK_CUR:
            offset += self._pos
        elif whence == io.SEEK_END:
            offset += self._length()
        elif whence != io.SEEK_SET:
            raise ValueError(f"invalid whence {whence}")
        if offset < 0:
            raise OSError(22, "negative seek position")
        if self._frame is not None and self._frame_start <= offset < self._frame_end:
            self._frame.seek(offset - self._frame_start)  # within the frame at hand
            self._pos = offset
            return offset
        self._frame = None
        if self._index is None and offset < self._pos:
            try:
                self._restart()
            except (FormatError, ChecksumError) as exc:
                raise _bad(exc) from None
        self._pos = offset
        return offset

    def _length(self):
        if self._index is not None:
            return self._index.length
        while self.read(_PIECE):  # without an index the length is known at the end only
            pass
        return self._pos

    def _restart(self):
        if _seekable(self._fp):
            self._fp.seek(0)
        self._pos = 0
        self._in_order = _frames_in_order(self._fp, self._plan)

    def close(self):
        if not self.closed:
            self._frame = self._in_order = None
            self._close_file()
        super().close()

    def _close_file(self):
        if self._owned:
            self._fp.close()


def _seekable(fp):
    try:
        return fp.seekable()
    except (AttributeError, OSError, ValueError):
        return False


def _spool():
    return tempfile.SpooledTemporaryFile(max_size=frames.DEFAULT_FRAME)


def _frames_in_order(fp, plan):
    """(original offset, spool of its bytes, their number) of each frame, verified, of each
    stream of ``fp`` read in order; a stream before frames (versions 1 to 3) or of version
    6's short form counts as one frame. Each stream's index is checked against its frames
    once they are read."""
    src = codec._Counting(fp)
    header = container.read_header(src)
    offset = 0
    while True:
        job = codec.frame_job(header, plan)
        if header["version"] < 4 or header.get("short"):
            spool = _spool()
            if header.get("short"):  # version 6's one block: no frames, no index
                blocks = container.read_short(src, header)
            else:
                blocks = container.read_blocks(src, header["block_size"], header["version"])
            job.decode_stream(blocks, spool)
            spools = [spool]
        else:
            spools = _stream_frames(src, header, job)
        for spool in spools:
            size = spool.tell()
            if size:
                yield offset, spool, size
                offset += size
        if not src.peek():
            return
        header = container.read_header(src, following=True)


def _stream_frames(src, header, job):
    frame_size, packed_start = header["frame_size"], src.count
    entries = []
    while src.peek(4) != b"\0\0\0\0":
        if entries and (frame_size == 0 or entries[-1][1] != frame_size):
            raise FormatError(f"corrupt file: frame {len(entries) + 1} follows a frame shorter "
                              f"than the frame size")  # fmt: skip
        start, spool = src.count, _spool()
        try:
            n, crc, _ = job.decode_stream(container.frame_blocks(src, header), spool)
        except (FormatError, ChecksumError) as exc:
            raise type(exc)(f"frame {len(entries) + 1}: {exc}") from None
        entries.append((src.count - start, n, crc))
        yield spool
    src.read(4)
    index = container.read_index(src, len(entries), packed_start, frame_size)
    if [(fr.packed_size, fr.size, fr.crc) for fr in index.frames] != entries:
        raise FormatError("corrupt index: it does not match the frames")


class _Pipe:
    """What ``write`` hands to the coder's thread: ``read`` blocks until data or the end."""

    def __init__(self):
        self.queue = queue.Queue(_DEPTH)
        self.ahead = b""
        self.ended = False

    def read(self, n):
        while not self.ahead and not self.ended:
            piece = self.queue.get()
            if piece is None:
                self.ended = True
            else:
                self.ahead = piece
        data, self.ahead = self.ahead[:n], self.ahead[n:]
        return data


class _Writer(io.RawIOBase):
    """Bytes written become one .mz stream, coded on a thread by ``codec.encode``."""

    def __init__(self, fp, owned, plan):
        self._fp, self._owned = fp, owned
        self._pipe = _Pipe()
        self._error = None
        self._thread = threading.Thread(target=self._code, args=(plan,), daemon=True,
                                        name="mambazip.open writer")  # fmt: skip
        self._thread.start()

    def _code(self, plan):
        try:
            codec.encode(self._pipe, self._fp, plan)
        except BaseException as exc:  # raised by the next write or close
            self._error = exc

    def writable(self):
        return True

    def write(self, b):
        data = bytes(b)
        for i in range(0, len(data), _PIECE):
            self._put(data[i : i + _PIECE])
        return len(data)

    def _put(self, item):
        while True:
            self._check()
            try:
                self._pipe.queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _check(self):
        if self._error is not None:
            raise self._error
        if not self._thread.is_alive():
            raise OSError("mambazip.open: the coder has stopped")

    def close(self):
        if self.closed:
            return
        try:
            if self._thread.is_alive():
                self._put(None)
                self._thread.join()
            if self._error is not None:
                raise self._error
            self._fp.flush()
        finally:
            if self._owned:
                self._fp.close()
            super().close()
