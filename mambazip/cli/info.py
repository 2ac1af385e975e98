"""``mambazip info`` (and -l): every resolved setting of a file's header, its frames, and
with --test a full decode to nowhere."""

import contextlib
import os
import sys
import tempfile
import time

import click

from .. import codec, container, priors, signals, transforms
from ..errors import MambazipError
from ..observe import Report
from ..plan import Limits, Plan
from .common import EXIT_HELP, Discard, describe, format_fields, say
from .options import memlimit_option, model_pack, start_options
from .policy import refuse_terminal_stdin
from .progress import compile_note, progress_bar
from .start import load_start


@click.command(epilog=EXIT_HELP)
@model_pack
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-t", "--test", is_flag=True,
              help="Also decompress each file, writing nothing: OK or what is wrong.")  # fmt: skip
@start_options
@memlimit_option
@click.option("-q", "--quiet", is_flag=True, help="No progress, no notes.")
def info(files, test, model, memlimit, quiet):
    """Show the header of .mz FILES (- or none: stdin): sizes, bits/byte, stored name and
    mtime, model and training settings. --model / --resume: the starting model that --test
    needs for a file compressed from one."""
    plan = Plan(load_start(model, quiet, memlimit), Limits(memlimit))
    failed = False
    for path in files or ("-",):
        try:
            signals.check()
            failed |= not _info_one(path, test, plan, quiet)
        except BrokenPipeError:  # the reader went away (| head): not this file's fault
            raise
        except (MambazipError, OSError, MemoryError) as exc:
            say(describe(path, exc))
            failed = True
    sys.exit(1 if failed else 0)


def _info_one(path, test, plan, quiet):
    """Print the info of one file; False if its --test failed."""
    name = "stdin" if path == "-" else path
    with contextlib.ExitStack() as stack:
        if path == "-":
            refuse_terminal_stdin(False, "; give a file or a pipe")
            f = stack.enter_context(_rewindable(sys.stdin.buffer))
        else:
            f = stack.enter_context(open(path, "rb"))
        header = container.read_header(f)
        length, crc, streams, index = _scan_to_end(f, header)
        _print_header(name, header, length, crc, f.tell(), streams)
        if index is not None:
            _print_frames(header, index)
        _print_transforms(f, header)
        if not test:
            return True
        f.seek(0)
        try:
            if header["settings"] is not None:
                compile_note(header["settings"], quiet)
            with progress_bar(length, os.path.basename(name), quiet) as progress:
                codec.decode(f, Discard(), plan, Report(progress))
        except MambazipError as exc:
            click.echo(f"  test             failed: {exc}")
            say(describe(name, exc))
            return False
        click.echo("  test             OK")
        return True


def _print_header(name, header, length, crc, size, streams):
    bpb = 8.0 * size / length if length else 0.0
    click.echo(f"{name}:")
    click.echo(f"  format version   {header['version']}")
    if streams > 1:
        click.echo(f"  streams          {streams} (decoded as one output; the first is shown)")
    click.echo(f"  original size    {length} bytes (crc32 {crc:08x})")
    click.echo(f"  compressed size  {size} bytes, {bpb:.4f} bits/byte")
    if header.get("name") is not None:
        click.echo(f"  stored name      {header['name']}")
    if header.get("mtime") is not None:
        when = time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime(header["mtime"]))
        click.echo(f"  stored mtime     {header['mtime']} ({when})")
    if header["settings"] is None:
        click.echo("  model            none (an empty stream)")
        return
    settings = header["settings"].to_dict()
    click.echo(f"  block size       {header['block_size']}")
    click.echo(f"  model            {format_fields(settings['model'])}")
    # Every field, bptt included (the header of a format-1 file leaves it out: it is 1); the
    # recipe knobs only where they are set.
    train = header["settings"].train.to_dict()
    click.echo(f"  training         {format_fields(train)}")
    if settings.get("mix") is not None:
        mix = settings["mix"]
        click.echo(f"  mixing           {format_fields(mix) if isinstance(mix, dict) else mix}")
    click.echo(f"  seed             {settings['seed']}")
    if header["model_sha256"]:
        click.echo(f"  starting model   sha256 {header['model_sha256']} "
                   f"({_starting_model_kind(header)})")  # fmt: skip


def _starting_model_kind(header):
    if header["model_resume"]:
        return "--resume"
    if priors.shipped(header["model_sha256"]):
        return "a prior shipped with mambazip"
    return "--model, or a prior this installation does not ship"


def _print_frames(header, index):
    if header.get("short"):
        click.echo("  form             short (one block: no block header, end or seek index)")
        return
    size = header["frame_size"]
    click.echo(f"  frames           {len(index.frames)} of "
               f"{f'{size} bytes' if size else 'any size'} (seek index at the end)")  # fmt: skip
    for number, fr in enumerate(index.frames, 1):
        bpb = 8.0 * fr.packed_size / fr.size
        click.echo(f"    frame {number:<6} original {fr.offset}-{fr.offset + fr.size - 1}, "
                   f"at {fr.packed_offset}, {fr.packed_size} bytes, {bpb:.4f} bits/byte, "
                   f"crc32 {fr.crc:08x}")  # fmt: skip


def _print_transforms(f, header):
    """The transforms of the first stream (version 7): per kind, its regions (nested ones
    included) and their bytes before and after; ``f`` is left where it was."""
    if header["version"] < container.TRANSFORMS:
        return
    end = f.tell()
    heads = [header["transformed"]] if header.get("short") else _transform_heads(f, header)
    f.seek(end)
    counts = {}
    for head in heads:
        if head is not None:
            transforms.summary(head.regions, counts)
    if not counts:
        click.echo("  transforms       none")
    for kind, (regions, before, after) in counts.items():
        click.echo(f"  transform        {kind}: {regions} region{'s' * (regions != 1)}, "
                   f"{before} bytes -> {after}")  # fmt: skip


def _transform_heads(f, header):
    """The ``container.Transformed`` heads of the frames of the long-form stream of
    ``header``, read from its first frame to its index."""
    f.seek(0)
    container.read_header(f)
    heads = []
    while True:
        at = f.tell()
        if f.read(4) == b"\0\0\0\0":  # the index's mark
            return heads
        f.seek(at)
        for _, payload in container.frame_blocks(f, header):
            if isinstance(payload, container.Transformed):
                heads.append(payload)


@contextlib.contextmanager
def _rewindable(stream):
    """A seekable copy of a pipe (in memory up to 16 MB, then in a temporary file)."""
    with tempfile.SpooledTemporaryFile(max_size=16 << 20) as f:
        while chunk := stream.read(1 << 20):
            f.write(chunk)
        f.seek(0)
        yield f


def _scan_to_end(f, header):
    """(total original length, CRC32 of the first stream, number of streams, the first
    stream's seek index or None) of the seekable ``f`` positioned after its first header;
    leaves ``f`` at its end."""
    total, first_crc, streams, first_index = 0, None, 0, None
    while True:
        if header["version"] >= 4:
            index = container.scan_frames(f, header)
            length, crc = index.length, index.crc
            first_index = index if not streams else first_index
        else:
            for n_bytes, payload in container.read_blocks(f, header["block_size"],
                                                          header["version"]):  # fmt: skip
                if n_bytes == "end":
                    length, crc = payload
        total += length
        first_crc = crc if first_crc is None else first_crc
        streams += 1
        here = f.tell()
        if not f.read(1):
            return total, first_crc, streams, first_index
        f.seek(here)
        header = container.read_header(f, following=True)
