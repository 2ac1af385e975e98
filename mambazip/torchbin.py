"""Reading the tensors of a PyTorch ``torch.save`` file (``pytorch_model.bin``) without torch.

Original mamba_ssm checkpoints come in this format: a zip archive holding a pickle
(``data.pkl``) and one raw little-endian buffer per storage (``data/<key>``). Unpickling
can run arbitrary code, so the unpickler here resolves only what a state dict of plain
tensors needs (the allow-list idea of ``torch.load(weights_only=True)``): OrderedDict,
torch's tensor-rebuild function and the float storage types. Anything else is refused.

Reading is in two steps, so that nothing is inflated before it is known to be wanted:
``TorchFile`` unpickles the state dict into tensors that hold only their geometry (every
view bounds-checked against the size its storage declares, and that size against the zip
member's), and the caller checks their shapes against a model config before ``read``
inflates a storage.
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

# Storage types and the safetensors name of their dtype.
_STORAGES = {
    "FloatStorage": "F32",
    "HalfStorage": "F16",
    "DoubleStorage": "F64",
    "BFloat16Storage": "BF16",
}
_NUMPY = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}
_ITEMSIZE = {"F32": 4, "F16": 2, "F64": 8, "BF16": 2}


class _StorageType:
    def __init__(self, name):
        self.name = name


class _Storage:
    """A storage of the archive, not yet read: its zip member, dtype and declared values."""

    def __init__(self, key, member, dtype, numel):
        self.key, self.member, self.dtype, self.numel = key, member, dtype, numel


class _Tensor:
    """A view of a storage, known by its geometry; ``TorchFile.read`` makes it float32."""

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.shape, self.stride = storage, offset, size, stride

    @property
    def dtype(self):
        return self.storage.dtype

    @property
    def count(self):
        return math.prod(self.shape)


# Bounds on a tensor's geometry that no state dict comes near; they keep the arithmetic small.
_MAX_NDIM = 16
_MAX_DIM = 1 << 40
# Unpickling may build Python objects larger than the pickle: a one-byte TUPLE1 opcode makes a
# 56-byte tuple. The budget takes this multiple of the pickle's size before it is unpickled.
_PICKLE_EXPANSION = 64
_ERRORS = (pickle.UnpicklingError, ValueError, TypeError, KeyError, EOFError, IndexError,
           AttributeError, NotImplementedError, RuntimeError, OverflowError,
           zipfile.BadZipFile, zlib.error, lzma.LZMAError, OSError)  # fmt: skip


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
    def __init__(self, data, archive, prefix):
        super().__init__(io.BytesIO(data))
        self.archive = archive
        self.prefix = prefix
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
        """torch._utils._rebuild_tensor_v2: a view of ``storage``, checked against the values
        the storage declares; nothing is read."""
        if not isinstance(storage, _Storage):
            raise ValueError(f"a tensor's storage is a {type(storage).__name__}, not a storage")
        offset, size, stride = _geometry(offset, size, stride)
        count = math.prod(size)
        if count == 0:
            np.zeros(size, dtype=np.float32)  # allocates nothing, refuses what numpy cannot shape
        else:
            last = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
            if last >= storage.numel:
                raise ValueError(
                    f"tensor of size {size} reaches past its storage of {storage.numel}"
                )
            # A state dict's tensor covers distinct elements of its storage; a view with more
            # elements than the storage (a stride-0 expansion, overlapping strides) is not one.
            if count > storage.numel - offset:
                raise ValueError(
                    f"tensor of size {size} has {count} elements, more than the "
                    f"{storage.numel - offset} its storage holds from offset {offset} "
                    "(an expanded view)"
                )
        return _Tensor(storage, offset, size, stride)

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unknown persistent id {_short(pid)}")
        _, kind, key, _, numel = pid
        if not isinstance(kind, _StorageType) or not isinstance(key, str):
            raise pickle.UnpicklingError(f"unknown storage {_short(pid)}")
        if not isinstance(numel, int) or isinstance(numel, bool) or not 0 <= numel <= _MAX_DIM:
            raise pickle.UnpicklingError(f"storage {_short(key)} of {_short(numel)} values")
        if key not in self.storages:
            member = self.archive.getinfo(f"{self.prefix}data/{key}")
            dtype = _STORAGES[kind.name]
            itemsize = _ITEMSIZE[dtype]
            # The member's declared size is what reading it inflates, no further (zipfile
            # stops there): it is the storage's size, checked before anything is read, here
            # against the pickle's count and by TorchFile.check_storages against the tensors.
            if member.file_size % itemsize:
                raise ValueError(f"storage {key} of {member.file_size} bytes is not whole values")
            if member.file_size > numel * itemsize:
                raise ValueError(
                    f"storage {_short(key)} is a member of {member.file_size} bytes, more "
                    f"than its {numel} {dtype} values take"
                )
            self.storages[key] = _Storage(key, member, dtype, member.file_size // itemsize)
        storage = self.storages[key]
        if storage.dtype != _STORAGES[kind.name]:
            raise ValueError(f"storage {_short(key)} is both {storage.dtype} and {kind.name}")
        return storage


def _short(value):
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class TorchFile:
    """The tensors of a torch.save'd state dict in the open binary file ``f`` of ``path``,
    by name (``tensors``: objects with ``shape`` and ``dtype``, F32/F16/BF16/F64), read one
    at a time by ``read``. Every allocation is taken from ``budget`` (a ``limits.Budget``)
    before it is made; errors are one-line CheckpointErrors."""

    def __init__(self, path, f, budget):
        self.path, self.budget = path, budget
        self.values = {}
        try:
            self.archive = zipfile.ZipFile(f)
        except (zipfile.BadZipFile, ValueError, EOFError, OSError):
            raise CheckpointError(
                f"{path}: not a PyTorch zip checkpoint (files saved by torch < 1.6 are not read)"
            ) from None
        with self._errors():
            names = self.archive.namelist()
            pickles = [n for n in names if n.endswith("data.pkl")]
            if len(pickles) != 1:
                raise ValueError("no data.pkl in the archive")
            prefix = pickles[0][: -len("data.pkl")]
            order = f"{prefix}byteorder"
            if order in names and (
                self.archive.getinfo(order).file_size > 16 or self.archive.read(order) != b"little"
            ):
                raise ValueError("big-endian storages")
            info = self.archive.getinfo(pickles[0])
            budget.take(info.file_size * _PICKLE_EXPANSION)
            unpickler = _Unpickler(self.archive.read(info), self.archive, prefix)
            state = unpickler.load()
        if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, _Tensor) for k, v in state.items()
        ):
            raise CheckpointError(f"{path}: not a state dict of tensors")
        self.tensors = dict(state)
        self.storages = unpickler.storages

    def _errors(self):
        return _OneLine(self.path)

    def check_storages(self, names):
        """Refuse a storage that declares more values than the tensors ``names`` that view it
        have elements: with their shapes checked, that bounds what reading them inflates."""
        used = collections.Counter()
        for name in names:
            used[self.tensors[name].storage.key] += self.tensors[name].count
        for key, count in used.items():
            numel = self.storages[key].numel
            if numel > count:
                raise CheckpointError(
                    f"{self.path}: unreadable PyTorch checkpoint (storage {_short(key)} holds "
                    f"{numel} values, more than the {count} of the tensors that view it)"
                )

    def read(self, name):
        """Tensor ``name`` as a float32 array, its storage read (once) and converted."""
        tensor = self.tensors[name]
        if tensor.count == 0:
            return np.zeros(tensor.shape, dtype=np.float32)
        with self._errors():
            values = self._values(tensor.storage)
            self.budget.take(4 * tensor.count)
            strides = [s * values.itemsize for s in tensor.stride]
            view = np.lib.stride_tricks.as_strided(
                values[tensor.offset :], tensor.shape, strides, writeable=False
            )
            return np.array(view)

    def _values(self, storage):
        if storage.key not in self.values:
            # The raw bytes and their float32 values, before either is read.
            self.budget.take(storage.member.file_size + 4 * storage.numel)
            raw = self.archive.read(storage.member)
            if len(raw) != storage.member.file_size:
                raise ValueError(f"storage {_short(storage.key)} is truncated")
            if storage.dtype == "BF16":
                bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << np.uint32(16)
                values = bits.view(np.float32)
            else:
                values = np.frombuffer(raw, dtype=_NUMPY[storage.dtype]).astype(np.float32)
            self.values[storage.key] = values
        return self.values[storage.key]


class _OneLine:
    """Turns what a malformed archive raises into one CheckpointError line."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is not None and isinstance(exc, _ERRORS):
            raise CheckpointError(
                f"{self.path}: unreadable PyTorch checkpoint ({_message(exc)})"
            ) from None
        return False


def _message(exc):
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
