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
import pickle
import zipfile

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


def _rebuild_tensor(storage, offset, size, stride, requires_grad, hooks, metadata=None):
    size, stride = tuple(size), tuple(stride)
    ints = (offset, *size, *stride)
    if not all(isinstance(v, int) and v >= 0 for v in ints) or len(size) != len(stride):
        raise ValueError(f"bad tensor geometry {offset}, {size}, {stride}")
    if 0 in size:
        return np.zeros(size, dtype=np.float32)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
    if last >= storage.size:
        raise ValueError(f"tensor of size {size} reaches past its storage of {storage.size}")
    strides = [s * storage.itemsize for s in stride]
    view = np.lib.stride_tricks.as_strided(storage[offset:], size, strides, writeable=False)
    return np.array(view)


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
            return _rebuild_tensor
        if module == "torch" and name in _STORAGES:
            return _StorageType(name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: not a plain tensor")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
        _, kind, key, _, _ = pid
        if not isinstance(kind, _StorageType) or not isinstance(key, str):
            raise pickle.UnpicklingError(f"unknown storage {pid!r}")
        if key not in self.storages:
            raw = self.archive.read(f"{self.prefix}data/{key}")
            dtype = _STORAGES[kind.name]
            if dtype == "bf16":
                bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << np.uint32(16)
                self.storages[key] = bits.view(np.float32)
            else:
                self.storages[key] = np.frombuffer(raw, dtype=dtype).astype(np.float32)
        return self.storages[key]


def read_torch(path, data):
    """Float32 tensors by name of a torch.save'd state dict, the bytes ``data`` of ``path``."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        pickles = [n for n in archive.namelist() if n.endswith("data.pkl")]
        if len(pickles) != 1:
            raise ValueError("no data.pkl in the archive")
        prefix = pickles[0][: -len("data.pkl")]
        order = f"{prefix}byteorder"
        if order in archive.namelist() and archive.read(order) != b"little":
            raise ValueError("big-endian storages")
        state = _Unpickler(archive.read(pickles[0]), archive, prefix).load()
    except zipfile.BadZipFile:
        raise CheckpointError(
            f"{path}: not a PyTorch zip checkpoint (files saved by torch < 1.6 are not read)"
        ) from None
    except (pickle.UnpicklingError, ValueError, TypeError, KeyError, EOFError,
            NotImplementedError) as exc:  # fmt: skip
        raise CheckpointError(f"{path}: unreadable PyTorch checkpoint ({exc})") from None
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, np.ndarray) for k, v in state.items()
    ):
        raise CheckpointError(f"{path}: not a state dict of tensors")
    return dict(state)
