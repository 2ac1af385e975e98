"""Bounds on the work a file can ask for before anything in it is trusted.

``loads_json`` parses JSON that a file brings (a .mz header, a checkpoint's metadata, a
``config.json``) only after a linear scan has shown that it is small enough and nested no
deeper than ``max_depth``: ``json.loads`` recurses once per level, and a 100,000-deep
``[[[[...`` would otherwise end in a RecursionError.

``DEFAULT_MEMLIMIT`` is the memory budget of one run, and ``check_memory`` / ``Budget`` refuse
what would exceed it, before it is allocated, with one line that names the figure, the limit
and ``--memlimit``. How the default was chosen: it is what the largest preset needs plus a
margin, and no more, because a hostile input may make a run allocate up to the limit. The
``max`` preset (d_model 128 x 16 layers, 2 M parameters) needs 764,216,216 bytes, 728.8 MiB,
by the estimate a header is checked with (``predict.memory_bytes`` with the codec's 4 KB
chunk; 670.8 MiB of it the context-mixing tables, 4 MiB the Mamba's pdfs of the chunk it
runs ahead on); 768 MiB leaves 39 MiB (5.4 %) of margin.
Measured: compressing a small file with ``max`` peaked at 896 MiB of RSS, the interpreter,
numpy and the compiled kernels taking about 170 MiB beside the estimate, so nothing a file
asks for takes a run past about 940 MiB, below 1 GiB. The old default of 2 GiB let a 640 MiB
zip bomb in a model file reach 1.4 GiB of RSS before its shapes were checked. Models read
from files are bounded by the same budget (``hf.budget_for``). xz's ``--memlimit`` is the
model of the option.
"""

import json
import re

import numpy as np

from .errors import MemoryLimitError

DEFAULT_MEMLIMIT = 768 << 20
# A .mz header or config.json is a few KB; a safetensors header passes its own, larger bound.
MAX_JSON_BYTES = 16 << 20
_SCAN_CHUNK = 1 << 20
_QUOTE, _BACKSLASH = 34, 92
_OPEN, _CLOSE = (91, 123), (93, 125)  # [ {   ] }


def loads_json(raw, what, max_depth=64, max_bytes=MAX_JSON_BYTES, error=ValueError):
    """``json.loads(raw)`` (``raw`` str or bytes) after checking that it has at most
    ``max_bytes`` bytes and nests arrays and objects at most ``max_depth`` deep. Anything
    wrong (too large, too deep, not JSON, NaN/Infinity, not UTF-8) raises ``error`` with one
    line that starts with ``what``; nothing recurses deeper than ``max_depth``."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    if len(data) > max_bytes:
        raise error(f"{what}: JSON of {len(data)} bytes, more than the {max_bytes} allowed")
    try:
        if isinstance(raw, str):
            text = raw
        else:
            text = data.decode(json.detect_encoding(data))
            data = text.encode("utf-8", "surrogatepass")
    except (UnicodeError, LookupError) as exc:
        raise error(f"{what}: not valid JSON ({exc})") from None
    depth = json_depth(data, max_depth)
    if depth > max_depth:
        raise error(f"{what}: JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        # RecursionError cannot happen below max_depth; kept so a mistake stays one line.
        raise error(f"{what}: not valid JSON ({_one_line(exc)})") from None


def _no_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def _one_line(exc):
    return " ".join(str(exc).split())


def json_depth(data, stop=None):
    """The deepest nesting of ``[`` and ``{`` outside strings in the UTF-8 bytes ``data``
    (a linear scan, in chunks of bounded memory); stops early once it exceeds ``stop``.
    For any prefix that is valid JSON, this is at least the depth ``json.loads`` reaches."""
    depth, deepest, in_string, run = 0, 0, 0, 0
    for start in range(0, len(data), _SCAN_CHUNK):
        c = np.frombuffer(data, dtype=np.uint8, count=min(_SCAN_CHUNK, len(data) - start),
                          offset=start)  # fmt: skip
        is_bs = c == _BACKSLASH
        if run == 0 and not is_bs.any():
            before = None  # no backslash: nothing is escaped
        else:
            # Backslashes in a row up to and including each position (the run may begin in
            # an earlier chunk); a character is escaped when an odd number of them precede it.
            idx = np.arange(c.size)
            last_other = np.maximum.accumulate(np.where(is_bs, -1, idx))
            run_incl = idx - last_other + np.where(last_other < 0, run, 0)
            run_incl[~is_bs] = 0
            before = np.empty_like(run_incl)
            before[0] = run
            before[1:] = run_incl[:-1]
        quotes = c == _QUOTE
        if before is not None:
            quotes &= before % 2 == 0
        inside = (np.cumsum(quotes) + in_string) % 2 == 1
        step = (c == _OPEN[0]).view(np.int8) + (c == _OPEN[1]).view(np.int8)
        step -= (c == _CLOSE[0]).view(np.int8) + (c == _CLOSE[1]).view(np.int8)
        step[inside] = 0
        level = depth + np.cumsum(step, dtype=np.int64)
        deepest = max(deepest, int(level.max()))
        if stop is not None and deepest > stop:
            return deepest
        depth, in_string = int(level[-1]), int(inside[-1])
        run = 0 if before is None else int(run_incl[-1])
    return deepest


def format_bytes(n):
    """``n`` bytes in binary units: '512 bytes', '1.5 MiB', '2.0 GiB'."""
    if n < 1024:
        return f"{n} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        n /= 1024
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")


_UNITS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)


def parse_size(text):
    """Bytes of a size as ``--memlimit`` takes it: '2147483648', '512MiB', '2G', '1.5GiB'
    (k, M, G, T and their KiB... and KB... spellings all count in powers of 1024, as xz's
    do). Raises ValueError for anything else or for zero."""
    match = _SIZE.fullmatch(text)
    if not match:
        raise ValueError(f"{text!r} is not a size (examples: 512MiB, 2GiB, 1073741824)")
    number, unit = match.groups()
    value = int(float(number) * 1024 ** _UNITS[unit.lower()])
    if value <= 0:
        raise ValueError(f"{text!r}: a memory limit must be at least 1 byte")
    return value


def check_memory(needed_bytes, memlimit, what, error=MemoryLimitError):
    """Raise ``error`` (a MemoryLimitError by default) when ``needed_bytes`` exceed
    ``memlimit`` (None: DEFAULT_MEMLIMIT). ``what`` starts the line: 'X.mz: decoding'."""
    limit = DEFAULT_MEMLIMIT if memlimit is None else memlimit
    if needed_bytes > limit:
        raise error(
            f"{what} needs {format_bytes(needed_bytes)} of memory, more than the limit of "
            f"{format_bytes(limit)} (--memlimit raises it)"
        )


class Budget:
    """A running sum of allocations checked against one memory limit: a loader ``take``s
    each allocation's bytes before making it, and the first that would exceed the limit
    raises ``error`` naming the total so far."""

    def __init__(self, memlimit=None, what="this", error=MemoryLimitError):
        self.limit = DEFAULT_MEMLIMIT if memlimit is None else memlimit
        if not isinstance(self.limit, int) or isinstance(self.limit, bool) or self.limit <= 0:
            raise ValueError(f"memory limit must be a positive integer, got {memlimit!r}")
        self.what = what
        self.error = error
        self.used = 0

    def take(self, nbytes):
        """Account for ``nbytes`` more; raises before the total exceeds the limit."""
        check_memory(self.used + nbytes, self.limit, self.what, self.error)
        self.used += nbytes
