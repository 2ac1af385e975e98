"""Hostile model files: every one is refused with one line before it costs memory or time.

Each test builds its file here, in tmp_path, from a few hundred bytes (the zip bomb from
1.5 MB). The files that would expand to gigabytes are loaded in a subprocess whose address
space is limited to 1 GiB (RLIMIT_AS): they must fail with our error, not a MemoryError.
"""

import collections
import json
import os
import pickle
import resource
import shutil
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

import mambazip
from mambazip import checkpoint, hf, limits
from mambazip.errors import CheckpointError, MemoryLimitError
from mambazip.params import init_params

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
TINY_MODEL = {"d_model": 8, "n_layer": 1, "d_state": 4, "d_conv": 3}
ADDRESS_SPACE = 1 << 30


# --- PyTorch files without torch -----------------------------------------------------------


class _Global:
    """Pickles as the GLOBAL ``module name``: what torch's own pickles reference."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):
        raise AssertionError("only pickled")


REBUILD = _Global("torch._utils", "_rebuild_tensor_v2")


class _Storage:
    def __init__(self, key, numel, kind="FloatStorage"):
        self.key, self.numel, self.kind = key, numel, kind


class _Tensor:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride))

    def __reduce__(self):
        return REBUILD, (*self.args, False, collections.OrderedDict())


class _TorchPickler(pickle._Pickler):
    """Writes the pickle ``torch.save`` writes for a state dict (protocol 2, storages as
    persistent ids), from the stand-ins above."""

    dispatch: ClassVar[dict] = dict(pickle._Pickler.dispatch)
    dispatch[_Global] = lambda self, obj: self.write(
        pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode()
    )

    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            return ("storage", _Global("torch", obj.kind), obj.key, "cpu", obj.numel)
        return None


def torch_pickle(state):
    import io

    out = io.BytesIO()
    _TorchPickler(out, protocol=2).dump(state)
    return out.getvalue()


def write_torch(path, state, storages):
    """A torch.save zip: ``state`` pickled, ``storages`` {key: raw bytes} stored."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", torch_pickle(state))
        archive.writestr("archive/byteorder", b"little")
        for key, raw in storages.items():
            archive.writestr(f"archive/data/{key}", raw)
    return path


def write_zip(path, members):
    """A zip archive written by hand: ``members`` [(name, method, crc, size, payload)] with
    payload already compressed (method 8, raw deflate) or stored (method 0)."""
    local, central = bytearray(), bytearray()
    for name, method, crc, size, payload in members:
        name = name.encode()
        offset = len(local)
        sizes = (crc, len(payload), size, len(name), 0)
        local += struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 33, *sizes)
        local += name + payload
        central += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, method, 0, 33, *sizes,
                               0, 0, 0, 0, offset)  # fmt: skip
        central += name
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members),
                      len(central), len(local), 0)  # fmt: skip
    Path(path).write_bytes(bytes(local + central + end))
    return path


def deflated_zeros(chunks, chunk=1 << 24):
    """(raw deflate stream, crc) of ``chunks`` x ``chunk`` zero bytes, from one chunk's
    compressed block repeated: after a full flush each block stands alone."""
    block = zlib.compressobj(9, zlib.DEFLATED, -15)
    one = block.compress(bytes(chunk)) + block.flush(zlib.Z_FULL_FLUSH)
    again = block.compress(bytes(chunk)) + block.flush(zlib.Z_FULL_FLUSH)
    assert one == again
    tail = block.flush(zlib.Z_FINISH)
    crc = 0
    zeros = bytes(chunk)
    for _ in range(chunks):
        crc = zlib.crc32(zeros, crc)
    return one * chunks + tail, crc


def run_limited(*args):
    """``python -m mambazip ARGS`` with its address space limited to ADDRESS_SPACE."""

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    proc = subprocess.run(
        [sys.executable, "-m", "mambazip", *map(str, args)],
        capture_output=True,
        preexec_fn=limit,
        timeout=300,
    )
    return proc.returncode, proc.stdout, proc.stderr.decode()


def test_the_address_space_limit_bites():
    # Without the limit the expansions above would show as a MemoryError, not pass silently.
    code, _, stderr = run_limited_python("bytearray(1536 << 20)")
    assert code != 0 and "MemoryError" in stderr


def run_limited_python(source):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    proc = subprocess.run([sys.executable, "-c", source], capture_output=True,
                          preexec_fn=limit, timeout=60)  # fmt: skip
    return proc.returncode, proc.stdout, proc.stderr.decode()


