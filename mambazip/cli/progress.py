"""Progress on stderr: a bar on a terminal, with -v off a terminal a line every few seconds;
and the note that the kernels are being compiled (once, about a minute)."""

import contextlib
import sys
import time

from tqdm import tqdm

from .. import signals
from ..kernel_cache import cached as kernels_cached
from .common import KB, format_kb, say

PROGRESS_MIN_BYTES = 1 << 16


PROGRESS_LINE_SECONDS = 5.0  # -v off a terminal: one progress line this often


class Progress:
    """The progress reporter handed to the codec: ``self(n_bytes, bits)`` after each chunk.

    A tqdm bar on stderr when it is a terminal and the input is worth waiting for (or of
    unknown size); with ``verbose`` off a terminal, a plain line every
    PROGRESS_LINE_SECONDS. Sizes and speeds in units of 1000 bytes (kB, KB/s), as
    everywhere else. Either way it is where a signal deferred out of Numba is raised."""

    def __init__(self, total, name, quiet, verbose=False, clock=time.monotonic):
        self.total, self.name, self.clock = total, name, clock
        self.done, self.bits = 0, 0.0
        self.bar = None
        self.lines = False
        if quiet:
            return
        if sys.stderr.isatty():
            if total is None or total >= PROGRESS_MIN_BYTES:
                # Updates come once per 4 KB chunk, a few a second: draw every one of them.
                self.bar = tqdm(total=total, desc=name, unit="B", unit_scale=True,
                                unit_divisor=KB, file=sys.stderr, leave=False,
                                dynamic_ncols=True, mininterval=0)  # fmt: skip
        elif verbose:
            self.lines = True
            self.start = self.last = clock()

    def set_total(self, total):
        """The input's size, once known (the decoder learns it from the header)."""
        self.total = total
        if self.bar is not None and total is not None:
            self.bar.total = total
            self.bar.refresh()

    def __call__(self, n_bytes, bits=0.0):
        signals.check()
        self.done += n_bytes
        self.bits += bits
        if self.bar is not None:
            if self.bits:
                self.bar.set_postfix_str(f"{self.bits / self.done:.3f} bits/byte", refresh=False)
            self.bar.update(n_bytes)
        elif self.lines:
            now = self.clock()
            if now - self.last >= PROGRESS_LINE_SECONDS:
                self.last = now
                say(self.line(now - self.start))

    def line(self, seconds):
        parts = [f"{self.name}: {format_kb(self.done)}"]
        if self.total:
            parts[0] += f" of {format_kb(self.total)} ({100 * self.done / self.total:.0f} %)"
        if self.bits:
            parts.append(f"{self.bits / self.done:.3f} bits/byte")
        parts.append(f"{self.done / KB / max(seconds, 1e-9):.2f} KB/s")
        return ", ".join(parts)

    def close(self):
        if self.bar is not None:
            self.bar.close()


@contextlib.contextmanager
def progress_bar(total, name, quiet, verbose=False):
    progress = Progress(total, name, quiet, verbose)
    try:
        yield progress
    finally:
        progress.close()


_compile_noted = []


def compile_note(settings, quiet):
    """Say once per run that the kernels are compiling when no run of this code has compiled
    them into this cache (a first run, or a run after an upgrade): it takes about a minute."""
    if quiet or _compile_noted:
        return
    if not kernels_cached(settings):
        _compile_noted.append(True)
        say("note: compiling kernels (about a minute, once)")
