"""Sweep mix settings over the Mamba's pdfs, computed once per input and cached on disk.

    python scripts/sweep_mix.py FILE... [--preset default] [--cache /tmp/sweep-mix]
        [--row "label: field=value field=value"]... [--jobs 2]

The Mamba's pdf of a byte depends only on the bytes before it (``predict.Predictor``: the
learner runs over a chunk first, the mixer then reads its pdfs; nothing of the mixer reaches
the learner), so a sweep over mix settings needs the Mamba only once per input. The first run
on an input compresses it with ``mambazip.compress(data, preset)`` (the preset's prior when the
input looks like text, its transforms, its frames) and records, from inside that run, the
bytes the mixer was given, the pdf of each (float32, exactly the rows the mixer read) and the
mix settings it was built with; they go to ``--cache`` with the compressed size and the ideal
bits of that run. Every row then runs a fresh ``ContextMixer`` of those settings with the
row's fields replaced over the cached pdfs, in 4 KB chunks as blocks.py does, and reports
ideal bits/byte (-log2 p). The row ``cm`` (``mamba=false``) is the same mix without the Mamba.
A row with no fields is the compressed run's own settings: its figure must equal the recorded
ideal bits exactly (checked and printed). A preset without the Mamba (``fast``) records no
pdfs, and its rows run without them.

Field values: true/false, integers, or names joined by "+" (contexts=word3+column).
"""

import argparse
import dataclasses
import hashlib
import json
import multiprocessing
import os
import time
from pathlib import Path

import numpy as np

CHUNK = 4096


def parse_value(text):
    if text in ("true", "false"):
        return text == "true"
    if not text.lstrip("-").isdigit():
        return tuple(name for name in text.split("+") if name)
    return int(text)


def parse_row(text):
    label, _, fields = text.partition(":")
    if not fields.strip() and "=" in label:
        label, fields = label.strip(), label
    pairs = [item.split("=", 1) for item in fields.split()]
    return label.strip(), {k: parse_value(v) for k, v in pairs}


def _key(path, preset):
    data = Path(path).read_bytes()
    digest = hashlib.sha256(data).hexdigest()[:16]
    return f"{Path(path).name}-{preset}-{digest}"


def record(path, preset, cache):
    """Compress ``path`` with ``preset`` once, recording what its context mixer was given."""
    import mambazip
    from mambazip.predictor import ContextMixer

    key = _key(path, preset)
    meta_path = cache / f"{key}.json"
    if meta_path.exists():
        return key
    seen = {"mixers": 0}
    rows, datas = [], []
    prime, advance = ContextMixer.prime, ContextMixer.advance

    def rec_prime(self, mamba_pdf=None):
        seen["mixers"] += 1
        seen["cfg"], seen["nibbles"] = self.cfg, self.nibbles
        if mamba_pdf is not None:
            rows.append(np.asarray(mamba_pdf, np.float32).reshape(1, 256).copy())
        return prime(self, mamba_pdf)

    def rec_advance(self, data, mamba_pdfs=None, trust=None):
        freqs, p = advance(self, data, mamba_pdfs, trust)
        datas.append(np.asarray(data, np.uint8).copy())
        seen["bits"] = seen.get("bits", 0.0) - np.log2(p).sum()
        if mamba_pdfs is not None:
            rows.append(np.asarray(mamba_pdfs, np.float32).reshape(-1, 256).copy())
        return freqs, p

    ContextMixer.prime, ContextMixer.advance = rec_prime, rec_advance
    try:
        start = time.process_time()
        blob = mambazip.compress(Path(path).read_bytes(), preset=preset)
        cpu = time.process_time() - start
    finally:
        ContextMixer.prime, ContextMixer.advance = prime, advance
    if seen["mixers"] != 1:
        raise SystemExit(f"{path}: {seen['mixers']} context mixers coded it; expected one")
    data = np.concatenate(datas)
    ideal = float(seen["bits"])
    if seen["cfg"].mamba:  # without the Mamba (a preset such as fast) there are no pdfs
        pdfs = np.concatenate(rows)  # row i: the pdf of data[i] (row 0 from prime), the last
        assert pdfs.shape == (data.size + 1, 256)
        np.save(cache / f"{key}.pdfs.npy", pdfs)
    np.save(cache / f"{key}.data.npy", data)
    meta = {"file": str(path), "bytes": len(Path(path).read_bytes()), "coded": int(data.size),
            "compressed": len(blob), "ideal_bits": ideal, "cpu_seconds": cpu,
            "nibbles": seen["nibbles"], "mix": seen["cfg"].to_dict()}  # fmt: skip
    meta_path.write_text(json.dumps(meta, indent=1))
    return key


