"""The model config of a Mamba-1 checkpoint made elsewhere, from whichever description it
has: a transformers ``config.json``, a ``mamba_ssm`` one (d_model, n_layer, ssm_cfg), our
own metadata, or else the shapes of its tensors. Every field is type- and range-checked
here; ``config.ModelConfig`` checks the model's own bounds after.
"""

import dataclasses
import math

from .config import VOCAB, ModelConfig
from .errors import CheckpointError, ConfigError

EMBEDDING = "backbone.embeddings.weight"
MAMBA_SSM_EMBEDDING = "backbone.embedding.weight"


def model_config(path, config, tensors, known=None):
    """(ModelConfig, vocabulary rows of the embedding) from ``known`` when given, else from
    config.json when there is one, else from the tensor shapes. ``tensors`` need only
    ``shape``: nothing is read."""
    if any(".mixer.dt_bias" in n or ".mlp." in n for n in tensors):
        raise CheckpointError(f"{path}: not a Mamba-1 model (Mamba-2 or MLP layers)")
    if EMBEDDING not in tensors:
        raise CheckpointError(
            f"{path}: missing tensor {EMBEDDING} (or {MAMBA_SSM_EMBEDDING}); "
            "not a Mamba checkpoint?"
        )
    embedding = tuple(tensors[EMBEDDING].shape)
    if len(embedding) != 2:
        raise CheckpointError(
            f"{path}: tensor {EMBEDDING} has shape {embedding}, expected (vocab, d_model)"
        )
    vocab, d_model = embedding
    try:
        if known is not None:
            fields = {**dataclasses.asdict(known), "vocab": known.vocab}
        elif config is None:
            fields = _fields_from_shapes(path, tensors, d_model)
        elif "d_model" in config and "n_layer" in config:
            fields = _fields_from_mamba_ssm(config)
        else:
            fields = _fields_from_transformers(path, config)
        declared = fields.pop("vocab", vocab)
        if declared != vocab:
            raise CheckpointError(
                f"{path}: tensor {EMBEDDING} has shape {embedding}, expected "
                f"({declared}, {d_model}) from the config"
            )
        if vocab < VOCAB:
            raise CheckpointError(
                f"{path}: vocabulary of {vocab} symbols is smaller than the {VOCAB} byte "
                "values; only byte-level models can code bytes"
            )
        return ModelConfig(**fields), vocab
    except KeyError as exc:
        raise CheckpointError(f"{path}: unusable model config: no {exc} in config.json") from None
    except (ConfigError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"{path}: unusable model config: {exc}") from None


# Ranges of the integers a config may hold; ModelConfig checks the model's own bounds after.
_MAX_CONFIG_INT = 1 << 31


def _int(c, key, default=None, low=1):
    """``c[key]`` (or ``default`` when absent) as an integer in low..2^31, else ConfigError."""
    value = c.get(key, default) if default is not None else c[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"{key} must be an integer, got {brief(value)}")
    if not low <= value <= _MAX_CONFIG_INT:
        raise ConfigError(f"{key} must be an integer in {low}..{_MAX_CONFIG_INT}, got {value}")
    return value


def _bool(c, key, default):
    value = c.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{key} must be true or false, got {brief(value)}")
    return value


def _float(c, key, default):
    value = c.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise ConfigError(f"{key} must be a number, got {brief(value)}")
    return float(value)


def _str(c, key, default):
    value = c.get(key, default)
    if not isinstance(value, str):
        raise ConfigError(f"{key} must be a string, got {brief(value)}")
    return value


