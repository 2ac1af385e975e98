"""``mambazip score``: bits/byte of each file under the predictor, as JSON, per byte, or as
an HTML page coloured by cost and by which part of the predictor was trusted."""

import contextlib
import dataclasses
import json
import os
import sys

import click
import numpy as np

from .. import codec, report, signals
from ..errors import MambazipError
from ..files import atomic_output
from ..observe import Report
from ..plan import Layout, Limits, Plan
from .common import EXIT_HELP, KB, Discard, describe, say
from .options import memlimit_option, pack, request_pack, save_option, train_options
from .progress import compile_note, progress_bar
from .start import check_mamba, check_save, load_start, resolve_start, write_model


@dataclasses.dataclass(frozen=True)
class _Outputs:
    """What score writes besides its report: --per-byte, --html, --save-model."""

    per_byte: str
    html_path: str
    save_model: str


@click.command(epilog=EXIT_HELP)
@request_pack
@pack("outputs", _Outputs, "per_byte", "html_path", "save_model")
@click.argument("files", nargs=-1, required=True,
                type=click.Path(dir_okay=False, allow_dash=True))  # fmt: skip
@train_options
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object per file: bytes, ideal_bits, bits_per_byte, "
                   "coded_bytes, coded_bits_per_byte, seconds, bytes_per_second.")  # fmt: skip
@click.option(
    "--per-byte",
    type=click.Path(dir_okay=False),
    help="Write each byte's -log2 p as a float64 .npy (one input only).",
)
@click.option("--html", "html_path", type=click.Path(dir_okay=False),
              help="Write a page that colours each byte by its code length and shows which "
                   "part of the predictor the mixer trusted most, region by region (one "
                   "input only).")  # fmt: skip
@save_option
@memlimit_option
@click.option("-f", "--force", is_flag=True, help="Overwrite existing outputs.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar, no notes.")
def score(files, request, as_json, outputs, memlimit, force, quiet):
    """Run the online loop of compress over FILES and report how well the model predicts
    them, writing no compressed file. bits_per_byte is the ideal code length, the sum of
    -log2 p over every byte (the first predicted after the priming byte 0); coded_bytes is
    what compress would write, header included. --optimizer none: inference only."""
    given = load_start(request.model, quiet, memlimit)
    start = resolve_start(request, given, memlimit)
    per_byte, html_path, save_model = outputs.per_byte, outputs.html_path, outputs.save_model
    check_save(save_model, files, force)
    check_mamba(save_model, start.settings)
    check_save(per_byte, files, force, "--per-byte")
    check_save(html_path, files, force, "--html")
    outputs = [p for p in (save_model, per_byte, html_path) if p is not None]
    if len({os.path.abspath(p) for p in outputs}) < len(outputs):
        raise click.UsageError("--per-byte, --html and --save-model must name different files")
    # The bytes as they are, without transforms: each code length is an input byte's. A
    # short input of a preset codes with its small-input counterpart, as compress codes it.
    layout = Layout(stored_blocks=True, small_input=True, transforms=False)
    plan = Plan(start, Limits(memlimit), layout=layout)
    failed = False
    for path in files:
        bits, trust, head = [], [] if html_path else None, []
        try:
            signals.check()
            stats = _score_one(path, plan, quiet, bits, trust, head)
            if per_byte is not None:
                with atomic_output(per_byte, force) as f:
                    np.save(f, np.concatenate([np.zeros(0), *bits]))
            if html_path is not None:
                _write_html(html_path, path, b"".join(head), bits, trust, stats, force)
            write_model(save_model, stats, force)
        except (MambazipError, OSError, MemoryError) as exc:
            say(describe(path, exc))
            failed = True
            continue
        _report_score(path, stats, as_json)
    if failed:
        sys.exit(1)


def _score_one(path, plan, quiet, bits, trust, head):
    """Compress into nothing, the per-byte analysis an observer: ``bits`` and ``trust``
    receive each chunk's code lengths and trust shares (``observe.Report``), ``head`` the
    first report.SHOWN bytes read."""
    name = "stdin" if path == "-" else os.path.basename(path)
    with contextlib.ExitStack() as stack:
        src = sys.stdin.buffer if path == "-" else stack.enter_context(open(path, "rb"))
        size = None if path == "-" else os.fstat(src.fileno()).st_size
        compile_note(plan.start.settings, quiet)
        with progress_bar(size, name, quiet) as progress:
            analysis = Report(progress, per_byte=bits, trust=trust)
            return codec.encode(_Head(src, head, report.SHOWN), Discard(), plan, analysis)


class _Head:
    """Reads through ``f`` and keeps the first ``limit`` bytes in ``parts``."""

    def __init__(self, f, parts, limit):
        self.f, self.parts, self.left = f, parts, limit

    def read(self, n):
        data = self.f.read(n)
        if self.left > 0 and data:
            self.parts.append(data[: self.left])
            self.left -= len(self.parts[-1])
        return data


def _write_html(out, path, head, bits, trust, stats, force):
    bits = np.concatenate([np.zeros(0), *bits])
    n = bits.shape[0]
    names = ("mamba",)
    shares = np.ones((n, 1), np.float32)  # the Mamba alone: it has all the trust
    if trust:
        shares = np.concatenate(trust)
        names = stats.part_names
    page = report.render(head, bits, shares, names, f"mambazip score: {os.path.basename(path)}")
    with atomic_output(out, force) as f:
        f.write(page.encode())


def _report_score(path, stats, as_json):
    n = stats.original_bytes
    report = {
        "file": path,
        "bytes": n,
        "ideal_bits": stats.ideal_bits,
        "bits_per_byte": stats.ideal_bits / n if n else 0.0,
        "coded_bytes": stats.compressed_bytes,
        "coded_bits_per_byte": 8.0 * stats.compressed_bytes / n if n else 0.0,
        "seconds": stats.seconds,
        "bytes_per_second": n / max(stats.seconds, 1e-9),
    }
    if as_json:
        click.echo(json.dumps(report))
        return
    click.echo(
        f"{path}: {n} bytes, {report['bits_per_byte']:.4f} bits/byte ideal "
        f"({stats.ideal_bits:.1f} bits), {stats.compressed_bytes} bytes coded "
        f"({report['coded_bits_per_byte']:.4f} bits/byte), {stats.seconds:.2f} s, "
        f"{report['bytes_per_second'] / KB:.2f} KB/s"
    )