def run_row(job):
    """Ideal bits/byte of one row's settings over one cached input."""
    from mambazip.predictor import ContextMixer, MixConfig

    cache, key, fields = job
    meta = json.loads((cache / f"{key}.json").read_text())
    cfg = dataclasses.replace(MixConfig.from_dict(meta["mix"]), **fields)
    cfg = MixConfig.from_dict(cfg.to_dict())
    data = np.load(cache / f"{key}.data.npy")
    pdfs = np.load(cache / f"{key}.pdfs.npy", mmap_mode="r") if cfg.mamba else None
    mixer = ContextMixer(cfg, nibbles=meta["nibbles"])
    start = time.process_time()
    if cfg.mamba:
        mixer.prime(np.ascontiguousarray(pdfs[0]))
    else:
        mixer.prime()
    bits = 0.0
    for i in range(0, data.size, CHUNK):
        chunk = data[i : i + CHUNK]
        nxt = np.ascontiguousarray(pdfs[i + 1 : i + 1 + chunk.size]) if cfg.mamba else None
        _, p = mixer.advance(chunk, nxt)
        bits -= np.log2(p).sum()
    return bits, time.process_time() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--preset", default="default")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/sweep-mix"))
    ap.add_argument("--row", action="append", default=[],
                    help='"label: field=value ..." (repeat); default: recorded and cm')  # fmt: skip
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    rows = [parse_row(r) for r in args.row] or [("recorded", {}), ("cm", {"mamba": False})]
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(args.jobs) as pool:
        keys = pool.starmap(record, [(f, args.preset, args.cache) for f in args.files])
        metas = {k: json.loads((args.cache / f"{k}.json").read_text()) for k in keys}
        for meta in metas.values():
            print(f"{Path(meta['file']).name}: {meta['coded']} bytes coded, compressed "
                  f"{meta['compressed']} B = {8 * meta['compressed'] / meta['bytes']:.4f} "
                  f"bits/byte, ideal {meta['ideal_bits'] / meta['coded']:.4f} "
                  f"(+{meta['compressed'] - meta['ideal_bits'] / 8:.1f} B header and coder), "
                  f"mamba CPU {meta['cpu_seconds']:.0f} s", flush=True)  # fmt: skip
        jobs = [(args.cache, k, fields) for _, fields in rows for k in keys]
        results = pool.map(run_row, jobs)
    names = [Path(metas[k]["file"]).name for k in keys]
    print("\n| row | " + " | ".join(names) + " | sum | CPU s |")
    print("|---|" + "---|" * (len(names) + 2))
    for r, (label, fields) in enumerate(rows):
        got = results[r * len(keys) : (r + 1) * len(keys)]
        bpb = [bits / metas[k]["coded"] for (bits, _), k in zip(got, keys, strict=True)]
        cpu = sum(s for _, s in got)
        print(f"| {label} | " + " | ".join(f"{b:.4f}" for b in bpb)
              + f" | {sum(bpb):.4f} | {cpu:.0f} |", flush=True)  # fmt: skip
        if not fields:
            for (bits, _), k in zip(got, keys, strict=True):
                if bits != metas[k]["ideal_bits"]:
                    print(f"  MISMATCH {k}: {bits!r} vs recorded {metas[k]['ideal_bits']!r}")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
