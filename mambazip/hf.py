"""Reading Mamba-1 weights made elsewhere: Hugging Face ``transformers`` and ``mamba_ssm``.

Accepted: a folder with ``config.json`` and ``model.safetensors`` (or shards listed in
``model.safetensors.index.json``, or one ``pytorch_model.bin`` as mamba_ssm saves it), or a
single such file, whose config is then inferred from the tensor shapes. ``mamba_ssm`` names
the embedding ``backbone.embedding`` (transformers: ``backbone.embeddings``) and writes its
own ``config.json`` (d_model, n_layer, ssm_cfg); everything else is named alike. Tensors of
any float dtype become float32; vocabularies padded above 256 are cut to the 256 byte values.

PyTorch files are read by ``torchbin`` without torch, plain tensors only.
"""

import dataclasses
import hashlib
import json
import os
import struct

import numpy as np
from safetensors import SafetensorError, deserialize

from . import torchbin
from .config import VOCAB, ModelConfig
from .errors import CheckpointError, ConfigError
from .params import tensor_table

EMBEDDING = "backbone.embeddings.weight"
MAMBA_SSM_EMBEDDING = "backbone.embedding.weight"
VOCAB_TENSORS = (EMBEDDING, "lm_head.weight", "lm_head.bias")
INDEX = "model.safetensors.index.json"
_FLOAT_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}
# A header is JSON of a few KB per tensor; this bounds what a hostile file makes us parse.
_MAX_HEADER = 100 << 20


@dataclasses.dataclass
class Weights:
    """Float32 tensors under transformers names, the model config, and where they came from."""

    config: ModelConfig
    tensors: dict
    metadata: dict
    sha256: str
    notices: list


