"""Reading Mamba-1 weights made elsewhere: Hugging Face ``transformers`` and ``mamba_ssm``.

Accepted: a folder with ``config.json`` and ``model.safetensors`` (or shards listed in
``model.safetensors.index.json``, or one ``pytorch_model.bin`` as mamba_ssm saves it), or a
single such file, whose config is then inferred from the tensor shapes. ``mamba_ssm`` names
the embedding ``backbone.embedding`` (transformers: ``backbone.embeddings``) and writes its
own ``config.json`` (d_model, n_layer, ssm_cfg); everything else is named alike. Tensors of
any float dtype become float32; vocabularies padded above 256 are cut to the 256 byte values.

PyTorch files are read by ``torchbin`` without torch, plain tensors only; the model config
is read from whichever description a checkpoint has by ``hf_config``.
"""

import contextlib
import dataclasses
import hashlib
import math
import os
import struct

import numpy as np

from . import torchbin
from .config import VOCAB, ModelConfig
from .errors import CheckpointError, MemoryLimitError
from .hf_config import EMBEDDING, MAMBA_SSM_EMBEDDING, brief, model_config
from .limits import MAX_JSON_BYTES, Budget, loads_json
from .params import tensor_table

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


class CheckpointMemoryError(CheckpointError, MemoryLimitError):
    """A model file that would need more memory than the limit (``--memlimit``) to load."""


def budget_for(path, memlimit=None):
    """The ``limits.Budget`` that loading the model at ``path`` takes its memory from."""
    return Budget(memlimit, f"{path}: loading this model", CheckpointMemoryError)


class _Spec:
    """A tensor known by its header (safetensors) or pickle (PyTorch), not yet read."""

    def __init__(self, name, dtype, shape, source):
        self.name, self.dtype, self.shape, self.source = name, dtype, tuple(shape), source

    @property
    def ndim(self):
        return len(self.shape)

    def read(self):
        return self.source.read(self.name)


def read_weights(path, budget=None):
    """(float32 tensors by name, metadata dict, SHA-256 of the file) of one safetensors or
    PyTorch (``torch.save``, a zip archive) file, every tensor read. The file's bytes and
    every tensor are taken from ``budget`` (default: a fresh one of DEFAULT_MEMLIMIT) before
    they are read."""
    budget = budget_for(path) if budget is None else budget
    with contextlib.ExitStack() as stack:
        source = _open(path, budget, stack)
        source.check(list(source.specs))
        tensors = {name: spec.read() for name, spec in source.specs.items()}
        return tensors, source.metadata, source.sha256()


def _open(path, budget, stack):
    """A ``_Safetensors`` or ``_Torch`` source of the file ``path``, kept open in ``stack``:
    its header parsed, nothing of its tensors read. The file's size is taken from
    ``budget``, a conservative bound on what reading it holds at once."""
    try:
        f = stack.enter_context(open(path, "rb"))  # noqa: SIM115 (closed by the stack)
        stat = os.fstat(f.fileno())
        magic = f.read(4)
    except OSError as exc:
        raise CheckpointError(f"{path}: {exc.strerror or exc}") from None
    budget.take(stat.st_size)
    source = (_Torch if magic == b"PK\x03\x04" else _Safetensors)(path, f, stat.st_size, budget)
    source.stat = (stat.st_size, stat.st_mtime_ns)
    return source


class _Source:
    path: str
    f: object
    stat: tuple
    specs: dict
    metadata: dict
    # Whether tensors no config names are read: where they hold their bytes as stored
    # (safetensors), not where a small member may inflate to a large one (a zip archive).
    reads_unknown: bool

    def check(self, names):
        """Refuse what reading the tensors ``names`` would make larger than they are."""

    def sha256(self):
        """The SHA-256 of the file, read again in chunks; refuses a file that changed."""
        digest, at = hashlib.sha256(), 0
        try:
            self.f.seek(0)
            while chunk := self.f.read(1 << 20):
                digest.update(chunk)
                at += len(chunk)
            stat = os.fstat(self.f.fileno())
        except OSError as exc:
            raise CheckpointError(f"{self.path}: {exc.strerror or exc}") from None
        if (at, stat.st_mtime_ns) != self.stat or stat.st_size != at:
            raise CheckpointError(f"{self.path}: the file changed while it was read")
        return digest.hexdigest()

    def _changed(self):
        return CheckpointError(f"{self.path}: the file changed while it was read")


class _Torch(_Source):
    reads_unknown = False

    def __init__(self, path, f, size, budget):
        self.path, self.f, self.metadata = path, f, {}
        self.file = torchbin.TorchFile(path, f, budget)
        self.specs = {
            name: _Spec(name, t.dtype, t.shape, self) for name, t in self.file.tensors.items()
        }

    def check(self, names):
        self.file.check_storages([n for n in names if n in self.file.tensors])

    def read(self, name):
        return self.file.read(name)


def _invalid(path, why):
    return CheckpointError(f"{path}: not a valid safetensors file ({why})")