def assert_one_line(code, stdout, stderr):
    assert "Traceback" not in stderr and "MemoryError" not in stderr, stderr
    assert code == 1, (code, stderr)
    assert stdout == b""
    line = stderr.removesuffix("\n")
    assert "\n" not in line and line.startswith("mambazip: "), stderr
    return line


def test_the_stand_in_pickler_writes_what_torchbin_reads(tmp_path):
    values = np.arange(4, dtype=np.float32)
    state = {"w": _Tensor(_Storage("0", 4), 0, (2, 2), (1, 2))}
    path = write_torch(tmp_path / "ok.bin", state, {"0": values.tobytes()})
    tensors, _, _ = hf.read_weights(path)
    np.testing.assert_array_equal(tensors["w"], [[0, 2], [1, 3]])


def test_a_storage_holding_more_than_its_tensors_is_refused_before_it_is_read(tmp_path):
    # Values no tensor uses would be inflated for nothing: the member is bounded by them.
    state = {"w": _Tensor(_Storage("0", 6), 1, (2, 2), (2, 1))}
    path = write_torch(tmp_path / "pytorch_model.bin", state, {"0": bytes(24)})
    with pytest.raises(CheckpointError, match=r"storage '0' holds 6 values, more than the 4 "):
        hf.read_weights(path)
    state = {"w": _Tensor(_Storage("0", 1), 0, (1,), (1,))}
    path = write_torch(tmp_path / "pytorch_model.bin", state, {"0": bytes(8)})
    with pytest.raises(CheckpointError, match=r"storage '0' is a member of 8 bytes, more than "):
        hf.read_weights(path)


@pytest.mark.parametrize(
    ("size", "stride", "message"),
    [
        ((20_000, 20_000), (0, 0), "has 400000000 elements, more than the 1 its storage holds"),
        ((1_000_000, 1_000_000), (0, 0), "has 1000000000000 elements, more than the 1"),
        ((1_000_000, 1_000_000), (1_000_000, 1), "reaches past its storage of 1"),
    ],
)
def test_a_view_larger_than_its_storage_is_refused_in_bounded_memory(tmp_path, size, stride,
                                                                     message):  # fmt: skip
    # 627 bytes that expanded to 1.6 GB (and 1e6 x 1e6 to a MemoryError traceback).
    state = {"backbone.embeddings.weight": _Tensor(_Storage("0", 1), 0, size, stride)}
    path = write_torch(tmp_path / "pytorch_model.bin", state, {"0": b"\0\0\0\0"})
    assert path.stat().st_size < 1000
    out = tmp_path / "out.st"
    line = assert_one_line(*run_limited("convert", path, out))
    assert f"{path}: unreadable PyTorch checkpoint" in line
    assert message in line
    assert not out.exists()
    with pytest.raises(CheckpointError, match=message):
        checkpoint.load(str(path))


@pytest.mark.parametrize("command", ["compress --resume", "score --model", "convert"])
def test_every_command_that_loads_a_model_refuses_the_expansion_cleanly(tmp_path, command):
    state = {"backbone.embeddings.weight": _Tensor(_Storage("0", 1), 0, (20_000, 20_000),
                                                   (0, 0))}  # fmt: skip
    bad = write_torch(tmp_path / "pytorch_model.bin", state, {"0": bytes(4)})
    sample = tmp_path / "x"
    sample.write_bytes(b"some text to compress " * 20)
    args = {
        "compress --resume": ("compress", sample, "--resume", bad),
        "score --model": ("score", sample, "--model", bad),
        "convert": ("convert", bad, tmp_path / "out.st"),
    }[command]
    before = sorted(p.name for p in tmp_path.iterdir())
    line = assert_one_line(*run_limited(*args))
    assert line.startswith(f"mambazip: {bad}: unreadable PyTorch checkpoint (tensor of size")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def fixture_bin_tensors():
    """The float32 tensors of the mamba_ssm PyTorch fixture, by name, in its order."""
    tensors, _, _ = hf.read_weights(FIXTURES / "mamba-ssm-bin" / "pytorch_model.bin")
    return tensors


