"""Benchmark frames (issue 14): --jobs 2 against --jobs 1, the cost of frames in bits, and the
time of a --range read, all in one run on one input.

The input is the first SIZE bytes (default 4 MiB) of a tar of the corpus folders canterbury
and calgary, written with fixed names, mtimes and owners so that it is the same everywhere.
For each preset it runs, through the command line (wall time of the child process, start-up
and worker start included):

* compress with --frame-size FRAME (default 1 MiB) at --jobs 1 and --jobs 2 (the outputs must
  be identical), then decompress both ways (the output must be the input);
* compress with --frame-size 0 (one stream, one frame), for the bits that frames cost;
* decompress --range of 1 KB from the middle, against the time of one frame (--jobs 1
  decompress time over the number of frames).

With ``--sizes`` it instead compresses the input once per frame size at --jobs 1 and reports
bits/byte against one stream (what a frame size costs; the default was chosen so).

    .venv/bin/python scripts/bench_frames.py --preset fast --out benchmarks/frames.md
    .venv/bin/python scripts/bench_frames.py --preset default --size 4MiB
    .venv/bin/python scripts/bench_frames.py --preset fast --sizes 256KiB,1MiB,4MiB,0

Exit status is 0 only if every run succeeded and every output matched.
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "bench" / "corpus"
MAMBAZIP = [sys.executable, "-m", "mambazip"]
MIB = 1 << 20


def corpus_tar(size):
    """The first ``size`` bytes of a reproducible tar of canterbury/ and calgary/."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for folder in ("canterbury", "calgary"):
            for path in sorted((CORPUS / folder).iterdir()):
                if not path.is_file() or path.suffix in (".sha256", ".md5"):
                    continue
                info = tarfile.TarInfo(f"{folder}/{path.name}")
                info.size, info.mtime, info.mode = path.stat().st_size, 0, 0o644
                with open(path, "rb") as f:
                    tar.addfile(info, f)
    data = out.getvalue()
    if len(data) < size:
        raise SystemExit(f"the corpus tar has {len(data)} bytes, fewer than {size}")
    return data[:size]


def run(args, stdout=None):
    """Seconds of wall time of ``mambazip args``; raises on failure."""
    start = time.perf_counter()
    done = subprocess.run([*MAMBAZIP, *args], stdout=stdout or subprocess.DEVNULL,
                          stderr=subprocess.PIPE)  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"mambazip {' '.join(args)}: {done.stderr.decode().strip()}")
    return seconds