class _Safetensors(_Source):
    """A safetensors file, checked as the format requires (header bounded, str->str metadata,
    offsets covering the data exactly once, byte ranges matching dtype and shape) before any
    tensor is read."""

    reads_unknown = True

    def __init__(self, path, f, size, budget):
        self.path, self.f, self.budget = path, f, budget
        if size < 8:
            raise _invalid(path, f"{size} bytes, shorter than the 8-byte header length")
        f.seek(0)
        (header_len,) = struct.unpack("<Q", self._read_exactly(8))
        if header_len > _MAX_HEADER:
            raise _invalid(
                path, f"header of {header_len} bytes, more than the {_MAX_HEADER} allowed"
            )
        if 8 + header_len > size:
            raise _invalid(path, f"header of {header_len} bytes reaches past the end of the file")

        def invalid(message):
            return _invalid(path, message.removeprefix(f"{path}: "))

        raw = self._read_exactly(header_len)
        header = loads_json(raw, path, max_bytes=_MAX_HEADER, error=invalid)
        if not isinstance(header, dict):
            raise _invalid(path, "the header is not a JSON object")
        metadata = header.pop("__metadata__", None) or {}
        if not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
        ):
            raise _invalid(path, "__metadata__ is not a map of strings to strings")
        body = size - 8 - header_len
        entries = []
        for name, entry in header.items():
            begin, end, dtype, shape = _entry(path, name, entry)
            entries.append((begin, end, name, dtype, shape))
        entries.sort()
        at = 0
        for begin, end, name, _, _ in entries:
            if begin != at:
                raise _invalid(path, f"tensor {name} starts at byte {begin}, expected {at}")
            at = end
        if at != body:
            raise _invalid(path, f"the tensors cover {at} bytes of the {body} after the header")
        self.metadata = metadata
        self.start = 8 + header_len
        self.entries = {name: (begin, end) for begin, end, name, _, _ in entries}
        self.specs = {
            name: _Spec(name, dtype, shape, self)
            for _, _, name, dtype, shape in sorted(entries, key=lambda e: e[2])
        }

    def _read_exactly(self, n):
        try:
            raw = self.f.read(n)
        except OSError as exc:
            raise CheckpointError(f"{self.path}: {exc.strerror or exc}") from None
        if len(raw) != n:
            raise self._changed()
        return raw

    def read(self, name):
        """Tensor ``name`` as float32, its float32 size taken from the budget first."""
        spec = self.specs[name]
        if spec.dtype not in _WIDTHS:
            raise _not_float(self.path, spec)
        self.budget.take(4 * math.prod(spec.shape))
        begin, end = self.entries[name]
        try:
            self.f.seek(self.start + begin)
        except OSError as exc:
            raise CheckpointError(f"{self.path}: {exc.strerror or exc}") from None
        return _to_float32(spec.dtype, self._read_exactly(end - begin), spec.shape)


def _not_float(path, spec):
    return CheckpointError(
        f"{path}: tensor {spec.name} has dtype {spec.dtype}, expected a float type "
        "(F32, F16, BF16 or F64)"
    )


# Bytes per value of every safetensors dtype, and the float ones read here.
_ITEMSIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2,
    "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip
_WIDTHS = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "BF16": "bf16"}


def _entry(path, name, entry):
    """(begin, end, dtype, shape) of one header entry, its byte range checked against its
    dtype and shape."""
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        raise _invalid(path, f"tensor {name}: expected dtype, shape and data_offsets")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in _ITEMSIZE:
        raise _invalid(path, f"tensor {name}: unknown dtype {brief(dtype)}")
    if not _ints(shape) or len(shape) > 16:
        raise _invalid(path, f"tensor {name}: shape {brief(shape)} is not a list of sizes")
    if not _ints(offsets) or len(offsets) != 2 or offsets[0] > offsets[1]:
        raise _invalid(path, f"tensor {name}: data_offsets {brief(offsets)} is no byte range")
    begin, end = offsets
    if end - begin != math.prod(shape) * _ITEMSIZE[dtype]:
        raise _invalid(
            path,
            f"tensor {name}: {end - begin} bytes for shape {shape} of {dtype}, expected "
            f"{math.prod(shape) * _ITEMSIZE[dtype]}",
        )
    return begin, end, dtype, tuple(shape)


def _ints(value):
    return isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    )


def _to_float32(dtype, raw, shape):
    if dtype == "BF16":
        # bfloat16 is the top half of a float32: widening is exact.
        bits = np.frombuffer(raw, dtype="<u2")
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).reshape(shape)
    return np.frombuffer(raw, dtype=_WIDTHS[dtype]).astype(np.float32).reshape(shape)


