"""Speed and ratio of the context-mixing predictor alone (a preset's tables, mamba=False).

    python scripts/bench_predictor.py FILE [FILE ...] [--preset fast|default|max]
        [--set field=value ...] (contexts=word3+column: names) [--limit BYTES] [--format 4|5]

Per file: bits/byte of the CM alone (the sum of -log2 p over the file, from ``advance`` over 4 KB
chunks), µs/byte of ``advance`` (this thread's CPU time, the least of ``--repeat`` runs on
fresh predictors: on a shared machine wall time and single runs vary by 10-20 %) and of
``advance_byte`` (the decoder's call, timed on the first ``--byte-limit`` bytes with a fresh
predictor; it must give the same tables; format 5: with ``advance_nibble`` between a byte's
two nibbles; not with ``--set bits=true``, whose decoder has no call between a byte's bits),
µs/byte of decoding those bytes from their range-coded words as blocks.py does (format 5:
decoding inside the compiled loop), and the memory of the config. Compile time is excluded
(one warm-up call on a tiny config first).
``--format 4``: all 255 nodes, one 256-symbol table per byte (formats 3 and 4); ``5``: the
nibble coding, only the byte's path (format 5). The script also runs on a checkout from
before format 5 (``--format 4`` only).
"""

import argparse
import dataclasses
import time

import numpy as np

from mambazip import blocks
from mambazip.coder import Encoder
from mambazip.observe import SILENT
from mambazip.predictor import DEFAULT, FAST, MAX, SMALL, ContextMixer, MixConfig

CHUNK = 4096
NIBBLES = False  # --format 5


def mixer_of(cfg):
    return ContextMixer(cfg, nibbles=True) if NIBBLES else ContextMixer(cfg)


def parse_value(text):
    """true/false, an integer, or names joined by "+" (contexts=word3+column)."""
    if text in ("true", "false"):
        return text == "true"
    if not text.lstrip("-").isdigit():
        return tuple(name for name in text.split("+") if name)
    return int(text)


def encode(cfg, data):
    mixer = mixer_of(cfg)
    mixer.prime()
    bits = 0.0
    start = time.thread_time()
    for i in range(0, data.size, CHUNK):
        _, p = mixer.advance(data[i : i + CHUNK])
        bits -= np.log2(p).sum()
    return bits, time.thread_time() - start


def decode_side(cfg, data):
    """advance_byte over data; returns (seconds, tables equal to advance's)."""
    ref = mixer_of(cfg)
    ref.prime()
    freqs, _ = ref.advance(data)
    mixer = mixer_of(cfg)
    mixer.prime()
    start = time.perf_counter()
    for i in range(data.size):
        if NIBBLES:
            mixer.advance_nibble(data[i] >> 4)
        mixer.advance_byte(data[i])
    secs = time.perf_counter() - start
    # Compared after the timing (the comparison cost as much as a third of the call): the final
    # tables and a replay byte by byte.
    same = bool(np.array_equal(mixer.freq, ref.freq))
    mixer = mixer_of(cfg)
    mixer.prime()
    for i in range(min(data.size, 2000)):
        same &= bool(np.array_equal(mixer.freq, freqs[i, : mixer.freq.shape[0]]))
        if NIBBLES:
            mixer.advance_nibble(data[i] >> 4)
        mixer.advance_byte(data[i])
    return secs, same


class _Adapter:
    """What blocks._decode_block needs of a predictor, around the context mixer alone."""

    def __init__(self, mixer):
        self.min_byte_bits = 0.00015 if mixer.cfg.wide else 0.0025  # Predictor's bound
        self.mixer, self.nibbles = mixer, NIBBLES
        self.freq = mixer.freq

    def advance_byte(self, byte):
        self.mixer.advance_byte(byte)

    def decode_nibbles(self, decoder, out, start, stop):
        return self.mixer.decode_run(decoder, out, start, stop)


def coded_decode(cfg, data):
    """Range-code data as blocks.encode_blocks does, then decode it as _decode_block does;
    returns (seconds of the decoding, whether it gave data back)."""
    mixer = mixer_of(cfg)
    mixer.prime()
    freqs, _ = mixer.advance(data)
    enc = Encoder()
    if mixer.bits:
        enc.encode(np.unpackbits(data), freqs.reshape(-1, 2))
    elif NIBBLES:
        enc.encode(blocks.nibbles_of(data), freqs.reshape(-1, 16))
    else:
        enc.encode(data, freqs)
    words = enc.finish()
    mixer = mixer_of(cfg)
    mixer.prime()
    start = time.perf_counter()
    out = blocks._decode_block(_Adapter(mixer), words, data.size, SILENT)
    return time.perf_counter() - start, out == data.tobytes()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--set", action="append", default=[], help="MixConfig field=value")
    ap.add_argument("--limit", type=int, default=0, help="first BYTES of each file only")
    ap.add_argument("--byte-limit", type=int, default=100_000)
    ap.add_argument("--preset", choices=("fast", "default", "max"), default="default")
    ap.add_argument("--format", type=int, choices=(4, 5), default=5)
    ap.add_argument("--repeat", type=int, default=1, help="time advance N times, report the least")
    args = ap.parse_args()
    global NIBBLES
    NIBBLES = args.format >= 5
    fields = dict(s.split("=", 1) for s in args.set)
    base = {"fast": FAST, "default": DEFAULT, "max": MAX}[args.preset]
    base = dataclasses.replace(base, mamba=False)  # no Mamba here: the context models alone
    cfg = dataclasses.replace(base, **{k: parse_value(v) for k, v in fields.items()})
    cfg = MixConfig.from_dict(cfg.to_dict())
    print(f"config: {cfg.to_dict()}")
    print(f"memory: {cfg.memory_bytes() / 2**20:.1f} MiB, format {args.format}")
    warm = mixer_of(SMALL)  # compiles (or loads the cache) outside the timings
    warm.prime()
    warm.advance(np.zeros(4, np.uint8))
    if NIBBLES:
        warm.advance_nibble(0)
    warm.advance_byte(0)
    coded_decode(SMALL, np.zeros(4, np.uint8))
    for path in args.files:
        with open(path, "rb") as f:
            data = np.frombuffer(f.read(), np.uint8)
        if args.limit:
            data = data[: args.limit]
        bits, secs = encode(cfg, data)
        for _ in range(args.repeat - 1):
            again, more = encode(cfg, data)
            assert again == bits, "the same bytes coded twice gave different bits"
            secs = min(secs, more)
        line = (
            f"{path}: {data.size} bytes, {bits / data.size:.4f} bits/byte, "
            f"advance {secs / data.size * 1e6:.2f} us/byte"
        )
        if args.byte_limit:
            part = data[: args.byte_limit]
            if not (NIBBLES and cfg.bits):  # bits: no call between a byte's bits to time
                dsecs, same = decode_side(cfg, part)
                line += (f", advance_byte {dsecs / part.size * 1e6:.2f} us/byte (same tables: "
                         f"{same})")  # fmt: skip
            csecs, ok = coded_decode(cfg, part)
            line += f", coded decode {csecs / part.size * 1e6:.2f} us/byte (round trip: {ok})"
        print(line, flush=True)


if __name__ == "__main__":
    main()
