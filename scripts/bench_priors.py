"""Compare a preset's starting models (priors) on the same inputs: coded bits/byte of each.

Everything but the prior is the preset's (default: the whole ``default`` predictor); a prior
starts only inputs that look like text (``priors.looks_like_text``), as compress does. Runs
through the library in this process (``codec.compress_stream``), so a prior that is not yet
the preset's can be measured before the preset names it.

    python scripts/bench_priors.py --prior e60d1a9d... --prior NEW_SHA --limit 262144 \
        ../shared/bench/corpus/enwik8/enwik6 ../shared/bench/corpus/calgary/book1
    python scripts/bench_priors.py --prior OLD --prior NEW --small   # the 16 small files

``--prior`` is a shipped prior's SHA-256 (models/priors/), a checkpoint's path, or ``none``.
"""

from __future__ import annotations

import argparse
import io
import multiprocessing
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mambazip import checkpoint, codec, priors  # noqa: E402
from mambazip.config import resolve_settings  # noqa: E402

CORPUS = REPO.parent / "shared" / "bench" / "corpus"
# The small files of benchmarks/bench-2026-12-02-prior-small.md.
SMALL = (
    *("canterbury/fields.c", "canterbury/grammar.lsp", "canterbury/xargs.1"),
    *("canterbury/cp.html", "canterbury/sum", "calgary/paper1", "calgary/paper2"),
    *("calgary/paper3", "calgary/paper4", "calgary/paper5", "calgary/paper6"),
    *("calgary/progc", "calgary/progl", "calgary/progp", "calgary/obj1", "calgary/trans"),
)


def load(name):
    if name == "none":
        return None
    if Path(name).is_file():
        return checkpoint.load(name)
    return priors.load(name)


def coded_bytes(data, settings, prior):
    out = io.BytesIO()
    codec.compress_stream(io.BytesIO(data), out, settings, prior=prior)
    return len(out.getvalue())


def _task(path, limit, preset, mix, prior):
    """(input bytes, coded bytes, seconds) of one file from one prior, in a worker."""
    data = path.read_bytes()[:limit]
    start = time.perf_counter()
    n = coded_bytes(data, resolve_settings(preset, mix=mix), load(prior))
    return len(data), n, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--prior", action="append", required=True)
    parser.add_argument("--preset", default="default")
    parser.add_argument("--mix", choices=("none", "full"), help="default: the preset's")
    parser.add_argument("--limit", type=int, help="only the first LIMIT bytes of each file")
    parser.add_argument("--small", action="store_true", help="the 16 small corpus files")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    args = parser.parse_args()
    files = list(args.files) + ([CORPUS / f for f in SMALL] if args.small else [])
    tasks = [(f, args.limit, args.preset, args.mix, p) for f in files for p in args.prior]
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        results = iter(pool.starmap(_task, tasks, chunksize=1))
    names = [p[:8] for p in args.prior]
    print("| file | bytes | " + " | ".join(f"{n} bits/byte" for n in names) + " |")
    print("| --- | ---: |" + " ---: |" * len(names))
    totals = [0] * len(names)
    size = 0
    for path in files:
        row = []
        for i in range(len(names)):
            length, n, seconds = next(results)
            totals[i] += n
            row.append(f"{8 * n / length:.4f} ({n:,} B, {seconds:.0f} s)")
        size += length
        print(f"| {path.parent.name}/{path.name} | {length:,} | " + " | ".join(row) + " |")
    print(f"| total | {size:,} | " + " | ".join(f"{8 * t / size:.4f} ({t:,} B)" for t in totals)
          + " |")  # fmt: skip


if __name__ == "__main__":
    main()
