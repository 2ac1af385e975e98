"""Where a run starts: the settings from a preset and the overrides, the starting model
(--model, --resume) or the preset's prior, and the checks and writing of --save-model."""

import os

import click

from .. import checkpoint, priors
from ..config import resolve_settings
from ..errors import ConfigError, MambazipError
from ..files import same_file
from .common import say
from .options import MODEL_KEYS


def load_start(model_path, resume_path, quiet, memlimit=None):
    """(checkpoint or None, resume) from --model / --resume."""
    if model_path and resume_path:
        raise click.UsageError("--model and --resume exclude each other")
    path = model_path or resume_path
    if path is None:
        return None, False
    try:
        start = checkpoint.load(path, memlimit=memlimit)
    except MambazipError as exc:
        raise click.ClickException(str(exc)) from None
    notices = list(start.notices)
    if resume_path and start.moments is None:
        notices.append(f"{path}: no Adam moments in this checkpoint; they start from zero")
    if not quiet:
        for notice in notices:
            say(f"note: {notice}")
    return start, bool(resume_path)


def prior_and_settings(preset, seed, prior, opts, start, resume, memlimit):
    """The preset's prior (None without one, with --prior none, or when --model or --resume
    gave the start) and the settings (``_settings``)."""
    settings = _settings(preset, seed, opts, start, resume)
    if start is not None or prior != "preset":
        return None, settings
    try:
        return priors.for_settings(preset, settings, memlimit), settings
    except MambazipError as exc:
        raise click.ClickException(str(exc)) from None


def _settings(preset, seed, opts, start, resume):
    """Settings from the preset and options, or for a starting checkpoint, whose shape wins
    over the preset and must not be contradicted by explicit shape options."""
    shape = {k: opts.pop(k) for k in MODEL_KEYS}
    mix = opts.pop("mix")
    try:
        if start is None:
            return resolve_settings(preset, model=shape, train=opts, seed=seed, mix=mix)
        for key, value in shape.items():
            have = getattr(start.config, key)
            if value is not None and value != have:
                flag = "--" + key.replace("_", "-")
                raise click.UsageError(f"{flag} {value} contradicts the model's {key} {have}")
        if mix == "cm":
            raise click.UsageError("--mix cm leaves out the Mamba that --model/--resume start")
        return start.settings_for(resume, preset, train=opts, seed=seed, mix=mix)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


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
