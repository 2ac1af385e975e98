"""mambazip command line: parses, calls the library, reports. Messages go to stderr.

Exit codes: 0 success, 1 error in data or files, 2 usage error, 130 interrupted.
"""

import contextlib
import os
import signal
import sys

import click
from tqdm import tqdm

from . import codec, container
from .config import OPTIMIZERS, SCOPES, preset_names, resolve_settings
from .errors import ConfigError, MambazipError
from .files import atomic_output

SUFFIX = ".mz"
PROGRESS_MIN_BYTES = 1 << 16

EXIT_HELP = """\b
Exit codes: 0 success, 1 error in data or files (one line on stderr, no output left
behind), 2 usage error, 130 interrupted."""


def _say(message):
    click.echo(f"mambazip: {message}", err=True)


def _scope(ctx, param, value):
    if value is None:
        return None
    names = tuple(s.strip() for s in value.split(",") if s.strip())
    bad = [s for s in names if s not in SCOPES]
    if bad or not names:
        raise click.BadParameter(f"must be a comma list of {', '.join(SCOPES)}")
    return names


def _io_options(f):
    options = [
        click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True)),
        click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True),
                     help="Write to this file (one input only); - for stdout."),
        click.option("-c", "--stdout", "to_stdout", is_flag=True, help="Write to stdout."),
        click.option("-f", "--force", is_flag=True,
                     help="Overwrite existing outputs; write compressed data to a terminal."),
        click.option("-k", "--keep", is_flag=True,
                     help="Keep input files (the default; see --rm)."),
        click.option("--rm", "remove", is_flag=True,
                     help="Delete each input after its output is written."),
        click.option("-q", "--quiet", is_flag=True, help="No progress bar, no warnings."),
        click.option("-v", "--verbose", is_flag=True, help="Print a summary line per file."),
    ]  # fmt: skip
    for option in reversed(options):
        f = option(f)
    return f


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_HELP)
@click.version_option(package_name="mambazip")
def cli():
    """Lossless compression by a Mamba-1 model that learns the file while coding it."""


@cli.command(epilog=EXIT_HELP)
@_io_options
@click.option(
    "--preset",
    default="default",
    show_default=True,
    help=f"Model and training preset from models/ ({', '.join(preset_names())}).",
)
@click.option("--optimizer", type=click.Choice(OPTIMIZERS), help="Online optimizer.")
@click.option("--lr", type=float, help="Learning rate.")
@click.option("--scope", callback=_scope, help=f"What to train: comma list of {', '.join(SCOPES)}.")
@click.option("--clip", type=float, help="Element-wise gradient clip (0: none).")
@click.option("--warmup", type=int, help="Learning-rate warm-up, in bytes.")
@click.option("--decay", type=int, help="Decay lr by sqrt(decay / t) after t > decay bytes.")
@click.option("--seed", type=int, help="Seed of the initial weights.")
@click.option("--d-model", type=int, help="Residual width.")
@click.option("--n-layer", type=int, help="Number of Mamba blocks.")
@click.option("--d-inner", type=int, help="Mixer width (default 2 d_model).")
@click.option("--d-state", type=int, help="SSM state size.")
@click.option("--d-conv", type=int, help="Convolution width.")
@click.option("--dt-rank", type=int, help="Rank of the time-step projection.")
def compress(files, output, to_stdout, force, keep, remove, quiet, verbose, preset, seed, **opts):
    """Compress FILES (- or none: stdin) to FILE.mz."""
    model_keys = ("d_model", "n_layer", "d_inner", "d_state", "d_conv", "dt_rank")
    try:
        settings = resolve_settings(
            preset,
            model={k: opts.pop(k) for k in model_keys},
            train=opts,
            seed=seed,
        )
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None

    def run(src, dst, size, name):
        with _progress(size, name, quiet) as progress:
            return codec.compress_stream(src, dst, settings, progress=progress)

    _each(files, output, to_stdout, force, remove, verbose, run,
          name_output=lambda path: path + SUFFIX, binary_out=True)  # fmt: skip


@cli.command(epilog=EXIT_HELP)
@_io_options
@click.option("-t", "--test", is_flag=True, help="Check the files; write nothing.")
def decompress(files, output, to_stdout, force, keep, remove, quiet, verbose, test):
    """Decompress FILES.mz (- or none: stdin) and verify their checksums."""

    def run(src, dst, size, name):
        with _progress(None, name, quiet) as progress:
            return codec.decompress_stream(src, dst, progress=progress)

    def name_output(path):
        if not path.endswith(SUFFIX):
            raise MambazipError(f"unknown suffix, expected {SUFFIX}; use -o to name the output")
        return path[: -len(SUFFIX)]

    if test:
        _each(files, None, False, force, False, verbose, run, name_output, test=True)
    else:
        _each(files, output, to_stdout, force, remove, verbose, run, name_output)


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
def info(files):
    """Show the header of .mz FILES: sizes, bits/byte, model and training settings."""
    failed = False
    for path in files:
        try:
            with open(path, "rb") as f:
                header = container.read_header(f)
                length, crc, size = _scan_to_end(f, header["block_size"])
        except (MambazipError, OSError) as exc:
            _say(_describe(path, exc))
            failed = True
            continue
        settings = header["settings"].to_dict()
        bpb = 8.0 * size / length if length else 0.0
        click.echo(f"{path}:")
        click.echo(f"  format version   {header['version']}")
        click.echo(f"  original size    {length} bytes (crc32 {crc:08x})")
        click.echo(f"  compressed size  {size} bytes, {bpb:.4f} bits/byte")
        click.echo(f"  block size       {header['block_size']}")
        click.echo(f"  model            {_fields(settings['model'])}")
        click.echo(f"  training         {_fields(settings['train'])}")
        click.echo(f"  seed             {settings['seed']}")
        if header["model_sha256"]:
            click.echo(f"  starting model   sha256 {header['model_sha256']}")
    sys.exit(1 if failed else 0)


