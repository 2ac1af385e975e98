"""The README's "Use it from other tools" blocks (issue 27), run exactly as written (read
with ``scripts/readme_block.py``, as ``.ci/run`` reads its blocks) in an empty directory
outside the checkout, against the installed ``mambazip``."""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest
from conftest import CHECKOUT

CORPUS = "/work/shared/bench/corpus/canterbury"


def readme_block(name):
    path = CHECKOUT / "scripts" / "readme_block.py"
    spec = importlib.util.spec_from_file_location("readme_block", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.block(name, (CHECKOUT / "README.md").read_text())


def environment():
    return {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}


def run_python(block, cwd):
    script = cwd / "block.py"
    script.write_text(block)
    proc = subprocess.run([sys.executable, str(script)], cwd=cwd, capture_output=True,
                          env=environment(), timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def test_the_shell_lines_run_as_written(tmp_path, sample):
    if shutil.which("tar") is None:
        pytest.skip("no tar")
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a.txt").write_bytes(sample)
    (tmp_path / "d" / "sub" / "b.bin").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "notes.txt").write_bytes(sample)
    block = readme_block("plugs-shell")
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path,
                          capture_output=True, env=environment(), timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    assert (tmp_path / "d" / "a.txt").read_bytes() == sample  # back after -r --rm both ways
    assert not list((tmp_path / "d").rglob("*.mz"))


def test_the_python_lines_run_as_written(tmp_path):
    out = run_python(readme_block("plugs-python"), tmp_path)
    text = "".join(f"line {n}\n" for n in range(1000)).encode()
    rest_of_line = text[5000 : text.index(b"\n", 5000) + 1]
    assert out == repr(rest_of_line) + "\n"


def test_the_fsspec_and_dask_lines_run_as_written(tmp_path):
    pytest.importorskip("fsspec")
    pytest.importorskip("distributed")
    out = run_python(readme_block("plugs-dask"), tmp_path)
    assert out.splitlines() == ["mon: GET /", "mon: GET /about", "4"]
