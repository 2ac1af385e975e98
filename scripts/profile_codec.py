"""Where the whole compressor's time goes, thread by thread: perf over mambazip.compress or
mambazip.decompress.

    python scripts/profile_codec.py FILE [--preset default] [--limit BYTES] [--decompress]
        [--top N]

Runs the library's compress (or, with ``--decompress``, the decompression of what compress
wrote) over the first BYTES of FILE under ``perf record`` and prints, for the timed run
only, each thread's share of the samples and perf's flat profile by thread and function:
the coding thread, the Mamba's update thread (train.overlap) and, when compressing with
the mixer, the thread the Mamba runs ahead on (predict.py). A thread's share of the samples
against the wall time says how busy it was. Kernels are compiled afresh in a temporary
cache directory and named through perf's JIT map, as in profile_predictor.py; the run
compresses and decompresses a 40 KB prefix first, so that compilation falls outside the
timed run. Needs perf and the right to use it.
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile_predictor import record, write_perf_map  # sibling script: perf and its JIT map

WARM = 40000
HZ = 4000


def child(args):
    import mambazip

    data = Path(args.file).read_bytes()[: args.limit]
    settings = mambazip.resolve_settings(args.preset)
    mambazip.decompress(mambazip.compress(data[:WARM], settings))
    blob = mambazip.compress(data, settings) if args.decompress else None
    n = write_perf_map(f"/tmp/perf-{os.getpid()}.map")
    with open(args.control, "w") as ctl:
        ctl.write("enable\n")
    start = time.perf_counter()
    out = mambazip.decompress(blob) if args.decompress else mambazip.compress(data, settings)
    secs = time.perf_counter() - start
    with open(args.control, "w") as ctl:
        ctl.write("disable\n")
    if args.decompress and out != data:
        raise SystemExit("the round trip changed the data")
    what = "decompress" if args.decompress else "compress"
    print(f"{n} functions mapped; {what} {len(data)} bytes in {secs:.2f} s wall, "
          f"{secs / len(data) * 1e6:.1f} µs/byte")  # fmt: skip


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--limit", type=int, default=65536, help="first BYTES of the file")
    ap.add_argument("--decompress", action="store_true")
    ap.add_argument("--top", type=int, default=30, help="functions to print")
    ap.add_argument("--control", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.control:
        child(args)
        return
    reports = record(__file__, sys.argv[1:], ["pid", "pid,sym"], HZ)
    threads, functions = (
        [line for line in report.splitlines() if line.strip() and line[0] != "#"]
        for report in reports
    )
    print(f"threads (samples at {HZ} Hz: seconds busy = samples / {HZ}):")
    for line in threads:
        print(" ", line.strip())
    for line in functions[: args.top]:
        print(line[:110])


if __name__ == "__main__":
    main()