def read_weights(path):
    """(float32 tensors by name, metadata dict, SHA-256 of the file) of one safetensors or
    PyTorch (``torch.save``, a zip archive) file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise CheckpointError(f"{path}: {exc.strerror or exc}") from None
    sha = hashlib.sha256(data).hexdigest()
    if data[:4] == b"PK\x03\x04":
        return torchbin.read_torch(path, data), {}, sha
    return *_read_safetensors(path, data), sha


def _read_safetensors(path, data):
    try:
        entries = deserialize(data)
    except SafetensorError as exc:
        raise CheckpointError(f"{path}: not a valid safetensors file ({exc})") from None
    # deserialize has validated the header; it does not return the metadata, so read it here.
    (header_len,) = struct.unpack("<Q", data[:8])
    if header_len > _MAX_HEADER:
        raise CheckpointError(f"{path}: safetensors header of {header_len} bytes is too large")
    metadata = json.loads(data[8 : 8 + header_len]).get("__metadata__") or {}
    tensors = {}
    for name, entry in entries:
        tensors[name] = _to_float32(path, name, entry)
    return tensors, metadata


def _to_float32(path, name, entry):
    dtype, raw, shape = entry["dtype"], entry["data"], tuple(entry["shape"])
    if dtype == "BF16":
        # bfloat16 is the top half of a float32: widening is exact.
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << np.uint32(16)
        return bits.view(np.float32).reshape(shape)
    if dtype not in _FLOAT_DTYPES:
        raise CheckpointError(f"{path}: tensor {name} has dtype {dtype}, expected a float type")
    return np.frombuffer(raw, dtype=_FLOAT_DTYPES[dtype]).astype(np.float32).reshape(shape)


def load_weights(path):
    """``Weights`` of a transformers or mamba_ssm folder, or of one safetensors file."""
    if os.path.isdir(path):
        files, config_json = _folder_files(path)
        tensors, digests = {}, []
        for file in files:
            part, _, sha = read_weights(file)
            tensors.update(part)
            digests.append(f"{os.path.basename(file)} {sha}\n")
        if config_json is not None:
            with open(config_json, "rb") as f:
                raw = f.read()
            digests.insert(0, f"config.json {hashlib.sha256(raw).hexdigest()}\n")
            config = _parse_json(config_json, raw)
        else:
            config = None
        # A folder has no single file to hash: hash the list of its files' hashes.
        sha = hashlib.sha256("".join(digests).encode()).hexdigest()
        metadata = {}
    else:
        tensors, metadata, sha = read_weights(path)
        config = None
    notices = []
    tensors = _rename_mamba_ssm(tensors)
    cfg = _config(path, config, tensors, notices)
    return Weights(cfg, tensors, metadata, sha, notices)


def _folder_files(folder):
    """(weight files, config.json or None) of a model folder."""
    config = os.path.join(folder, "config.json")
    config = config if os.path.isfile(config) else None
    single = os.path.join(folder, "model.safetensors")
    index = os.path.join(folder, INDEX)
    if os.path.isfile(single):
        return [single], config
    if os.path.isfile(index):
        with open(index, "rb") as f:
            data = _parse_json(index, f.read())
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{index}: no weight_map")
        names = sorted(set(weight_map.values()))
        for name in names:
            if not isinstance(name, str) or os.path.basename(name) != name:
                raise CheckpointError(f"{index}: bad shard name {name!r}")
            if not os.path.isfile(os.path.join(folder, name)):
                raise CheckpointError(f"{folder}: shard {name} listed in {INDEX} is missing")
        return [os.path.join(folder, name) for name in names], config
    pickled = os.path.join(folder, "pytorch_model.bin")
    if os.path.isfile(pickled):
        return [pickled], config
    if any(f.endswith(".bin") for f in os.listdir(folder)):
        raise CheckpointError(
            f"{folder}: sharded PyTorch checkpoints are not read; re-save the model with "
            "save_pretrained(..., safe_serialization=True)"
        )
    raise CheckpointError(
        f"{folder}: no model.safetensors, {INDEX} or pytorch_model.bin in this folder"
    )


def _parse_json(path, raw):
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    return data


def _rename_mamba_ssm(tensors):
    if MAMBA_SSM_EMBEDDING in tensors and EMBEDDING not in tensors:
        tensors = dict(tensors)
        tensors[EMBEDDING] = tensors.pop(MAMBA_SSM_EMBEDDING)
    return tensors


def _config(path, config, tensors, notices):
    """The ModelConfig: from config.json when there is one, else from the tensor shapes.
    Cuts a padded vocabulary to 256 in ``tensors``."""
    if any(".mixer.dt_bias" in n or ".mlp." in n for n in tensors):
        raise CheckpointError(f"{path}: not a Mamba-1 model (Mamba-2 or MLP layers)")
    if EMBEDDING not in tensors:
        raise CheckpointError(
            f"{path}: missing tensor {EMBEDDING} (or {MAMBA_SSM_EMBEDDING}); "
            "not a Mamba checkpoint?"
        )
    embedding = tensors[EMBEDDING]
    if embedding.ndim != 2:
        raise CheckpointError(
            f"{path}: tensor {EMBEDDING} has shape {embedding.shape}, expected (vocab, d_model)"
        )
    vocab, d_model = embedding.shape
    try:
        if config is None:
            fields = _fields_from_shapes(path, tensors, d_model)
        elif "d_model" in config and "n_layer" in config:
            fields = _fields_from_mamba_ssm(config)
        else:
            fields = _fields_from_transformers(path, config)
        declared = fields.pop("vocab", vocab)
        if declared != vocab:
            raise CheckpointError(
                f"{path}: tensor {EMBEDDING} has shape {embedding.shape}, expected "
                f"({declared}, {d_model}) from the config"
            )
        _cut_vocab(path, tensors, vocab, notices)
        return ModelConfig(**fields)
    except KeyError as exc:
        raise CheckpointError(f"{path}: unusable model config: no {exc} in config.json") from None
    except (ConfigError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"{path}: unusable model config: {exc}") from None


def _cut_vocab(path, tensors, vocab, notices):
    if vocab < VOCAB:
        raise CheckpointError(
            f"{path}: vocabulary of {vocab} symbols is smaller than the {VOCAB} byte values; "
            "only byte-level models can code bytes"
        )
    if vocab > VOCAB:
        for name in VOCAB_TENSORS:
            if name in tensors:
                tensors[name] = tensors[name][:VOCAB]
        notices.append(
            f"{path}: vocabulary of {vocab} symbols cut to the {VOCAB} byte values "
            "(the rest is taken as padding)"
        )


def _auto_rank(rank, d_model):
    return -(-d_model // 16) if rank in (None, "auto") else rank


def _fields_from_transformers(path, c):
    if c.get("model_type", "mamba") != "mamba":
        raise CheckpointError(f"{path}: model_type {c['model_type']!r} is not Mamba-1 ('mamba')")
    if c.get("hidden_act", "silu") != "silu":
        raise CheckpointError(f"{path}: hidden_act {c['hidden_act']!r}: only silu is supported")
    d_model = c["hidden_size"]
    fields = {
        "d_model": d_model,
        "n_layer": c["num_hidden_layers"],
        "d_inner": c.get("intermediate_size") or c.get("expand", 2) * d_model,
        "dt_rank": _auto_rank(c.get("time_step_rank"), d_model),
        "d_state": c.get("state_size", 16),
        "d_conv": c.get("conv_kernel", 4),
        "norm_eps": float(c.get("layer_norm_epsilon", 1e-5)),
        "proj_bias": c.get("use_bias", False),
        "conv_bias": c.get("use_conv_bias", True),
        "tie_embeddings": c.get("tie_word_embeddings", True),
    }
    if "vocab_size" in c:
        fields["vocab"] = c["vocab_size"]
    return fields


def _fields_from_mamba_ssm(c):
    ssm = c.get("ssm_cfg") or {}
    if ssm.get("layer", "Mamba1") != "Mamba1" or c.get("d_intermediate", 0):
        raise ConfigError("not a Mamba-1 model (Mamba-2 layers or MLPs)")
    d_model = c["d_model"]
    fields = {
        "d_model": d_model,
        "n_layer": c["n_layer"],
        "d_inner": ssm.get("expand", 2) * d_model,
        "dt_rank": _auto_rank(ssm.get("dt_rank"), d_model),
        "d_state": ssm.get("d_state", 16),
        "d_conv": ssm.get("d_conv", 4),
        "norm_eps": float(c.get("norm_epsilon", 1e-5)),
        "proj_bias": ssm.get("bias", False),
        "conv_bias": ssm.get("conv_bias", True),
        "tie_embeddings": c.get("tie_embeddings", True),
    }
    if "vocab_size" in c:
        multiple = c.get("pad_vocab_size_multiple", 1)
        fields["vocab"] = -(-c["vocab_size"] // multiple) * multiple
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


def expected_names(cfg):
    """The transformers tensor names a model of ``cfg`` has."""
    names = []
    for t in tensor_table(cfg):
        if t.present:
            if t.hf_name.startswith("backbone.layers."):
                names.extend(t.hf_name.format(i=i) for i in range(cfg.n_layer))
            else:
                names.append(t.hf_name)
    return names