def write_bin_with(folder, tensors, name, shape, chunks):
    """``folder`` with the mamba_ssm fixture's config.json and a pytorch_model.bin of
    ``tensors`` in which tensor ``name`` has ``shape`` and a storage of ``chunks`` x 16 MiB
    deflated zeros: a zip bomb a few KB per 16 MiB on disk, sound for any zip reader."""
    folder.mkdir()
    shutil.copy(FIXTURES / "mamba-ssm-bin" / "config.json", folder)
    size = chunks << 24
    state, members = collections.OrderedDict(), []
    for i, (key, value) in enumerate(tensors.items()):
        if key == name:
            strides = [int(np.prod(shape[d + 1 :])) for d in range(len(shape))]
            state[key] = _Tensor(_Storage(str(i), size // 4), 0, shape, strides)
            payload, crc = deflated_zeros(chunks)
            members.append((f"archive/data/{i}", 8, crc, size, payload))
        else:
            raw = np.ascontiguousarray(value, dtype="<f4").tobytes()
            state[key] = _Tensor(_Storage(str(i), value.size), 0, value.shape,
                                 [s // 4 for s in value.strides])  # fmt: skip
            members.append((f"archive/data/{i}", 0, zlib.crc32(raw), len(raw), raw))
    pkl = torch_pickle(state)
    members.insert(0, ("archive/data.pkl", 0, zlib.crc32(pkl), len(pkl), pkl))
    path = write_zip(folder / "pytorch_model.bin", members)
    with zipfile.ZipFile(path) as archive:  # the archive is sound: a reader would inflate it
        assert archive.getinfo(f"archive/data/{list(tensors).index(name)}").file_size == size
    return path


def peak_rss(*args):
    """(exit code, stderr, peak resident memory in bytes) of ``python -m mambazip ARGS``,
    measured by a parent of its own so that no other child of the tests counts."""
    probe = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run([sys.executable, '-m', 'mambazip', *sys.argv[1:]],"
        " capture_output=True)\n"
        "sys.stderr.write(p.stderr.decode())\n"
        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe, *map(str, args)], capture_output=True,
                          timeout=300, check=True)  # fmt: skip
    code, kib = proc.stdout.split()
    return int(code), proc.stderr.decode(), int(kib) << 10


def start_up_rss(tmp_path):
    """Peak RSS of a ``convert`` that fails at once (no such model): what importing numpy,
    numba and our kernels costs in this environment (145 MB here; CI's run of af8cd18 saw
    198 MB for the failing convert of a bomb, so this is measured, not assumed)."""
    code, _, peak = peak_rss("convert", tmp_path / "no-such-model", tmp_path / "none.st")
    assert code == 1
    return peak


def test_a_zip_bomb_of_the_wrong_shape_is_refused_before_it_is_inflated(tmp_path):
    # A pytorch_model.bin of under a MB whose in_proj storage inflates to 512 MiB, a tensor
    # of (16 M, 8) where config.json wants (32, 8). It fitted the old 2 GiB default (raw,
    # float32 values and the tensor's copy: 1.5 GiB) and reached 1.58 GB of RSS before the
    # shape was checked; the shapes are now checked against the config before any storage is
    # read, and the member's declared size is bounded by the tensors that view it.
    name = "backbone.layers.0.mixer.in_proj.weight"
    chunks = 32
    path = write_bin_with(tmp_path / "model", fixture_bin_tensors(), name,
                          ((chunks << 24) // 32, 8), chunks)  # fmt: skip
    assert path.stat().st_size < 1 << 20
    out = tmp_path / "out.st"
    code, stderr, peak = peak_rss("convert", path.parent, out)
    line = assert_one_line(code, b"", stderr)
    assert line == (
        f"mambazip: {path}: tensor {name} has shape (16777216, 8), expected (32, 8) from the "
        "model config"
    )
    assert not out.exists()
    # What importing numpy, numba and our kernels costs, and nothing of the 512 MiB.
    assert peak < start_up_rss(tmp_path) + ((chunks << 24) >> 4), peak
    budget = hf.budget_for(path)
    with pytest.raises(CheckpointError, match=r"has shape \(16777216, 8\), expected \(32, 8\)"):
        hf.load_weights(str(path.parent), budget=budget)
    # The file's bytes and the pickle's expansion were taken, no storage.
    assert budget.used < 2 << 20


def test_a_bomb_in_a_tensor_the_config_does_not_name_is_never_read(tmp_path):
    tensors = fixture_bin_tensors()
    tensors["backbone.layers.0.mixer.unused"] = np.zeros(1, np.float32)
    path = write_bin_with(tmp_path / "model", tensors, "backbone.layers.0.mixer.unused",
                          (1 << 24,), 4)  # fmt: skip
    budget = hf.budget_for(path)
    weights = hf.load_weights(str(path.parent), budget=budget)
    assert "backbone.layers.0.mixer.unused" not in weights.tensors
    assert budget.used < 2 << 20


def test_a_padded_vocabulary_too_large_for_the_memory_limit_is_refused_before_inflating(
    tmp_path,
):
    # Shapes that agree with the config (a vocabulary of 50 M padded rows) but 1.5 GiB of
    # deflated zeros in 1.5 MB: with its float32 copy 3 GiB, over the default limit; refused
    # from the member's declared size, in a process limited to 1 GiB.
    chunks = 96
    rows = (chunks << 24) // 4 // 8
    path = write_bin_with(tmp_path / "model", fixture_bin_tensors(),
                          "backbone.embedding.weight", (rows, 8), chunks)  # fmt: skip
    config = json.loads((path.parent / "config.json").read_text())
    (path.parent / "config.json").write_text(json.dumps({**config, "vocab_size": rows}))
    assert path.stat().st_size < 2 << 20
    out = tmp_path / "out.st"
    line = assert_one_line(*run_limited("convert", path.parent, out))
    limit = limits.format_bytes(limits.DEFAULT_MEMLIMIT)
    assert f"{path.parent}: loading this model needs 3.0 GiB of memory" in line
    assert f"more than the limit of {limit} (--memlimit raises it)" in line
    assert not out.exists()
    with pytest.raises(MemoryLimitError) as info:
        checkpoint.load(str(path.parent))
    assert isinstance(info.value, CheckpointError)


@pytest.mark.parametrize(
    ("storage", "message"),
    [
        (5, "a tensor's storage is a int, not a storage"),
        ("archive/data/0", "a tensor's storage is a str, not a storage"),
        (_Global("torch", "FloatStorage"), "a tensor's storage is a _StorageType"),
    ],
)
def test_a_pickle_passing_something_else_as_storage_is_refused(tmp_path, run_cli, storage,
                                                               message):  # fmt: skip
    state = {"backbone.embeddings.weight": _Tensor(storage, 0, (2,), (1,))}
    path = write_torch(tmp_path / "pytorch_model.bin", state, {"0": bytes(8)})
    line = run_cli("convert", path, tmp_path / "out.st").error_line(1)
    assert f"{path}: unreadable PyTorch checkpoint ({message}" in line
    assert not (tmp_path / "out.st").exists()


@pytest.mark.parametrize(
    ("offset", "size", "stride", "message"),
    [
        (-1, (2,), (1,), "bad tensor geometry -1"),
        (0, (2,), (1, 1), "bad tensor geometry"),
        (0, (True,), (1,), "bad tensor geometry"),
        (0, (2.0,), (1,), "bad tensor geometry"),
        (0, (1 << 41,), (0,), "bad tensor geometry"),
        (0, (0, 1 << 40, 1 << 40), (0, 0, 0), "array is too big"),
    ],
)
def test_bad_tensor_geometry_is_one_line(tmp_path, offset, size, stride, message):
    state = {"w": _Tensor(_Storage("0", 2), offset, size, stride)}
    path = write_torch(tmp_path / "pytorch_model.bin", state, {"0": bytes(8)})
    with pytest.raises(CheckpointError, match="unreadable PyTorch checkpoint") as info:
        hf.read_weights(path)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_pickle_that_would_expand_past_the_budget_is_refused_before_unpickling(tmp_path):
    # One-byte TUPLE1 opcodes build 56-byte tuples: the pickle's size times 64 is taken.
    pkl = b"\x80\x02K\x00" + b"\x85" * (1 << 20) + b"."
    with zipfile.ZipFile(tmp_path / "pytorch_model.bin", "w") as archive:
        archive.writestr("archive/data.pkl", pkl)
    path = tmp_path / "pytorch_model.bin"
    # The file's 1 MiB, then 64 x the pickle's 1 MiB.
    with pytest.raises(MemoryLimitError, match=r"needs 65\.0 MiB of memory, more than the limit"):
        checkpoint.load(str(path), memlimit=32 << 20)
    with pytest.raises(CheckpointError, match="not a state dict of tensors"):
        checkpoint.load(str(path), memlimit=66 << 20)


def test_a_storage_that_is_not_whole_values_is_refused(tmp_path):
    state = {"w": _Tensor(_Storage("0", 1), 0, (1,), (1,))}
    path = write_torch(tmp_path / "pytorch_model.bin", state, {"0": bytes(6)})
    with pytest.raises(CheckpointError, match="storage 0 of 6 bytes is not whole values"):
        hf.read_weights(path)


# --- safetensors headers -------------------------------------------------------------------


def safetensors_file(path, header, body=b""):
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    Path(path).write_bytes(struct.pack("<Q", len(raw)) + raw + body)
    return path


F32_2X2 = {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}


@pytest.mark.parametrize(
    ("header", "body", "message"),
    [
        ({"w": {**F32_2X2, "data_offsets": [0, 1 << 40]}}, bytes(16),
         "tensor w: 1099511627776 bytes for shape [2, 2] of F32, expected 16"),
        ({"w": {**F32_2X2, "shape": [1 << 20, 1 << 20]}}, bytes(16),
         "tensor w: 16 bytes for shape [1048576, 1048576] of F32"),
        ({"w": F32_2X2}, bytes(8), "the tensors cover 16 bytes of the 8 after the header"),
        ({"w": F32_2X2, "v": F32_2X2}, bytes(32), "starts at byte 0, expected 16"),
        ({"w": {**F32_2X2, "data_offsets": [16, 0]}}, bytes(16), "is no byte range"),
        ({"w": {**F32_2X2, "shape": [2, -2]}}, bytes(16), "is not a list of sizes"),
        ({"w": {**F32_2X2, "shape": "2x2"}}, bytes(16), "is not a list of sizes"),
        ({"w": {**F32_2X2, "shape": [True, 4]}}, bytes(16), "is not a list of sizes"),
        ({"w": {**F32_2X2, "dtype": "F128"}}, bytes(16), "unknown dtype 'F128'"),
        ({"w": {**F32_2X2, "dtype": ["F32"]}}, bytes(16), "unknown dtype ['F32']"),
        ({"w": [0, 16]}, bytes(16), "expected dtype, shape and data_offsets"),
        ({"__metadata__": {"a": 1}}, b"", "__metadata__ is not a map of strings to strings"),
        ([1, 2], b"", "the header is not a JSON object"),
        (b"[" * 100_000 + b"]" * 100_000, b"", "JSON nested deeper than 64 levels"),
        (b'{"w": ', b"", "not valid JSON"),
    ],
)  # fmt: skip
def test_a_bad_safetensors_header_is_one_line(tmp_path, run_cli, header, body, message):
    path = safetensors_file(tmp_path / "m.safetensors", header, body)
    line = run_cli("score", path, "--model", path).error_line(1)
    assert f"{path}: not a valid safetensors file (" in line
    assert message in line


def test_a_header_length_past_the_end_or_over_the_bound_is_refused(tmp_path):
    path = tmp_path / "m.safetensors"
    path.write_bytes(struct.pack("<Q", 1 << 60) + b"{}")
    with pytest.raises(CheckpointError, match="header of 1152921504606846976 bytes, more than"):
        checkpoint.load(str(path))
    path.write_bytes(struct.pack("<Q", 100) + b"{}")
    with pytest.raises(CheckpointError, match="header of 100 bytes reaches past the end"):
        checkpoint.load(str(path))
    path.write_bytes(b"\1\0")
    with pytest.raises(CheckpointError, match="2 bytes, shorter than the 8-byte header length"):
        checkpoint.load(str(path))


def rewrite_safetensors(path, name, dtype=None, shape=None):
    """Rewrite the safetensors file ``path`` with tensor ``name`` declared as ``dtype`` and
    ``shape`` (default: as it was); its bytes are a hole of the size they declare, so a
    large tensor costs no disk. Returns the rewritten tensor's byte count."""
    tensors, metadata, _ = hf.read_weights(path)
    header, body, offset = {"__metadata__": metadata}, [], 0
    for key in sorted(tensors):
        value = np.ascontiguousarray(tensors[key], dtype="<f4")
        entry = {"dtype": "F32", "shape": list(value.shape)}
        raw = value.tobytes()
        if key == name:
            entry = {"dtype": dtype or "F32", "shape": list(shape or value.shape)}
            raw = int(np.prod(entry["shape"])) * hf._ITEMSIZE[entry["dtype"]]
        size = raw if isinstance(raw, int) else len(raw)
        header[key] = {**entry, "data_offsets": [offset, offset + size]}
        body.append(raw)
        offset += size
    head = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for raw in body:
            if isinstance(raw, int):
                f.seek(raw, os.SEEK_CUR)
                hole = raw
            else:
                f.write(raw)
        f.truncate()
    return hole


def copy_model(tmp_path, source):
    target = tmp_path / source.replace("/", "-")
    copy = shutil.copy if (FIXTURES / source).is_file() else shutil.copytree
    copy(FIXTURES / source, target)
    return target


X_PROJ = "backbone.layers.0.mixer.x_proj.weight"


@pytest.mark.parametrize(
    ("source", "file", "name", "shape", "expected"),
    [
        ("untied", "model.safetensors", X_PROJ, (1 << 22, 16), (9, 16)),
        ("untied/model.safetensors", "", X_PROJ, (1 << 22, 16), (9, 16)),
        ("sharded", None, X_PROJ, (1 << 22, 16), (9, 16)),
        ("mamba-ssm", "model.safetensors", "backbone.embedding.weight", (256, 1 << 18),
         (256, 8)),
    ],
)  # fmt: skip
def test_a_safetensors_tensor_of_the_wrong_shape_is_refused_before_it_is_read(
    tmp_path, source, file, name, shape, expected
):
    # Every loader path: a folder with config.json, a single file (its config inferred from
    # the other tensors), a shard of a sharded folder, mamba_ssm's naming.
    path = copy_model(tmp_path, source)
    if file is None:
        index = json.loads((path / hf.INDEX).read_text())
        file = index["weight_map"][name]
    weights = path / file if file else path
    assert rewrite_safetensors(weights, name, shape=shape) >= 1 << 26
    budget = hf.budget_for(path)
    with pytest.raises(CheckpointError) as info:
        hf.load_weights(str(path), budget=budget)
    assert str(info.value) == (
        f"{weights}: tensor {name} has shape {shape}, expected {expected} from the model config"
    )
    # Only the files' sizes were taken: no tensor was read (each takes its floats first).
    files = [path] if path.is_file() else [p for p in path.iterdir() if p.suffix != ".json"]
    assert budget.used == sum(p.stat().st_size for p in files if p.name != "reference.npz")


def test_a_wrong_shape_in_a_large_safetensors_file_costs_no_memory(tmp_path):
    path = copy_model(tmp_path, "untied")
    hole = rewrite_safetensors(path / "model.safetensors", X_PROJ, shape=(1 << 23, 16))
    assert hole == 512 << 20
    out = tmp_path / "out.st"
    code, stderr, peak = peak_rss("convert", path, out)
    line = assert_one_line(code, b"", stderr)
    assert f"tensor {X_PROJ} has shape (8388608, 16), expected (9, 16)" in line
    assert not out.exists()
    assert peak < start_up_rss(tmp_path) + (hole >> 4), peak


@pytest.mark.parametrize("dtype", ["I32", "U8", "BOOL"])
def test_a_tensor_of_a_wrong_dtype_is_refused_before_it_is_read(tmp_path, run_cli, dtype):
    path = copy_model(tmp_path, "untied")
    rewrite_safetensors(path / "model.safetensors", X_PROJ, dtype=dtype)
    budget = hf.budget_for(path)
    message = (
        f"{path / 'model.safetensors'}: tensor {X_PROJ} has dtype {dtype}, expected a float "
        "type (F32, F16, BF16 or F64)"
    )
    with pytest.raises(CheckpointError) as info:
        hf.load_weights(str(path), budget=budget)
    assert str(info.value) == message
    assert budget.used == (path / "model.safetensors").stat().st_size
    assert run_cli("convert", path, tmp_path / "out.st").error_line(1) == f"mambazip: {message}"


# --- our checkpoints -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def ours():
    """(tensors, metadata) of a checkpoint of ours with Adam moments."""
    settings = mambazip.resolve_settings(model=TINY_MODEL)
    params = init_params(settings.model, 3)
    flat = params.flat
    moments = (np.full_like(flat, 0.5), np.full_like(flat, 0.25))
    ckpt = checkpoint.Checkpoint(settings.model, params, moments, 7, 70, settings)
    data = ckpt.to_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    metadata = header.pop("__metadata__")
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        raw = data[8 + n + begin : 8 + n + end]
        tensors[name] = np.frombuffer(raw, dtype="<f4").reshape(entry["shape"]).copy()
    return tensors, metadata


def write_ours(path, tensors, metadata, **trainer_changes):
    metadata = dict(metadata)
    if trainer_changes:
        trainer = json.loads(metadata["mambazip.trainer"])
        metadata["mambazip.trainer"] = json.dumps({**trainer, **trainer_changes})
    Path(path).write_bytes(checkpoint.safetensors_bytes(tensors, metadata))
    return path


def test_our_checkpoint_builder_writes_a_loadable_file(tmp_path, ours):
    ckpt = checkpoint.load(str(write_ours(tmp_path / "a.st", *ours)))
    assert (ckpt.step, ckpt.learned) == (7, 70)
    assert np.all(ckpt.moments[1] >= 0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"moments": "yes"}, "moments 'yes', expected true or false"),
        ({"moments": 1}, "moments 1, expected true or false"),
        ({"step": "7"}, "step '7'"),
        ({"learned": -1}, "learned -1"),
        ({"step": 1.5}, "step 1.5"),
    ],
)
def test_mistyped_trainer_metadata_is_one_line(tmp_path, run_cli, ours, change, message):
    path = write_ours(tmp_path / "a.st", *ours, **change)
    sample = tmp_path / "x"
    sample.write_bytes(b"abc" * 10)
    line = run_cli("compress", sample, "--resume", path).error_line(1)
    assert f"{path}: malformed checkpoint metadata ({message})" in line
    assert not (tmp_path / "x.mz").exists()


@pytest.mark.parametrize("key", ["mambazip.settings", "mambazip.trainer"])
def test_deeply_nested_checkpoint_metadata_is_one_line(tmp_path, ours, key):
    tensors, metadata = ours
    metadata = {**metadata, key: "[" * 100_000 + "]" * 100_000}
    path = write_ours(tmp_path / "a.st", tensors, metadata)
    with pytest.raises(CheckpointError) as info:
        checkpoint.load(str(path))
    assert str(info.value) == (
        f"{path}: malformed checkpoint metadata ({key}: JSON nested deeper than 64 levels)"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [("{", "not valid JSON"), ("[1]", "must be JSON objects"), ('{"a": NaN}', "NaN")],
)
def test_settings_metadata_that_is_not_an_object_is_one_line(tmp_path, ours, value, message):
    tensors, metadata = ours
    path = write_ours(tmp_path / "a.st", tensors, {**metadata, "mambazip.settings": value})
    with pytest.raises(CheckpointError, match="malformed checkpoint metadata") as info:
        checkpoint.load(str(path))
    assert message in str(info.value)


# --- config.json ---------------------------------------------------------------------------


def folder_with_config(tmp_path, source, change=None, raw=None):
    folder = tmp_path / "model"
    shutil.copytree(FIXTURES / source, folder)
    (folder / "reference.npz").unlink()
    if raw is None:
        config = json.loads((folder / "config.json").read_text())
        config.update(change)
        raw = json.dumps(config)
    (folder / "config.json").write_text(raw)
    return folder


def test_a_deeply_nested_config_json_is_one_line(tmp_path, run_cli):
    folder = folder_with_config(tmp_path, "untied", raw='{"a": ' + "[" * 100_000 + "]" * 100_000)
    line = run_cli("convert", folder, tmp_path / "out.st").error_line(1)
    assert line == f"mambazip: {folder / 'config.json'}: JSON nested deeper than 64 levels"
    assert not (tmp_path / "out.st").exists()


def test_pad_vocab_size_multiple_zero_is_one_line(tmp_path, run_cli):
    folder = folder_with_config(tmp_path, "mamba-ssm", {"pad_vocab_size_multiple": 0})
    line = run_cli("convert", folder, tmp_path / "out.st").error_line(1)
    assert "unusable model config: pad_vocab_size_multiple must be an integer in 1.." in line


@pytest.mark.parametrize(
    ("source", "change", "message"),
    [
        ("untied", {"hidden_size": "8"}, "hidden_size must be an integer, got '8'"),
        ("untied", {"hidden_size": True}, "hidden_size must be an integer, got True"),
        ("untied", {"num_hidden_layers": [1]}, "num_hidden_layers must be an integer, got [1]"),
        ("untied", {"hidden_size": 8.0}, "hidden_size must be an integer, got 8.0"),
        ("untied", {"state_size": 0}, "state_size must be an integer in 1.."),
        ("untied", {"intermediate_size": None, "expand": 1 << 40}, "expand must be an intege"),
        ("untied", {"intermediate_size": "16"}, "intermediate_size must be an integer"),
        ("untied", {"time_step_rank": "big"}, "time_step_rank must be an integer"),
        ("untied", {"layer_norm_epsilon": "1e-5"}, "layer_norm_epsilon must be a number"),
        ("untied", {"use_bias": 0}, "use_bias must be true or false, got 0"),
        ("untied", {"tie_word_embeddings": "false"}, "tie_word_embeddings must be true or fa"),
        ("untied", {"model_type": ["mamba"]}, "model_type must be a string"),
        ("untied", {"vocab_size": "256"}, "vocab_size must be an integer"),
        ("mamba-ssm", {"d_model": "8"}, "d_model must be an integer, got '8'"),
        ("mamba-ssm", {"ssm_cfg": [1]}, "ssm_cfg must be an object, got [1]"),
        ("mamba-ssm", {"ssm_cfg": {"d_state": False}}, "d_state must be an integer"),
        ("mamba-ssm", {"ssm_cfg": {"expand": "2"}}, "expand must be an integer, got '2'"),
        ("mamba-ssm", {"d_intermediate": "0"}, "d_intermediate must be an integer"),
        ("mamba-ssm", {"vocab_size": None}, "vocab_size must be an integer, got None"),
    ],
)  # fmt: skip
def test_a_wrongly_typed_config_field_is_one_line(tmp_path, run_cli, source, change, message):
    folder = folder_with_config(tmp_path, source, change)
    line = run_cli("convert", folder, tmp_path / "out.st").error_line(1)
    assert f"{folder}: unusable model config: {message}" in line
    assert not (tmp_path / "out.st").exists()


def test_a_bad_shard_index_is_one_line(tmp_path, run_cli):
    folder = tmp_path / "model"
    shutil.copytree(FIXTURES / "sharded", folder)
    index = folder / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    data["weight_map"]["lm_head.weight"] = ["model-00001-of-00003.safetensors"]
    index.write_text(json.dumps(data))
    line = run_cli("convert", folder, tmp_path / "out.st").error_line(1)
    assert "bad shard name ['model-00001-of-00003.safetensors']" in line


# --- non-finite weights --------------------------------------------------------------------


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_hf_weights_are_refused_naming_the_tensor(tmp_path, run_cli, value):
    folder = tmp_path / "model"
    shutil.copytree(FIXTURES / "fp16", folder)
    from safetensors.numpy import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    name = "backbone.layers.0.mixer.x_proj.weight"
    tensors[name] = tensors[name].copy()
    tensors[name][1, 2] = value
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    sample = tmp_path / "x"
    sample.write_bytes(b"abc" * 10)
    line = run_cli("score", sample, "--model", folder).error_line(1)
    assert f"{folder}: tensor {name} holds 1 non-finite value(s) (first: {value})" in line


def test_non_finite_weights_in_a_pytorch_file_are_refused(tmp_path):
    path = tmp_path / "pytorch_model.bin"
    with (
        zipfile.ZipFile(FIXTURES / "mamba-ssm-bin" / "pytorch_model.bin") as src,
        zipfile.ZipFile(path, "w") as dst,
    ):
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("/data/0"):
                data = np.float32(np.nan).tobytes() + data[4:]
            dst.writestr(info, data)
    with pytest.raises(CheckpointError, match=r"tensor backbone.embeddings.weight holds 1 non-f"):
        checkpoint.load(str(path))


@pytest.mark.parametrize(
    ("prefix", "value", "message"),
    [
        ("", np.nan, "holds 1 non-finite value(s) (first: nan)"),
        ("mambazip.adam_m.", np.inf, "holds 1 non-finite value(s) (first: inf)"),
        ("mambazip.adam_v.", np.nan, "holds 1 non-finite value(s) (first: nan)"),
        ("mambazip.adam_v.", -1.0, "holds negative values; Adam's second moments are >= 0"),
    ],
)
def test_non_finite_weights_or_moments_of_ours_are_refused(tmp_path, run_cli, ours, prefix,
                                                           value, message):  # fmt: skip
    tensors, metadata = ours
    name = prefix + "backbone.layers.0.mixer.A_log"
    tensors = {**tensors, name: tensors[name].copy()}
    tensors[name][0, 0] = value
    path = write_ours(tmp_path / "a.st", tensors, metadata)
    sample = tmp_path / "x"
    sample.write_bytes(b"abc" * 10)
    line = run_cli("compress", sample, "--resume", path).error_line(1)
    assert f"{path}: tensor {name} {message}" in line
    assert not (tmp_path / "x.mz").exists()


# --- one memory budget on every loader path ------------------------------------------------


@pytest.mark.parametrize(
    "source",
    ["ours", "untied", "untied/model.safetensors", "sharded", "mamba-ssm", "mamba-ssm-bin",
     "mamba-ssm-bin/pytorch_model.bin", "bf16", "padded-vocab"],
)  # fmt: skip
def test_every_loader_path_takes_from_the_memory_budget(tmp_path, ours, source):
    path = write_ours(tmp_path / "a.st", *ours) if source == "ours" else FIXTURES / source
    loaded = checkpoint.load(str(path))  # the default budget holds them all
    used = limits.Budget()
    hf.load_weights(str(path), budget=used)
    assert used.used > os.path.getsize(path) if path.is_file() else used.used > 0
    with pytest.raises(MemoryLimitError) as info:
        checkpoint.load(str(path), memlimit=2 * 4 * loaded.params.flat.size // 3)
    assert isinstance(info.value, CheckpointError)
    assert str(info.value).startswith(f"{path}: loading this model needs ")
    assert str(info.value).endswith("(--memlimit raises it)")


def test_the_budget_is_summed_over_the_shards_of_a_folder(tmp_path):
    folder = FIXTURES / "sharded"
    shards = sorted(folder.glob("model-*.safetensors"))
    biggest = max(os.path.getsize(s) for s in shards)
    total = sum(os.path.getsize(s) for s in shards)
    # Enough for any one shard's bytes and floats, not for all of them.
    with pytest.raises(MemoryLimitError):
        hf.load_weights(str(folder), memlimit=total + 1)
    single = limits.Budget()
    hf.read_weights(str(max(shards, key=os.path.getsize)), single)
    assert single.used <= 2 * biggest < total + 1
