"""Sweep model and training settings over corpus files; write a markdown table.

Every combination of the grid compresses each file (or its first ``--limit`` bytes) through
the library, in a pool of ``--jobs`` worker processes, and reports the coded bits/byte
(header and framing included), the ideal bits/byte (-log2 p) of each quarter of the input
(where the model learns fastest), and compress throughput in KB/s (1000 bytes).
Throughput is per process: with two jobs on two cores they compete for memory bandwidth,
so compare speeds within one sweep only, and measure a chosen preset alone with scripts/bench.py.

Grid: space-separated KEY=V1,V2,... over any ModelConfig or TrainConfig field, ``seed``,
``mix`` (none, cm, full: the predictor's parts) and ``preset`` (the base the other keys
override; default "default"). Files are coded as the command line codes them (stored blocks
allowed). Changing d_model without
d_inner or dt_rank derives them (as the CLI does).

    .venv/bin/python scripts/sweep.py --limit 200000 \\
        --grid "d_model=64,128 n_layer=2 bptt=16,32 lr=1e-3,2e-3 warmup=0,10000" \\
        --out sweep.md ../shared/bench/corpus/enwik8/enwik6
"""

from __future__ import annotations

import argparse
import datetime
import io
import itertools
import multiprocessing
import os
import platform
import time
from dataclasses import fields
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "bench" / "corpus"
QUARTERS = 4


def _parse_value(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    if text in ("true", "false"):
        return text == "true"
    return text


def _parse_scale(text):
    if text == "none":
        return ()
    pairs = [item.partition(":") for item in text.split("+")]
    return tuple((group, float(value)) for group, _, value in pairs)


def parse_grid(spec):
    """ "a=1,2 b=x" -> list of dicts, the cartesian product in the order given."""
    keys, values = [], []
    for item in spec.split():
        key, _, options = item.partition("=")
        if not options:
            raise SystemExit(f"grid item {item!r} is not KEY=V1,V2,...")
        keys.append(key.replace("-", "_"))
        if key == "scope":
            values.append([tuple(v.split("+")) for v in options.split(",")])
        elif key == "lr_scale":  # lr_scale=head:2+embed:0.5,none
            values.append([_parse_scale(v) for v in options.split(",")])
        else:
            values.append([_parse_value(v) for v in options.split(",")])
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*values)]


def settings_for(point):
    from mambazip.config import ModelConfig, TrainConfig, resolve_settings

    model_keys = {f.name for f in fields(ModelConfig)}
    train_keys = {f.name for f in fields(TrainConfig)}
    point = dict(point)
    preset = point.pop("preset", "default")
    seed = point.pop("seed", None)
    mix = point.pop("mix", None)
    unknown = set(point) - model_keys - train_keys
    if unknown:
        raise SystemExit(f"unknown grid keys: {', '.join(sorted(unknown))}")
    model = {k: v for k, v in point.items() if k in model_keys}
    floats = {f.name for f in fields(TrainConfig) if f.type is float}
    train = {k: (float(v) if k in floats else v) for k, v in point.items()
             if k in train_keys}  # fmt: skip
    return resolve_settings(preset, model=model, train=train, seed=seed, mix=mix)


def run_one(job):
    """Compress one file with one grid point; returns a result row (dict)."""
    import numpy as np

    from mambazip import codec

    point, path, limit = job
    settings = settings_for(point)
    data = Path(path).read_bytes()[:limit] if limit else Path(path).read_bytes()
    bits = []

    def progress(n_bytes, chunk_bits):
        bits.append((n_bytes, chunk_bits))

    start = time.perf_counter()
    stats = codec.compress_stream(io.BytesIO(data), io.BytesIO(), settings, progress=progress,
                                  stored_blocks=True)  # fmt: skip
    seconds = time.perf_counter() - start
    sizes = np.array([n for n, _ in bits])
    chunk_bits = np.array([b for _, b in bits])
    ends = np.cumsum(sizes)
    quarters = []
    for q in range(QUARTERS):
        lo, hi = q * len(data) / QUARTERS, (q + 1) * len(data) / QUARTERS
        mask = (ends > lo) & (ends <= hi)
        n = sizes[mask].sum()
        quarters.append(chunk_bits[mask].sum() / n if n else float("nan"))
    return {
        "point": point,
        "file": _name(path),
        "bytes": len(data),
        "bpb": stats.bits_per_byte,
        "quarters": quarters,
        "kbps": len(data) / 1000 / seconds,
    }


def _name(path):
    path, corpus = Path(path).resolve(), CORPUS.resolve()
    return str(path.relative_to(corpus) if path.is_relative_to(corpus) else path)


def _cell(value):
    if isinstance(value, tuple):
        return "+".join(f"{v[0]}:{v[1]:g}" if isinstance(v, tuple) else v for v in value) or "none"
    return str(value)


def table(rows, keys):
    head = ["file", *keys, "bits/byte", "by quarter", "KB/s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        values = [_cell(r["point"].get(k, "")) for k in keys]
        quarters = " / ".join(f"{q:.3f}" for q in r["quarters"])
        lines.append(
            f"| {r['file']} | " + " | ".join(values)
            + f" | {r['bpb']:.4f} | {quarters} | {r['kbps']:.2f} |"
        )  # fmt: skip
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", help="files to compress")
    p.add_argument("--grid", required=True, help='e.g. "d_model=64,128 bptt=16,32"')
    p.add_argument("--limit", type=int, default=0, help="compress only the first N bytes")
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--out", type=Path, help="also write the table (markdown) here")
    args = p.parse_args()

    points = parse_grid(args.grid)
    for point in points:
        settings_for(point)  # fail on a bad grid before any work starts
    jobs = [(point, f, args.limit) for point in points for f in args.files]
    keys = list(points[0])
    rows = []
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for row in pool.imap(run_one, jobs):
            rows.append(row)
            print(table([row], keys).splitlines()[-1], flush=True)
    header = (
        f"Sweep {datetime.date.today()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, {args.jobs} jobs; first {args.limit or 'all'} bytes; "
        f"grid `{args.grid}`\n\n"
    )
    text = header + table(rows, keys) + "\n"
    print("\n" + text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
