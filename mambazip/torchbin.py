"""Reading the tensors of a PyTorch ``torch.save`` file (``pytorch_model.bin``) without torch.

Original mamba_ssm checkpoints come in this format: a zip archive holding a pickle
(``data.pkl``) and one raw little-endian buffer per storage (``data/<key>``). Unpickling
can run arbitrary code, so the unpickler here resolves only what a state dict of plain
tensors needs (the allow-list idea of ``torch.load(weights_only=True)``): OrderedDict,
torch's tensor-rebuild function and the float storage types. Anything else is refused, and
every view is bounds-checked against its storage before it is taken.
"""

import collections
import io
import lzma
import math
import pickle
import zipfile
import zlib

import numpy as np

from .errors import CheckpointError

_STORAGES = {
    "FloatStorage": "<f4",
    "HalfStorage": "<f2",
    "DoubleStorage": "<f8",
    "BFloat16Storage": "bf16",
}


class _StorageType:
    def __init__(self, name):
        self.name = name


class _Storage:
    """A storage read from the archive: float32 values, and the only thing a tensor may view."""

    def __init__(self, values):
        self.values = values


# Bounds on a tensor's geometry that no state dict comes near; they keep the arithmetic small.
_MAX_NDIM = 16
_MAX_DIM = 1 << 40
# Unpickling may build Python objects larger than the pickle: a one-byte TUPLE1 opcode makes a
# 56-byte tuple. The budget takes this multiple of the pickle's size before it is unpickled.
_PICKLE_EXPANSION = 64


def _geometry(offset, size, stride):
    size, stride = tuple(size), tuple(stride)
    ints = (offset, *size, *stride)
    if (
        not all(isinstance(v, int) and not isinstance(v, bool) for v in ints)
        or len(size) != len(stride)
        or len(size) > _MAX_NDIM
        or not all(0 <= v <= _MAX_DIM for v in ints)
    ):
        raise ValueError(f"bad tensor geometry {offset!r}, {size!r}, {stride!r}")
    return offset, size, stride


class _Unpickler(pickle.Unpickler):
    def __init__(self, data, archive, prefix, budget):
        super().__init__(io.BytesIO(data))
        self.archive = archive
        self.prefix = prefix
        self.budget = budget
        self.storages = {}

    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return self.rebuild_tensor
        if module == "torch" and name in _STORAGES:
            return _StorageType(name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: not a plain tensor")

    def rebuild_tensor(self, storage, offset, size, stride, requires_grad, hooks, metadata=None):
        """torch._utils._rebuild_tensor_v2: a float32 copy of a view of ``storage``, checked
        against the storage and the memory budget before anything is allocated."""
        if not isinstance(storage, _Storage):
            raise ValueError(f"a tensor's storage is a {type(storage).__name__}, not a storage")
        values = storage.values
        offset, size, stride = _geometry(offset, size, stride)
        count = math.prod(size)
        if count == 0:
            return np.zeros(size, dtype=np.float32)
        last = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
        if last >= values.size:
            raise ValueError(f"tensor of size {size} reaches past its storage of {values.size}")
        # A state dict's tensor covers distinct elements of its storage; a view with more
        # elements than the storage (a stride-0 expansion, overlapping strides) is not one.
        if count > values.size - offset:
            raise ValueError(
                f"tensor of size {size} has {count} elements, more than the "
                f"{values.size - offset} its storage holds from offset {offset} (an expanded view)"
            )
        self.budget.take(4 * count)
        strides = [s * values.itemsize for s in stride]
        view = np.lib.stride_tricks.as_strided(values[offset:], size, strides, writeable=False)
        return np.array(view)

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unknown persistent id {_short(pid)}")
        _, kind, key, _, _ = pid
        if not isinstance(kind, _StorageType) or not isinstance(key, str):
            raise pickle.UnpicklingError(f"unknown storage {_short(pid)}")
        if key not in self.storages:
            member = f"{self.prefix}data/{key}"
            info = self.archive.getinfo(member)
            dtype = _STORAGES[kind.name]
            itemsize = 2 if dtype == "bf16" else np.dtype(dtype).itemsize
            if info.file_size % itemsize:
                raise ValueError(f"storage {key} of {info.file_size} bytes is not whole values")
            # The raw bytes and their float32 values, before either is read.
            self.budget.take(info.file_size + 4 * (info.file_size // itemsize))
            raw = self.archive.read(member)
            if dtype == "bf16":
                bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << np.uint32(16)
                values = bits.view(np.float32)
            else:
                values = np.frombuffer(raw, dtype=dtype).astype(np.float32)
            self.storages[key] = _Storage(values)
        return self.storages[key]


def _short(value):
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def read_torch(path, data, budget):
    """Float32 tensors by name of a torch.save'd state dict, the bytes ``data`` of ``path``.
    Every allocation is taken from ``budget`` (a ``limits.Budget``) before it is made."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, EOFError):
        raise CheckpointError(
            f"{path}: not a PyTorch zip checkpoint (files saved by torch < 1.6 are not read)"
        ) from None
    try:
        names = archive.namelist()
        pickles = [n for n in names if n.endswith("data.pkl")]
        if len(pickles) != 1:
            raise ValueError("no data.pkl in the archive")
        prefix = pickles[0][: -len("data.pkl")]
        order = f"{prefix}byteorder"
        if order in names and (
            archive.getinfo(order).file_size > 16 or archive.read(order) != b"little"
        ):
            raise ValueError("big-endian storages")
        info = archive.getinfo(pickles[0])
        budget.take(info.file_size * _PICKLE_EXPANSION)
        state = _Unpickler(archive.read(info), archive, prefix, budget).load()
    except (pickle.UnpicklingError, ValueError, TypeError, KeyError, EOFError, IndexError,
            AttributeError, NotImplementedError, RuntimeError, OverflowError,
            zipfile.BadZipFile, zlib.error, lzma.LZMAError, OSError) as exc:  # fmt: skip
        raise CheckpointError(f"{path}: unreadable PyTorch checkpoint ({_message(exc)})") from None
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, np.ndarray) for k, v in state.items()
    ):
        raise CheckpointError(f"{path}: not a state dict of tensors")
    return dict(state)


def _message(exc):
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
