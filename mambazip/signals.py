"""Signals as exceptions, on the ground floor: SIGINT, SIGTERM and SIGHUP raise
``Interrupted``, which unwinds through the output's temporary file (removing it); the command
exits with one line and 128 + the signal's number (130, 143, 129). The entry points install
the handlers (``entry.py``); the command line and the worker pools call ``check``; ``hold``
and ``release`` put off a signal over a step that must not be cut.

Interrupting Numba while it compiles or loads its cache breaks LLVM objects (and inside its
ctypes callbacks the exception is swallowed): there the signal is only recorded, and
``check`` raises it at the next progress report or between files. After the first signal,
later ones are only recorded, so that the clean-up itself is not interrupted. This module
imports nothing but the standard library.
"""

import signal

MESSAGES = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}
if hasattr(signal, "SIGHUP"):
    MESSAGES[signal.SIGHUP] = "hung up"


class Interrupted(BaseException):
    """A signal asked us to stop. Not a KeyboardInterrupt, which click would answer with a
    blank line and Python with a traceback."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self):
        return 128 + self.signum

    @property
    def message(self):
        return MESSAGES.get(self.signum, f"stopped by signal {self.signum}")


_seen = []
_held = []


def _handler(signum, frame):
    first = not _seen
    _seen.append(signum)
    if first and not _held and not _inside_numba(frame):
        raise Interrupted(signum)


def _inside_numba(frame):
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith(("numba", "llvmlite")):
            return True
        frame = frame.f_back
    return False


def check(*_):
    """Raise ``Interrupted`` if a signal came (also usable as a progress callback)."""
    if _seen:
        raise Interrupted(_seen[0])


def hold():
    """Only record signals until ``release``: for a step whose interruption would leave
    something behind that no clean-up knows of yet, such as a temporary file created but not
    yet named to its caller. (Blocking them with pthread_sigmask would hold them back from
    this thread only; the kernel hands them to any other.)"""
    _held.append(True)


def release():
    """End ``hold``; raise ``Interrupted`` if a signal came meanwhile (or before)."""
    _held.pop()
    check()


def install():
    """Install the handlers; returns what to give ``restore``."""
    _seen.clear()
    _held.clear()
    return {signum: signal.signal(signum, _handler) for signum in MESSAGES}


def restore(previous):
    for signum, handler in previous.items():
        signal.signal(signum, handler)