def bench_preset(preset, data, frame, tmp, extra):
    src = tmp / "input.tar"
    src.write_bytes(data)
    n_frames = -(-len(data) // frame)
    common = ["--preset", preset, "-q", "-f", *extra]
    row = {"preset": preset, "frames": n_frames}
    run(["compress", *common, "-o", str(tmp / "warm.mz"), "--frame-size", "4KiB", str(src)])
    outputs = {}
    for jobs in (1, 2):
        out = tmp / f"jobs{jobs}.mz"
        row[f"c{jobs}"] = run(["compress", *common, "--frame-size", str(frame), "-T", str(jobs),
                               "-o", str(out), str(src)])  # fmt: skip
        outputs[jobs] = out.read_bytes()
    if outputs[1] != outputs[2]:
        raise RuntimeError(f"{preset}: --jobs 1 and --jobs 2 wrote different bytes")
    row["framed_bits"] = 8 * len(outputs[1]) / len(data)
    for jobs in (1, 2):
        back = tmp / f"back{jobs}.tar"
        row[f"d{jobs}"] = run(["decompress", "-q", "-f", "-T", str(jobs), "-o", str(back),
                               str(tmp / "jobs1.mz")])  # fmt: skip
        if back.read_bytes() != data:
            raise RuntimeError(f"{preset}: --jobs {jobs} decompressed the wrong bytes")
    one = tmp / "one.mz"
    row["c_one"] = run(["compress", *common, "--frame-size", "0", "-o", str(one), str(src)])
    row["one_bits"] = 8 * one.stat().st_size / len(data)
    middle = len(data) // 2
    piece = tmp / "piece"
    row["range"] = run(["decompress", "-q", "-f", "-T", "1", "--range",
                        f"{middle}:{middle + 1000}", "-o", str(piece),
                        str(tmp / "jobs1.mz")])  # fmt: skip
    if piece.read_bytes() != data[middle : middle + 1000]:
        raise RuntimeError(f"{preset}: --range wrote the wrong bytes")
    row["frame_time"] = row["d1"] / n_frames
    return row


def sweep_sizes(preset, data, sizes, tmp, extra):
    """(frame size, bits/byte, compress seconds) per frame size, --jobs 1."""
    src = tmp / "input.tar"
    src.write_bytes(data)
    rows = []
    for frame in sizes:
        out = tmp / "sweep.mz"
        seconds = run(["compress", "--preset", preset, "-q", "-f", *extra, "-T", "1",
                       "--frame-size", str(frame), "-o", str(out), str(src)])  # fmt: skip
        rows.append((frame, 8 * out.stat().st_size / len(data), seconds))
        print(f"{preset} frame {frame}: {rows[-1][1]:.4f} bits/byte, {seconds:.1f} s", flush=True)
    return rows


def sweep_table(preset, rows):
    one = next(bits for frame, bits, _ in rows if frame == 0)
    lines = ["| preset | frame size | bits/byte | vs one stream | compress s |",
             "|---|---|---|---|---|"]  # fmt: skip
    for frame, bits, seconds in rows:
        name = "one stream" if frame == 0 else f"{frame / MIB:g} MiB"
        lines.append(f"| {preset} | {name} | {bits:.4f} | {100 * (bits / one - 1):+.2f} % | "
                     f"{seconds:.1f} |")  # fmt: skip
    return "\n".join(lines)


def table(rows, size, frame):
    kb = size / 1000
    lines = [
        "| preset | frames | compress -T1 / -T2 (KB/s) | speed-up | decompress -T1 / -T2 "
        "(KB/s) | speed-up | bits/byte framed | one stream | frames cost | --range 1 KB (s) "
        "| one frame (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['preset']} | {r['frames']} x {frame // MIB} MiB | {kb / r['c1']:.1f} / "
            f"{kb / r['c2']:.1f} | {r['c1'] / r['c2']:.2f}x | {kb / r['d1']:.1f} / "
            f"{kb / r['d2']:.1f} | {r['d1'] / r['d2']:.2f}x | {r['framed_bits']:.4f} | "
            f"{r['one_bits']:.4f} | {100 * (r['framed_bits'] / r['one_bits'] - 1):+.2f} % | "
            f"{r['range']:.2f} | {r['frame_time']:.2f} |"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", action="append", help="preset(s) to run (default: fast)")
    parser.add_argument("--size", default="4MiB", help="input bytes (default 4MiB)")
    parser.add_argument("--frame", default="1MiB", help="frame size (default 1MiB)")
    parser.add_argument("--sizes", help="comma list of frame sizes to sweep (0: one stream)")
    parser.add_argument("--mambazip-args", default="", help="more compress arguments")
    parser.add_argument("--out", type=Path, help="also write the report here (markdown)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from mambazip.limits import parse_size

    size, frame = parse_size(args.size), parse_size(args.frame)
    data = corpus_tar(size)
    rows, tables = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for preset in args.preset or ["fast"]:
            extra = args.mambazip_args.split()
            if args.sizes:
                sizes = [0 if s.strip() == "0" else parse_size(s) for s in args.sizes.split(",")]
                sizes += [] if 0 in sizes else [0]
                tables.append(sweep_table(preset, sweep_sizes(preset, data, sizes, Path(tmp),
                                                              extra)))  # fmt: skip
                continue
            rows.append(bench_preset(preset, data, frame, Path(tmp), extra))
            print(table(rows[-1:], size, frame), flush=True)
    if rows:
        tables.append(table(rows, size, frame))
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    report = (
        f"# Frames benchmark, {when}\n\n"
        f"`python scripts/bench_frames.py {' '.join(sys.argv[1:])}` on {cpu}, "
        f"{os.cpu_count()} cores. Input: the first {size} bytes of a tar of the corpus "
        f"folders canterbury and calgary. Wall times of the command line, start-up and "
        f"workers included; KB = 1000 bytes.\n\n" + "\n\n".join(tables) + "\n"
    )
    print(report)
    if args.out:
        args.out.write_text(report)


if __name__ == "__main__":
    main()
