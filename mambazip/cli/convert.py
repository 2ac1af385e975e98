"""``mambazip convert``: a Hugging Face, mamba_ssm or our own model to our checkpoint format."""

import dataclasses

import click

from .. import checkpoint, plan
from ..errors import MambazipError
from ..files import same_file
from .common import EXIT_HELP, describe, format_fields, say
from .options import ModelPaths, memlimit_option
from .start import load_start


@click.command(epilog=EXIT_HELP)
@click.argument("src", type=click.Path())
@click.argument("dst", type=click.Path(dir_okay=False))
@click.option("-f", "--force", is_flag=True, help="Overwrite DST if it exists.")
@memlimit_option
@click.option("-q", "--quiet", is_flag=True, help="No notes.")
@click.option("-v", "--verbose", is_flag=True, help="Print what was converted.")
def convert(src, dst, force, memlimit, quiet, verbose):
    """Convert a model to a mambazip checkpoint: a Hugging Face or mamba_ssm folder or
    .safetensors file (F32/F16/BF16, sharded or not), or a checkpoint of ours."""
    if src == dst or same_file(src, dst):
        raise click.ClickException(f"{dst}: DST is SRC; nothing written")
    start = load_start(ModelPaths(src), quiet, memlimit).model
    if start.settings is None:
        # Models from elsewhere carry no training settings: record the default preset's.
        start.settings = plan.settings_for(start, resume=False)
    try:
        checkpoint.write(dst, start, force)
    except (MambazipError, OSError, MemoryError) as exc:
        raise click.ClickException(describe(dst, exc)) from None
    if verbose:
        moments = "with Adam moments" if start.moments is not None else "weights only"
        say(f"{dst}: {format_fields(dataclasses.asdict(start.config))}, {moments}")
