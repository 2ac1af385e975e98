"""Memory and seeking of ``mambazip.open`` on a framed .mz file.

    python scripts/bench_open.py FILE.mz [--seek OFFSET]

Each measure runs in a fresh process (``resource.getrusage``'s peak RSS, which includes the
interpreter, NumPy and Numba): the peak RSS of reading one byte (one frame decoded), of
reading the whole file in order in 64 KiB reads, and the number of frames decoded (calls of
``frames.FrameJob.decode_stream``) to read 100 bytes at ``--seek`` (default: three quarters
into the original). Issue 27 asks that reading in order stay under twice one frame's peak,
and that a seek decode one frame.
"""

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys
import mambazip
from mambazip import frames
path, what, offset = sys.argv[1], sys.argv[2], int(sys.argv[3])
calls = []
decode = frames.FrameJob.decode_stream
def counting(self, *args, **kwargs):
    calls.append(1)
    return decode(self, *args, **kwargs)
frames.FrameJob.decode_stream = counting
n = 0
with mambazip.open(path) as f:
    if what == "one":
        n = len(f.read(1))
    elif what == "all":
        while chunk := f.read(1 << 16):
            n += len(chunk)
    else:
        f.seek(offset)
        n = len(f.read(100))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"bytes": n, "frames": len(calls), "peak_mb": round(peak, 1)}))
"""


def measure(path, what, offset=0):
    out = subprocess.run([sys.executable, "-c", CHILD, path, what, str(offset)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("file")
    parser.add_argument("--seek", type=int)
    args = parser.parse_args()
    one = measure(args.file, "one")
    every = measure(args.file, "all")
    seek = args.seek if args.seek is not None else every["bytes"] * 3 // 4
    sought = measure(args.file, "seek", seek)
    print(f"read 1 byte:        {one['frames']} frame(s) decoded, peak RSS {one['peak_mb']} MB")
    ratio = every["peak_mb"] / one["peak_mb"]
    print(f"read {every['bytes']} bytes in order: {every['frames']} frame(s) decoded, peak RSS "
          f"{every['peak_mb']} MB ({ratio:.2f} x one frame's)")  # fmt: skip
    print(f"seek to {seek}, read 100: {sought['frames']} frame(s) decoded")


if __name__ == "__main__":
    main()
