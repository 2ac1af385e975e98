"""Start-up time and streaming memory of the `mambazip` command.

    python scripts/bench_startup_memory.py [--model-flags "--d-model 8 --n-layer 1"]

Start-up: wall time of `mambazip compress` on a 1-byte file, cold (an empty Numba cache
directory, so every kernel compiles) and warm (the same command again, served from the
cache). Memory: peak RSS of compressing and decompressing generated inputs of 256 KB and
4 MB with the same small model; streaming means the two should differ by a few MB at most.
Peak RSS comes from GNU time (`/usr/bin/time -f %M`) and includes the Python interpreter,
NumPy and Numba.

    python scripts/bench_startup_memory.py --small [--runs 3]

Only the small-input figure (issue 26): peak RSS of `mambazip compress -n` of a 1,000-byte
file (the first 1,000 bytes of alice29.txt, or FILE given by --input) with the default
preset and the kernels already in the usual cache (one warm-up run first), beside the
floors under it: the interpreter, NumPy, Numba, and Numba calling one trivial cached kernel
(the least any run of a Numba kernel costs). Each figure is the least of --runs runs.
"""

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIME = shutil.which("time") or "/usr/bin/time"


def run(args, env):
    """(wall seconds, peak RSS MB) of one command."""
    with tempfile.NamedTemporaryFile("r") as report:
        start = time.perf_counter()
        subprocess.run([TIME, "-f", "%M", "-o", report.name, *args], env=env, check=True)
        seconds = time.perf_counter() - start
        return seconds, int(report.read().split()[-1]) / 1024


def text_like(n, seed):
    """n bytes of word-salad text: compressible, but not trivially."""
    words = [b"stream", b"model", b"byte", b"state", b"range", b"coder", b"mamba", b"learn"]
    out = bytearray()
    x = seed
    while len(out) < n:
        x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
        out += words[x >> 61] + (b"\n" if (x >> 20) % 11 == 0 else b" ")
    return bytes(out[:n])


# A trivial kernel: what Numba costs before any of ours loads (its target context, LLVM).
TRIVIAL = """from numba import njit
@njit(cache=True)
def one(a):
    a[0] = 1
"""


def small(data, name, runs):
    """The small-input table: peak RSS MB of the floors and of compressing ``data``."""
    py = [sys.executable, "-c"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "trivial.py").write_text(TRIVIAL)
        input_path = tmp / name
        input_path.write_bytes(data)
        env = {**os.environ, "PYTHONPATH": str(tmp), "NUMBA_CACHE_DIR": str(tmp / "cache")}
        out = tmp / "out.mz"
        compress = [sys.executable, "-m", "mambazip", "compress", "-q", "-f", "-n",
                    str(input_path), "-o", str(out)]  # fmt: skip
        rows = [
            ("the interpreter (`python -c pass`)", [*py, "pass"], env),
            ("`import numpy`", [*py, "import numpy"], env),
            ("`import numba`", [*py, "import numba"], env),
            ("`import mambazip.cli`", [*py, "import mambazip.cli"], os.environ),
            ("Numba calling one trivial cached kernel",
             [*py, "import numpy, trivial; trivial.one(numpy.zeros(1))"], env),
            (f"`mambazip compress -n` of {name} ({len(data):,} bytes), default preset",
             compress, os.environ),
        ]  # fmt: skip
        run(rows[4][1], env)  # compiles the trivial kernel into the cache
        run(compress, os.environ)  # the default preset's kernels, compiled once if need be
        print("| peak RSS of | MB |")
        print("|---|---:|")
        for label, args, run_env in rows:
            print(f"| {label} | {min(run(args, run_env)[1] for _ in range(runs)):.1f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-flags", default="--d-model 8 --n-layer 1 --d-state 4 --d-conv 3")
    parser.add_argument("--small", action="store_true", help="only the small-input table")
    parser.add_argument("--input", type=Path, help="--small: the file compressed")
    parser.add_argument("--runs", type=int, default=3, help="--small: runs per figure")
    args = parser.parse_args()
    if args.small:
        if args.input is None:
            corpus = Path(__file__).resolve().parents[2] / "shared" / "bench" / "corpus"
            small((corpus / "canterbury" / "alice29.txt").read_bytes()[:1000],
                  "alice29-first-1000.txt", args.runs)  # fmt: skip
        else:
            small(args.input.read_bytes(), args.input.name, args.runs)
        return
    exe = [sys.executable, "-m", "mambazip"]
    flags = shlex.split(args.model_flags)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp / "numba-cache")}
        one = tmp / "one.bin"
        one.write_bytes(b"x")
        compress_one = [*exe, "compress", "-q", "-f", *flags, str(one)]
        cold, _ = run(compress_one, env)
        warm, _ = run(compress_one, env)
        print("| start-up of `mambazip compress` on 1 byte | seconds |")
        print("|---|---:|")
        print(f"| cold (empty Numba cache: compiles) | {cold:.2f} |")
        print(f"| warm (cached kernels) | {warm:.2f} |")
        print()
        print(f"model flags: {args.model_flags}")
        print("| input | compress peak RSS MB | decompress peak RSS MB |")
        print("|---|---:|---:|")
        for size in (256 << 10, 4 << 20):
            src = tmp / f"in{size}.txt"
            src.write_bytes(text_like(size, size))
            _, c_rss = run([*exe, "compress", "-q", "-f", *flags, str(src)], env)
            out = tmp / "out.bin"
            _, d_rss = run([*exe, "decompress", "-q", "-f", "-o", str(out), f"{src}.mz"], env)
            assert out.read_bytes() == src.read_bytes(), "round trip failed"
            print(f"| {size >> 10} KB | {c_rss:.1f} | {d_rss:.1f} |")


if __name__ == "__main__":
    main()
