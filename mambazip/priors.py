"""Pretrained starting models (priors) shipped in ``models/priors/``: a preset starts its Mamba
from its prior, named by SHA-256 in the preset's JSON ("prior"), so that the model knows
what bytes are before the file's first byte. A file compressed from a prior records the
prior's SHA-256 in its header, as ``--model`` does, and decompression finds the prior here
by that name: no flag is needed. Every prior a release ever wrote into a file stays in
``models/priors/`` under its SHA-256 (with its manifest, ``SHA.json``), so that the file
decodes in every later release.
"""

import re
from importlib import resources

import numpy as np

from . import checkpoint
from .config import load_preset, models_dir
from .errors import CheckpointError

FOLDER = "priors"
_SHA = re.compile(r"[0-9a-f]{64}")


def is_sha(name):
    """Whether name has the form of a prior's name: a SHA-256 in 64 lowercase hex digits."""
    return isinstance(name, str) and _SHA.fullmatch(name) is not None


def preset_prior(preset):
    """The SHA-256 of ``preset``'s prior, or None when it has none."""
    sha = load_preset(preset, keep_prior=True).get("prior")
    if sha is not None and not is_sha(sha):
        raise CheckpointError(f"preset {preset}: prior {sha!r} is not a SHA-256")
    return sha


def _file(sha):
    # One name per joinpath: the Traversable protocol takes a single name on Python 3.10.
    return models_dir().joinpath(FOLDER).joinpath(f"{sha}.safetensors")


def shipped(sha):
    """Whether this installation holds the prior ``sha``."""
    return is_sha(sha) and _file(sha).is_file()


def load(sha, memlimit=None):
    """The prior ``sha`` as a ``checkpoint.Checkpoint``; one clear line when it is missing
    from this installation or its bytes are not the ones its name promises."""
    path = _file(sha)
    if not path.is_file():
        raise CheckpointError(
            f"the prior {sha} is not in this installation's models/{FOLDER}/; reinstall "
            f"mambazip (or compress with --prior none)"
        )
    with resources.as_file(path) as real:
        model = checkpoint.load(real, memlimit=memlimit)
        if model.digest() != sha:
            raise CheckpointError(
                f"{real}: this prior's bytes have SHA-256 {model.digest()}, not the {sha} "
                f"it is named by: the file is altered or damaged; reinstall mambazip"
            )
    return model


# Control bytes (all below 32 but tab, newline, form feed and carriage return; and 127)
# in the first block: 0.000 in every text file of the benchmark corpus, 0.086 in a terminal
# transcript (calgary/trans, which the prior helps), 0.33 to 0.96 in its binaries (geo, obj1,
# obj2, sum, pic, ptt5, kennedy.xls), which a prior trained on text costs 1 to 2 % more
# than the seeded init.
TEXT_CONTROL_LIMIT = 0.25


def looks_like_text(block):
    """Whether a prior trained on text should start the Mamba on data beginning so. Not on
    an empty input: there is nothing to predict, and naming a prior costs header bytes."""
    if not block:
        return False
    counts = np.bincount(np.frombuffer(block, dtype=np.uint8), minlength=256)
    control = int(counts[:32].sum() - counts[[9, 10, 12, 13]].sum() + counts[127])
    return control <= TEXT_CONTROL_LIMIT * len(block)
