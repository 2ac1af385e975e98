"""Entry points of the ``mambazip``, ``unmz`` and ``mzcat`` commands and of ``python -m
mambazip``: signal handlers first, then the command line.

Importing the command line takes about half a second (NumPy, Numba, the kernels). A Ctrl-C,
SIGTERM or SIGHUP in that time must not print a traceback, so the handlers are installed
before ``cli`` is imported, and this module imports nothing but the standard library.

SIGINT, SIGTERM and SIGHUP are handled alike: the handler raises ``Interrupted``, which
unwinds through the output's temporary file (removing it), and the command exits with one
line and 128 + the signal's number (130, 143, 129). Interrupting Numba while it compiles or
loads its cache breaks LLVM objects (and inside its ctypes callbacks the exception is
swallowed): there the signal is only recorded, and ``check`` raises it at the next progress
report or between files. After the first signal, later ones are only recorded, so that the
clean-up itself is not interrupted.
"""

import signal
import sys

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


def _handler(signum, frame):
    first = not _seen
    _seen.append(signum)
    if first and not _inside_numba(frame):
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


def install():
    """Install the handlers; returns what to give ``restore``."""
    _seen.clear()
    return {signum: signal.signal(signum, _handler) for signum in MESSAGES}


def restore(previous):
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def _say(message):
    try:
        sys.stderr.write(f"mambazip: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # SIGHUP: the terminal may be gone
        pass


def run(args=None, prog_name="mambazip", command=None):
    """Run the command line on ``args`` (default: ``sys.argv[1:]``) and exit.
    ``command``: run this subcommand directly, as ``unmz`` runs ``decompress``."""
    previous = install()
    try:
        from . import cli  # the heavy imports, under the handlers

        check()
        code = cli.run(sys.argv[1:] if args is None else list(args), prog_name, command)
        check()
    except Interrupted as exc:
        _say(exc.message)
        code = exc.exit_code
    finally:
        restore(previous)
    sys.exit(code)


def main():
    """``mambazip``."""
    run()


def unmz():
    """``unmz FILES``: ``mambazip decompress FILES``."""
    run(prog_name="unmz", command="decompress")


def mzcat():
    """``mzcat FILES``: ``mambazip decompress -c FILES``."""
    run(["-c", *sys.argv[1:]], prog_name="mzcat", command="decompress")
