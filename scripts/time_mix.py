"""Ratio and speed of a preset whose mix has fields replaced, through the library: the whole
codec in this process (transforms, frames, header), start-up and compilation left out.

    python scripts/time_mix.py FILE [--preset fast] [--runs N] [field=value ...]

Compresses FILE with ``mambazip.compress`` and decompresses the result N times (after a
round trip of its first 3000 bytes, so that the kernels are compiled and loaded), checks the
round trip, and prints bits/byte (the whole file's size, header included) and KB/s (KB = 1000
bytes) of the fastest compress and the fastest decompress, with every run's seconds. Field
values as in sweep_mix.py (``contexts=`` for none, ``contexts=word3+column``).
"""

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep_mix import parse_value  # sibling script: the same field syntax

import mambazip
from mambazip.predictor import MixConfig


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--preset", default="fast")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("fields", nargs="*", help="MixConfig field=value")
    args = ap.parse_intermixed_args()
    fields = {k: parse_value(v) for k, v in (f.split("=", 1) for f in args.fields)}
    settings = mambazip.resolve_settings(args.preset)
    mix = dataclasses.replace(settings.mix, **fields)
    settings = dataclasses.replace(settings, mix=MixConfig.from_dict(mix.to_dict()))
    data = Path(args.file).read_bytes()
    mambazip.decompress(mambazip.compress(data[:3000], settings))
    tc, td = [], []
    for _ in range(args.runs):
        start = time.perf_counter()
        blob = mambazip.compress(data, settings)
        tc.append(time.perf_counter() - start)
        start = time.perf_counter()
        out = mambazip.decompress(blob)
        td.append(time.perf_counter() - start)
        if out != data:
            raise SystemExit("the round trip changed the data")
    kb = len(data) / 1000
    print(f"{Path(args.file).name} {args.preset} {' '.join(args.fields)}: "
          f"{len(blob) * 8 / len(data):.4f} bits/byte, compress {kb / min(tc):.1f} KB/s, "
          f"decompress {kb / min(td):.1f} KB/s (compress "
          f"{' '.join(f'{t:.2f}' for t in tc)} s; decompress "
          f"{' '.join(f'{t:.2f}' for t in td)} s)")  # fmt: skip


if __name__ == "__main__":
    main()
