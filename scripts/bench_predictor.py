"""Speed and ratio of the context-mixing predictor alone (a preset's tables, mamba=False).

    python scripts/bench_predictor.py FILE [FILE ...] [--preset fast|default|max]
        [--set field=value ...] [--limit BYTES]

Per file: bits/byte of the CM alone (the sum of -log2 p over the file, from ``advance`` over 4 KB
chunks), µs/byte of ``advance`` and of ``advance_byte`` (the decoder's call, timed on the first
``--byte-limit`` bytes with a fresh predictor; it must give the same tables), and the memory of
the config. Compile time is excluded (one warm-up call on a tiny config first).
"""

import argparse
import dataclasses
import time

import numpy as np

from mambazip.predictor import DEFAULT, FAST, MAX, SMALL, ContextMixer, MixConfig

CHUNK = 4096


def parse_value(text):
    if text in ("true", "false"):
        return text == "true"
    return int(text)


def encode(cfg, data):
    mixer = ContextMixer(cfg)
    mixer.prime()
    bits = 0.0
    start = time.perf_counter()
    for i in range(0, data.size, CHUNK):
        _, p = mixer.advance(data[i : i + CHUNK])
        bits -= np.log2(p).sum()
    return bits, time.perf_counter() - start


def decode_side(cfg, data):
    """advance_byte over data; returns (seconds, tables equal to advance's)."""
    ref = ContextMixer(cfg)
    ref.prime()
    freqs, _ = ref.advance(data)
    mixer = ContextMixer(cfg)
    mixer.prime()
    start = time.perf_counter()
    for i in range(data.size):
        mixer.advance_byte(data[i])
    secs = time.perf_counter() - start
    # Compared after the timing (the comparison cost as much as a third of the call): the final
    # tables and a replay byte by byte.
    same = bool(np.array_equal(mixer.freq, ref.freq))
    mixer = ContextMixer(cfg)
    mixer.prime()
    for i in range(min(data.size, 2000)):
        same &= bool(np.array_equal(mixer.freq, freqs[i]))
        mixer.advance_byte(data[i])
    return secs, same


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--set", action="append", default=[], help="MixConfig field=value")
    ap.add_argument("--limit", type=int, default=0, help="first BYTES of each file only")
    ap.add_argument("--byte-limit", type=int, default=100_000)
    ap.add_argument("--preset", choices=("fast", "default", "max"), default="default")
    args = ap.parse_args()
    fields = dict(s.split("=", 1) for s in args.set)
    base = {"fast": FAST, "default": DEFAULT, "max": MAX}[args.preset]
    base = dataclasses.replace(base, mamba=False)  # no Mamba here: the context models alone
    cfg = dataclasses.replace(base, **{k: parse_value(v) for k, v in fields.items()})
    cfg = MixConfig.from_dict(cfg.to_dict())
    print(f"config: {cfg.to_dict()}")
    print(f"memory: {cfg.memory_bytes() / 2**20:.1f} MiB")
    warm = ContextMixer(SMALL)  # compiles (or loads the cache) outside the timings
    warm.prime()
    warm.advance(np.zeros(4, np.uint8))
    warm.advance_byte(0)
    for path in args.files:
        with open(path, "rb") as f:
            data = np.frombuffer(f.read(), np.uint8)
        if args.limit:
            data = data[: args.limit]
        bits, secs = encode(cfg, data)
        line = (
            f"{path}: {data.size} bytes, {bits / data.size:.4f} bits/byte, "
            f"advance {secs / data.size * 1e6:.2f} us/byte"
        )
        if args.byte_limit:
            part = data[: args.byte_limit]
            dsecs, same = decode_side(cfg, part)
            line += f", advance_byte {dsecs / part.size * 1e6:.2f} us/byte (same tables: {same})"
        print(line, flush=True)


if __name__ == "__main__":
    main()
