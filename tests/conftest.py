"""Shared fixtures: a tiny model, sample data, and ways to run the command line.

Every test uses the tiny model (d_model 8, one layer) unless it is about the default preset:
it exercises every code path of the real model at a fraction of the cost.

``run_cli`` runs the real entry point ``mambazip.entry.main`` (the function behind both the
``mambazip`` script and ``python -m mambazip``: signal handlers, then the command line) in
this process with stdin, stdout and stderr captured, and reports what a user would see: exit
code, stdout bytes, stderr text.
An exception escaping ``main`` is reported as the interpreter would report it (a traceback
on stderr, exit code 1), so tests can assert that none occurs. ``run_process`` runs
``python -m mambazip`` as a real subprocess, for pipes and the entry point itself.

Every test runs from an empty directory outside the checkout, as a user would: a subprocess
started with ``python -m`` puts its working directory first on ``sys.path``, and from the
checkout's root that would import the source tree instead of the installed package.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

import mambazip
from mambazip import entry

TINY_MODEL = {"d_model": 8, "n_layer": 1, "d_state": 4, "d_conv": 3}
TINY_FLAGS = ("--d-model", "8", "--n-layer", "1", "--d-state", "4", "--d-conv", "3")


CHECKOUT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True, scope="session")
def _outside_the_checkout(tmp_path_factory):
    os.chdir(tmp_path_factory.mktemp("cwd"))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: takes minutes (whole corpora); deselect with -m 'not slow'"
    )


@dataclass
class CliResult:
    exit_code: int
    stdout: bytes
    stderr: str

    def error_line(self, exit_code):
        """Assert this run failed with ``exit_code``, exactly one line on stderr, no
        traceback, nothing on stdout; return that line."""
        assert "Traceback" not in self.stderr, self.stderr
        assert self.exit_code == exit_code, (self.exit_code, self.stderr)
        assert self.stdout == b"", "output on stdout"
        line = self.stderr.removesuffix("\n")
        assert line, "no message on stderr"
        assert "\n" not in line, f"more than one line on stderr:\n{self.stderr}"
        assert line.startswith("mambazip: "), line
        return line


def _run_main(args, input):
    runner = CliRunner()
    with runner.isolation(input=input) as (out, err, _):
        saved_argv = sys.argv
        sys.argv = ["mambazip", *map(str, args)]
        try:
            entry.main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:  # what the interpreter would print for an escaped exception
            sys.stderr.write(traceback.format_exc())
            code = 1
        finally:
            sys.argv = saved_argv
            sys.stdout.flush()
            sys.stderr.flush()
        return CliResult(code, out.getvalue(), err.getvalue().decode())


@pytest.fixture
def run_cli():
    """``run_cli(*args, input=None) -> CliResult``: the CLI entry point, in process."""

    def run(*args, input=None):
        return _run_main(args, input)

    return run


@pytest.fixture
def run_process():
    """``run_process(*args, input=b"", env=None) -> CompletedProcess`` of
    ``python -m mambazip ARGS`` (stdout bytes, stderr text); ``env`` adds variables."""

    def run(*args, input=b"", env=None):
        proc = subprocess.run(
            [sys.executable, "-m", "mambazip", *map(str, args)],
            input=input,
            capture_output=True,
            env={**os.environ, **(env or {})},
            timeout=600,
        )
        proc.stderr = proc.stderr.decode()
        return proc

    return run


@pytest.fixture(scope="session")
def tiny_settings():
    """The default preset's training settings on the tiny model."""
    return mambazip.resolve_settings(model=TINY_MODEL)


@pytest.fixture(scope="session")
def tiny_flags():
    """The CLI flags that select the tiny model."""
    return TINY_FLAGS


@pytest.fixture(scope="session")
def sample():
    """3 KB of text with some binary bytes mixed in: small enough to code in well under a
    second with the tiny model, varied enough to be a real file."""
    text = b"".join(
        b"line %d: the quick brown fox jumps over the lazy dog \x00\xff\x7f\n" % i
        for i in range(50)
    )
    return text[:3000]


@pytest.fixture
def sample_file(tmp_path, sample):
    """``tmp_path/sample.txt`` holding ``sample``."""
    path = tmp_path / "sample.txt"
    path.write_bytes(sample)
    return path


@pytest.fixture
def mz_file(tmp_path, sample, tiny_settings):
    """``tmp_path/sample.txt.mz``: ``sample`` compressed with the tiny model (the original
    itself is not in the directory)."""
    path = tmp_path / "sample.txt.mz"
    path.write_bytes(mambazip.compress(sample, tiny_settings))
    return path


@pytest.fixture
def snapshot():
    """``snapshot(directory) -> {name: bytes}`` of every file in it, hidden ones included:
    equal snapshots before and after a command mean it created, removed and changed
    nothing there."""

    def take(directory):
        return {p.name: p.read_bytes() for p in sorted(Path(directory).iterdir())}

    return take