def load_weights(path, memlimit=None, budget=None, config_from_metadata=None, prefixes=()):
    """``Weights`` of a transformers or mamba_ssm folder, or of one safetensors or PyTorch
    file. The model config comes first (config.json; else ``config_from_metadata(metadata)``
    for a file whose metadata holds one, when the function is given and returns one; else the
    tensor shapes), and every tensor it names, also under each of ``prefixes``, must have its
    shape and a float dtype before any tensor is read. Of a PyTorch file only those are read.
    What loading allocates, over all files of a folder, is taken from one budget: ``budget``
    or a new one of ``memlimit`` bytes (None: limits.DEFAULT_MEMLIMIT)."""
    budget = budget_for(path, memlimit) if budget is None else budget
    with contextlib.ExitStack() as stack:
        config, digests, metadata = None, [], {}
        if os.path.isdir(path):
            files, config_json = _folder_files(path)
            if config_json is not None:
                raw = _read_small(config_json)
                digests.append(f"config.json {hashlib.sha256(raw).hexdigest()}\n")
                config = _parse_json(config_json, raw)
            sources = [_open(file, budget, stack) for file in files]
        else:
            sources = [_open(path, budget, stack)]
            metadata = sources[0].metadata
        specs = {}
        for source in sources:
            specs.update(source.specs)
        specs = _rename_mamba_ssm(specs)
        known = None
        if config_from_metadata is not None and metadata:
            known = config_from_metadata(metadata)
        cfg, vocab = model_config(path, config, specs, known)
        wanted = _check_shapes(specs, cfg, vocab, prefixes)
        for source in sources:
            source.check([specs[n].name for n in wanted if specs[n].source is source])
        tensors = {
            name: spec.read()
            for name, spec in specs.items()
            if name in wanted or spec.source.reads_unknown
        }
        notices = []
        _cut_vocab(path, tensors, vocab, notices)
        if os.path.isdir(path):
            digests += [f"{os.path.basename(s.path)} {s.sha256()}\n" for s in sources]
            # A folder has no single file to hash: hash the list of its files' hashes.
            sha = hashlib.sha256("".join(digests).encode()).hexdigest()
        else:
            sha = sources[0].sha256()
    return Weights(cfg, tensors, metadata, sha, notices)


def expected_shapes(cfg, vocab=VOCAB):
    """{transformers name: shape} of the tensors a model of ``cfg`` has, its vocabulary
    tensors with ``vocab`` rows (a checkpoint's vocabulary may be padded above 256)."""
    shapes = {}
    for t in tensor_table(cfg):
        if not t.present:
            continue
        layered = t.hf_name.startswith("backbone.layers.")
        shape = t.shape[1:] if layered else t.shape
        if t.hf_layout == "t":
            shape = shape[::-1]
        elif t.hf_layout == "conv":
            shape = (shape[1], 1, shape[0])
        if t.hf_name in VOCAB_TENSORS:
            shape = (vocab, *shape[1:])
        names = [t.hf_name.format(i=i) for i in range(cfg.n_layer)] if layered else [t.hf_name]
        for name in names:
            shapes[name] = tuple(shape)
    return shapes


def _check_shapes(specs, cfg, vocab, prefixes):
    """The names of ``specs`` that a model of ``cfg`` has (also under ``prefixes``), each
    checked for a float dtype and the shape the config gives it; nothing is read."""
    wanted = []
    for name, shape in expected_shapes(cfg, vocab).items():
        for prefix in ("", *prefixes):
            spec = specs.get(prefix + name)
            if spec is None:
                continue  # a missing tensor is named by whoever needs it
            if spec.dtype not in _WIDTHS:
                raise _not_float(spec.source.path, spec)
            if spec.shape != shape:
                raise CheckpointError(
                    f"{spec.source.path}: tensor {spec.name} has shape {spec.shape}, expected "
                    f"{shape} from the model config"
                )
            wanted.append(prefix + name)
    return set(wanted)


def _read_small(path):
    """The bytes of a JSON file that a folder brings, refused beyond MAX_JSON_BYTES."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_JSON_BYTES + 1)
    except OSError as exc:
        raise CheckpointError(f"{path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_JSON_BYTES:
        raise CheckpointError(f"{path}: larger than the {MAX_JSON_BYTES} bytes a JSON file may be")
    return raw


def _folder_files(folder):
    """(weight files, config.json or None) of a model folder."""
    config = os.path.join(folder, "config.json")
    config = config if os.path.isfile(config) else None
    single = os.path.join(folder, "model.safetensors")
    index = os.path.join(folder, INDEX)
    if os.path.isfile(single):
        return [single], config
    if os.path.isfile(index):
        data = _parse_json(index, _read_small(index))
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{index}: no weight_map")
        for name in weight_map.values():
            if not isinstance(name, str) or not name or os.path.basename(name) != name:
                raise CheckpointError(f"{index}: bad shard name {brief(name)}")
        names = sorted(set(weight_map.values()))
        for name in names:
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
    data = loads_json(raw, path, error=CheckpointError)
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    return data


def _rename_mamba_ssm(tensors):
    if MAMBA_SSM_EMBEDDING in tensors and EMBEDDING not in tensors:
        tensors = dict(tensors)
        tensors[EMBEDDING] = tensors.pop(MAMBA_SSM_EMBEDDING)
    return tensors


def _cut_vocab(path, tensors, vocab, notices):
    if vocab > VOCAB:
        for name in VOCAB_TENSORS:
            if name in tensors:
                tensors[name] = tensors[name][:VOCAB]
        notices.append(
            f"{path}: vocabulary of {vocab} symbols cut to the {VOCAB} byte values "
            "(the rest is taken as padding)"
        )


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
