"""Entry points of the ``mambazip``, ``unmz`` and ``mzcat`` commands and of ``python -m
mambazip``: signal handlers first, then the command line.

Importing the command line takes about half a second (NumPy, Numba, the kernels). A Ctrl-C,
SIGTERM or SIGHUP in that time must not print a traceback, so the handlers (``signals``) are
installed before ``cli`` is imported, and this module imports nothing else at its top.
"""

import sys

from .signals import Interrupted, check, install, restore


def _say(message):
    try:
        sys.stderr.write(f"mambazip: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # SIGHUP: the terminal may be gone
        pass


def run(args=None, prog_name="mambazip", command=None):
    """``mambazip``: run the command line on ``args`` (default: ``sys.argv[1:]``) and exit.
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


main = run  # ``mambazip`` and ``python -m mambazip``: the command line of sys.argv


def unmz():
    """``unmz FILES``: ``mambazip decompress FILES``."""
    run(prog_name="unmz", command="decompress")


def mzcat():
    """``mzcat FILES``: ``mambazip decompress -c FILES``."""
    run(["-c", *sys.argv[1:]], prog_name="mzcat", command="decompress")
