"""What users install: the ``mambazip``, ``unmz`` and ``mzcat`` scripts that ``pip install``
put beside this Python, run as subprocesses from an empty directory outside the checkout,
with the default preset (its prior and its full predictor) on real inputs.

A green suite over the source tree proved nothing about the wheel: installed, the priors'
folder was a namespace package and every text file crashed. So under CI (``CI`` set) the
suite must import the installed package, and these tests must find the installed scripts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CHECKOUT, TINY_FLAGS

import mambazip

BIN = Path(sys.executable).parent
GOLDEN_PRIOR = CHECKOUT / "tests" / "golden" / "v4" / "default-prior-e60d1a9d222512f5"
TEXT = (CHECKOUT / "README.md").read_bytes()[:3000]
BINARY = b"".join(i.to_bytes(4, "little") + bytes([i % 7] * 3) for i in range(500))


def test_the_suite_imports_the_installed_package():
    if not os.environ.get("CI"):
        pytest.skip("only under CI: a developer may run the suite over an editable install")
    assert not Path(mambazip.__file__).resolve().is_relative_to(CHECKOUT), (
        f"mambazip was imported from {mambazip.__file__}, inside the checkout, not from "
        f"the installed package: run the suite as the README says (pytest, not python -m "
        f"pytest), after pip install"
    )


@pytest.fixture(scope="module")
def scripts():
    """The installed scripts' paths; a failure under CI when they are missing."""
    found = {name: BIN / name for name in ("mambazip", "unmz", "mzcat")}
    missing = [name for name, path in found.items() if not path.is_file()]
    if missing:
        message = f"not installed beside {sys.executable}: {', '.join(missing)}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture
def user_dir(tmp_path):
    """An empty directory outside the checkout, the working directory of every run."""
    assert not tmp_path.resolve().is_relative_to(CHECKOUT)
    return tmp_path


@pytest.fixture
def sh(scripts, user_dir):
    """``sh(NAME, *args)``: the installed script NAME run in ``user_dir``, with no traceback."""

    def run(name, *args, input=None):
        proc = subprocess.run(
            [str(scripts[name]), *map(str, args)],
            cwd=user_dir,
            input=input,
            capture_output=True,
            timeout=900,
        )
        assert b"Traceback" not in proc.stderr, proc.stderr.decode()
        return proc

    return run


def ok(proc):
    assert proc.returncode == 0, proc.stderr.decode()
    return proc


def out(proc):
    return ok(proc).stdout


def test_a_text_file_round_trips_from_the_default_preset_prior(sh, user_dir):
    (user_dir / "notes.txt").write_bytes(TEXT)
    ok(sh("mambazip", "compress", "notes.txt"))
    listing = out(sh("mambazip", "info", "notes.txt.mz")).decode()
    assert "(a prior shipped with mambazip)" in listing
    (user_dir / "notes.txt").unlink()
    ok(sh("unmz", "notes.txt.mz"))
    assert (user_dir / "notes.txt").read_bytes() == TEXT
    assert out(sh("mzcat", "notes.txt.mz")) == TEXT


def test_a_binary_file_round_trips_from_the_seeded_init(sh, user_dir):
    (user_dir / "data.bin").write_bytes(BINARY)
    ok(sh("mambazip", "compress", "data.bin"))
    assert "starting model" not in out(sh("mambazip", "info", "data.bin.mz")).decode()
    assert out(sh("mambazip", "decompress", "-c", "data.bin.mz")) == BINARY


def test_info_test_and_dash_t_verify_a_file_made_from_the_prior(sh, user_dir):
    (user_dir / "notes.txt").write_bytes(TEXT)
    ok(sh("mambazip", "compress", "notes.txt"))
    before = sorted(p.name for p in user_dir.iterdir())
    assert "OK" in out(sh("mambazip", "info", "--test", "notes.txt.mz")).decode()
    ok(sh("mambazip", "decompress", "-t", "notes.txt.mz"))
    ok(sh("mambazip", "-t", "notes.txt.mz"))
    assert sorted(p.name for p in user_dir.iterdir()) == before


def test_the_golden_file_made_from_the_prior_decodes(sh, user_dir):
    shutil.copy(GOLDEN_PRIOR.with_suffix(".mz"), user_dir / "golden.mz")
    assert out(sh("mzcat", "golden.mz")) == GOLDEN_PRIOR.with_suffix(".bin").read_bytes()


def test_two_worker_processes_write_the_bytes_of_one(sh, user_dir):
    (user_dir / "two.txt").write_bytes(TEXT)
    frames = ("--frame-size", "2KiB", *TINY_FLAGS)
    ok(sh("mambazip", "compress", "-T", "2", *frames, "-o", "t2.mz", "two.txt"))
    ok(sh("mambazip", "compress", "-T", "1", *frames, "-o", "t1.mz", "two.txt"))
    assert (user_dir / "t2.mz").read_bytes() == (user_dir / "t1.mz").read_bytes()
    assert "frames           2 of" in out(sh("mambazip", "info", "t2.mz")).decode()
    assert out(sh("mzcat", "-T", "2", "t2.mz")) == TEXT


def test_a_local_dask_cluster_codes_the_frames(sh, user_dir):
    distributed = pytest.importorskip("distributed")
    (user_dir / "c.txt").write_bytes(TEXT)
    frames = ("--frame-size", "1KiB", *TINY_FLAGS)
    ok(sh("mambazip", "compress", "-T", "1", *frames, "-o", "local.mz", "c.txt"))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster:  # fmt: skip
        address = cluster.scheduler_address
        ok(sh("mambazip", "compress", "--scheduler", address, *frames, "-o", "dask.mz", "c.txt"))
        assert (user_dir / "dask.mz").read_bytes() == (user_dir / "local.mz").read_bytes()
        back = out(sh("mambazip", "decompress", "-c", "--scheduler", address, "dask.mz"))
    assert back == TEXT


def test_a_short_training_run_writes_a_model_that_compresses(sh, user_dir):
    docs = user_dir / "docs"
    docs.mkdir()
    (docs / "a.txt").write_bytes(TEXT[:1500])
    (docs / "b.txt").write_bytes(TEXT[1500:])
    ok(sh("mambazip", "train", "-q", "--preset", "fast", "--save-model", "m.safetensors", "docs"))
    (user_dir / "n.txt").write_bytes(TEXT[:800])
    model = ("--model", "m.safetensors")
    ok(sh("mambazip", "compress", "--preset", "fast", "--mix", "none", *model, "n.txt"))
    assert out(sh("mambazip", "decompress", "-c", *model, "n.txt.mz")) == TEXT[:800]
