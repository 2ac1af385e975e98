"""mambazip command line: parses, calls the library, reports. Messages go to stderr.

One module per command (compress, decompress, info, score, convert, train); beside them the
options they share (``options``), where each run starts from (``start``), the gzip-style
policy for inputs and outputs (``policy``), the progress bar and the compile note
(``progress``), and the translation of gzip's mode flags (``gzip_flags``). This module
makes the group and runs it.

Exit codes: 0 success, 1 error in data or files, 2 usage error, 128 + the signal's number
when a signal stops the run (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP). The entry points (and
the signal handlers, installed before this package is imported) are in ``entry.py``.
"""

import contextlib
import os
import signal
import sys

import click

from .. import signals
from .common import EXIT_HELP, say
from .compress import compress
from .convert import convert
from .decompress import decompress
from .gzip_flags import translate
from .info import info
from .score import score
from .train import train

SHORT_USAGE = (
    "usage: mambazip compress|decompress|info|score|convert|train [OPTIONS] [FILES]... "
    "(mambazip -d FILE decompresses; mambazip --help for more)"
)


GROUP_HELP = """Lossless compression by a Mamba-1 model that learns the file while coding it.

\b
Two forms: mambazip COMMAND [OPTIONS] [FILES]..., or as gzip and zstd are typed,
mambazip [OPTIONS] FILE... (= mambazip compress [OPTIONS] FILE...), and with no file
a filter from stdin to stdout (mambazip < in > in.mz; mambazip -d < in.mz > in), which
is what tar -I mambazip runs. -1/--fast and -9/--best choose the fast and max presets;
-r compresses (or with -d decompresses) every file under a directory.

\b
gzip habits: mambazip -d FILE is mambazip decompress FILE, -z compress, -t decompress -t,
-l info (also bundled: -dc FILE); unmz is mambazip decompress, mzcat is decompress -c."""


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_HELP,
             help=GROUP_HELP)  # fmt: skip
@click.version_option(None, "-V", "--version", package_name="mambazip")
def cli():
    pass


for _command in (compress, decompress, info, score, convert, train):
    cli.add_command(_command)


def run(args, prog_name="mambazip", command=None):
    """Run the command line on ``args``; returns the exit code. Signals (``signals.Interrupted``)
    pass through to the caller, ``entry.run``."""
    target = cli if command is None else cli.commands[command]
    if command is None:
        args = translate(args, cli.commands)
        if _typed_at_a_terminal(args):
            say(f"stdin is a terminal; give files or pipe data in. {SHORT_USAGE}")
            return 2
    try:
        rv = target.main(args, prog_name=prog_name, standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except click.UsageError as exc:
        say(f"{exc.format_message()} (see {prog_name} --help)")
        return 2
    except click.ClickException as exc:
        say(exc.format_message())
        return exc.exit_code
    except click.exceptions.Abort:  # click's answer to a KeyboardInterrupt it caught
        raise signals.Interrupted(signal.SIGINT) from None
    except BrokenPipeError:
        # The reader went away: say nothing more, and let no flush at exit complain.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _typed_at_a_terminal(args):
    """``mambazip`` (or ``mambazip -9``...) with no file would compress what is typed: zstd
    and xz refuse that, and so does the main form (``mambazip compress`` reads a terminal
    as it always has)."""
    if args[0] != "compress" or not sys.stdin.isatty():
        return False
    with contextlib.suppress(click.ClickException):
        params = (
            cli.commands["compress"]
            .make_context("compress", args[1:], resilient_parsing=True)
            .params
        )
        return not params.get("force") and params.get("files") in ((), None, ("-",))
    return False