def _fields(d):
    return " ".join(f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in d.items())


def _scan_to_end(f, block_size):
    for n_bytes, words in container.read_blocks(f, block_size):
        if n_bytes == "end":
            length, crc = words
            return length, crc, f.tell()
    raise AssertionError("read_blocks always ends with the trailer")


@contextlib.contextmanager
def _progress(total, name, quiet):
    """A tqdm bar on stderr when it is a terminal and the input is worth waiting for."""
    show = not quiet and sys.stderr.isatty() and (total is None or total >= PROGRESS_MIN_BYTES)
    if not show:
        yield _check_interrupt
        return
    # Updates come once per 4 KB chunk, a few a second: draw every one of them.
    bar = tqdm(total=total, desc=name, unit="B", unit_scale=True, unit_divisor=1024,
               file=sys.stderr, leave=False, dynamic_ncols=True, mininterval=0)  # fmt: skip
    done = [0, 0.0]

    def update(n_bytes, bits):
        _check_interrupt()
        done[0] += n_bytes
        done[1] += bits
        if done[1]:
            bar.set_postfix_str(f"{done[1] / done[0]:.3f} bits/byte", refresh=False)
        bar.update(n_bytes)

    try:
        yield update
    finally:
        bar.close()


def _describe(path, exc):
    if isinstance(exc, OSError):
        return f"{exc.filename or path}: {exc.strerror or exc}"
    return f"{path}: {exc}"


def _each(files, output, to_stdout, force, remove, verbose, run, name_output, test=False,
          binary_out=False):  # fmt: skip
    files = files or ("-",)
    if output is not None and len(files) > 1:
        raise click.UsageError("-o/--output takes one input file")
    if output is not None and to_stdout:
        raise click.UsageError("-o and -c exclude each other")
    failed = False
    for path in files:
        try:
            _one(path, output, to_stdout, force, remove, verbose, run, name_output, test,
                 binary_out)  # fmt: skip
        except (MambazipError, OSError) as exc:
            _say(_describe(path, exc))
            failed = True
    if failed:
        sys.exit(1)


def _one(path, output, to_stdout, force, remove, verbose, run, name_output, test, binary_out):
    stdin = path == "-"
    if test:
        target = None
    elif to_stdout or output == "-" or (stdin and output is None):
        target = "-"
    else:
        target = output or name_output(path)
    if target == "-" and binary_out and sys.stdout.isatty() and not force:
        raise MambazipError("compressed data not written to a terminal; use -f to force")
    name = "stdin" if stdin else os.path.basename(path)
    with contextlib.ExitStack() as stack:
        src = sys.stdin.buffer if stdin else stack.enter_context(open(path, "rb"))
        size = None if stdin else os.fstat(src.fileno()).st_size
        if target is None:
            stats = run(src, _Discard(), size, name)
        elif target == "-":
            stats = run(src, sys.stdout.buffer, size, name)
            sys.stdout.buffer.flush()
        else:
            mode = None if stdin else os.fstat(src.fileno()).st_mode & 0o777
            with atomic_output(target, force, mode) as dst:
                stats = run(src, dst, size, name)
    if remove and not stdin and target not in (None, "-"):
        os.unlink(path)
    if verbose:
        _summary(name, stats, test)


def _summary(name, stats, test):
    speed = stats.original_bytes / 1000 / max(stats.seconds, 1e-9)
    status = "OK, " if test else ""
    click.echo(
        f"{name}: {status}{stats.original_bytes} <-> {stats.compressed_bytes} bytes, "
        f"{stats.bits_per_byte:.4f} bits/byte, {stats.seconds:.2f} s, {speed:.2f} KB/s",
        err=True,
    )


class _Discard:
    def write(self, data):
        return len(data)


class _Interrupted(BaseException):
    """Ctrl-C. Not a KeyboardInterrupt, which click would answer with a blank line."""


_interrupt_seen = []


def _interrupt(signum, frame):
    # Interrupting Numba while it compiles or loads its cache breaks LLVM objects (and inside
    # its ctypes callbacks the exception is swallowed): there, the signal is only recorded
    # and raised at the next progress report.
    _interrupt_seen.append(signum)
    if not _inside_numba(frame):
        raise _Interrupted


def _inside_numba(frame):
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith(("numba", "llvmlite")):
            return True
        frame = frame.f_back
    return False


def _check_interrupt(n_bytes=0, bits=0.0):
    if _interrupt_seen:
        raise _Interrupted


def main():
    previous = signal.signal(signal.SIGINT, _interrupt)
    try:
        cli.main(prog_name="mambazip", standalone_mode=False)
    except click.UsageError as exc:
        _say(f"{exc.format_message()} (see mambazip --help)")
        sys.exit(2)
    except click.ClickException as exc:
        _say(exc.format_message())
        sys.exit(exc.exit_code)
    except (_Interrupted, click.exceptions.Abort):
        _say("interrupted")
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(1)
    finally:
        signal.signal(signal.SIGINT, previous)