def _rank(c, key, d_model):
    """A dt rank: absent, null or "auto" gives ceil(d_model / 16), as Mamba does."""
    if c.get(key) in (None, "auto"):
        return -(-d_model // 16)
    return _int(c, key)


def _fields_from_transformers(path, c):
    model_type = _str(c, "model_type", "mamba")
    if model_type != "mamba":
        raise CheckpointError(f"{path}: model_type {brief(model_type)} is not Mamba-1 ('mamba')")
    hidden_act = _str(c, "hidden_act", "silu")
    if hidden_act != "silu":
        raise CheckpointError(f"{path}: hidden_act {brief(hidden_act)}: only silu is supported")
    d_model = _int(c, "hidden_size")
    if c.get("intermediate_size") is not None:
        d_inner = _int(c, "intermediate_size")
    else:
        d_inner = _int(c, "expand", 2) * d_model
    fields = {
        "d_model": d_model,
        "n_layer": _int(c, "num_hidden_layers"),
        "d_inner": d_inner,
        "dt_rank": _rank(c, "time_step_rank", d_model),
        "d_state": _int(c, "state_size", 16),
        "d_conv": _int(c, "conv_kernel", 4),
        "norm_eps": _float(c, "layer_norm_epsilon", 1e-5),
        "proj_bias": _bool(c, "use_bias", False),
        "conv_bias": _bool(c, "use_conv_bias", True),
        "tie_embeddings": _bool(c, "tie_word_embeddings", True),
    }
    if "vocab_size" in c:
        fields["vocab"] = _int(c, "vocab_size")
    return fields


def _fields_from_mamba_ssm(c):
    ssm = c.get("ssm_cfg")
    ssm = {} if ssm is None else ssm
    if not isinstance(ssm, dict):
        raise ConfigError(f"ssm_cfg must be an object, got {brief(ssm)}")
    if _str(ssm, "layer", "Mamba1") != "Mamba1" or _int(c, "d_intermediate", 0, low=0):
        raise ConfigError("not a Mamba-1 model (Mamba-2 layers or MLPs)")
    d_model = _int(c, "d_model")
    fields = {
        "d_model": d_model,
        "n_layer": _int(c, "n_layer"),
        "d_inner": _int(ssm, "expand", 2) * d_model,
        "dt_rank": _rank(ssm, "dt_rank", d_model),
        "d_state": _int(ssm, "d_state", 16),
        "d_conv": _int(ssm, "d_conv", 4),
        "norm_eps": _float(c, "norm_epsilon", 1e-5),
        "proj_bias": _bool(ssm, "bias", False),
        "conv_bias": _bool(ssm, "conv_bias", True),
        "tie_embeddings": _bool(c, "tie_embeddings", True),
    }
    if "vocab_size" in c:
        multiple = _int(c, "pad_vocab_size_multiple", 1)
        fields["vocab"] = -(-_int(c, "vocab_size") // multiple) * multiple
    return fields


def _fields_from_shapes(path, tensors, d_model):
    def shape(name, ndim):
        if name not in tensors:
            raise CheckpointError(f"{path}: missing tensor {name}")
        value = tensors[name].shape
        if len(value) != ndim:
            raise CheckpointError(f"{path}: tensor {name} has shape {value}, expected {ndim} dims")
        return value

    mixer = "backbone.layers.0.mixer."
    n_layer = 0
    while f"backbone.layers.{n_layer}.norm.weight" in tensors:
        n_layer += 1
    d_inner, _, d_conv = shape(mixer + "conv1d.weight", 3)
    _, d_state = shape(mixer + "A_log", 2)
    _, dt_rank = shape(mixer + "dt_proj.weight", 2)
    return {
        "d_model": d_model,
        "n_layer": n_layer,
        "d_inner": d_inner,
        "dt_rank": dt_rank,
        "d_state": d_state,
        "d_conv": d_conv,
        "proj_bias": mixer + "in_proj.bias" in tensors,
        "conv_bias": mixer + "conv1d.bias" in tensors,
        "x_proj_bias": mixer + "x_proj.bias" in tensors,
        "head_bias": "lm_head.bias" in tensors,
        "tie_embeddings": "lm_head.weight" not in tensors,
    }


def brief(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
