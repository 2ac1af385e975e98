"""Where a run starts: the settings from a preset and the overrides, the starting model
(--model, --resume) or the preset's prior, and the checks and writing of --save-model."""

import os

import click

from .. import checkpoint, plan
from ..errors import ConfigError, MambazipError
from ..files import same_file
from .common import say


def load_start(paths, quiet, memlimit=None):
    """The ``plan.Start`` of --model / --resume (``options.ModelPaths``; no model: an empty
    one), its notes said."""
    if paths.model_path and paths.resume_path:
        raise click.UsageError("--model and --resume exclude each other")
    try:
        given = plan.from_checkpoint(paths.model_path, paths.resume_path, memlimit)
    except MambazipError as exc:
        raise click.ClickException(str(exc)) from None
    if not quiet:
        for notice in given.notices:
            say(f"note: {notice}")
    return given


def resolve_start(request, given, memlimit):
    """The run's ``plan.Start`` (``plan.start``) for an ``options.Request``, from the
    ``given`` model, or else the preset's prior unless --prior none."""
    try:
        return plan.start(request.preset, request.overrides, request.seed, request.mix, given,
                          request.prior == "preset", memlimit)  # fmt: skip
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    except MambazipError as exc:  # the prior: missing or altered
        raise click.ClickException(str(exc)) from None


def check_save(path, files, force, option="--save-model", output=None):
    """Refuse before the work rather than after it: an existing file without -f, and, with
    or without -f, a path that is one of the inputs or the output."""
    if path is None:
        return
    if len(files) > 1:
        raise click.UsageError(f"{option} takes one input file")
    for other in files:
        if other != "-" and (other == path or same_file(other, path)):
            raise click.ClickException(f"{path}: {option} names the input file; nothing written")
    if output not in (None, "-") and (output == path or same_file(output, path)):
        raise click.UsageError(f"{option} and -o name the same file")
    if os.path.lexists(path) and not force:
        raise click.ClickException(f"{path} already exists; use -f to overwrite")


def write_model(save_model, stats, force):
    if save_model is not None:
        if stats.learner is None:
            raise MambazipError(
                "no model to save: this stream was coded without the Mamba (--mix cm, or "
                "an empty input); nothing written"
            )
        checkpoint.save(save_model, stats.learner, force)
    return stats


def check_mamba(save_model, settings):
    if save_model is not None and settings.mix is not None and not settings.mix.mamba:
        raise click.UsageError("--save-model saves the Mamba, which --mix cm leaves out")
