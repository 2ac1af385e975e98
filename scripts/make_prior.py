"""Turn a model trained by ``mambazip train`` into a preset's prior in models/priors/.

    python scripts/make_prior.py TRAINED.safetensors --preset default --heldout HELDOUT \
        --command "mambazip train ..." --seconds 2520 [--dtype F16]

writes ``models/priors/SHA.safetensors`` (the weights alone: a prior starts the optimizer
afresh, as ``--model`` does) and its manifest ``models/priors/SHA.json``: the SHA-256, the
training corpus (``models/corpus/prior-corpus.json``) and the documents trained on, the
command, its time and machine, and held-out bits/byte of the Mamba alone on HELDOUT: frozen
(optimizer none, what the prior knows before it learns) and learning online as compress
does, from the prior and from the seeded init. The preset names its prior by SHA-256 in
its JSON ("prior"). Never delete or rewrite a prior that a release has shipped: files compressed
from it name it by its SHA-256.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import io
import json
import multiprocessing
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mambazip import checkpoint, codec  # noqa: E402
from mambazip.config import resolve_settings  # noqa: E402

PRIORS = REPO / "models" / "priors"
CORPUS_RECORD = REPO / "models" / "corpus" / "prior-corpus.json"


def heldout_bits(data, preset, model, **train):
    """Bits/byte of the Mamba alone of ``preset`` on ``data``, from ``model`` (None: the
    seeded init), with training settings ``train`` over the preset's."""
    settings = resolve_settings(preset, mix="none", train=train)
    start = time.perf_counter()
    stats = codec.compress_stream(io.BytesIO(data), io.BytesIO(), settings, model=model)
    return stats.ideal_bits / len(data), time.perf_counter() - start


def _heldout_run(data, preset, model, optimizer):
    return heldout_bits(data, preset, model, optimizer=optimizer)


def machine():
    cpu = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trained", type=Path)
    parser.add_argument("--preset", required=True)
    parser.add_argument("--heldout", type=Path, required=True)
    parser.add_argument("--command", required=True, help="the training command, as run")
    parser.add_argument("--seconds", type=float, required=True, help="its wall time")
    parser.add_argument("--dtype", choices=("F32", "F16"), default="F32")
    parser.add_argument("--description", default="")
    parser.add_argument(
        "--corpus-record", type=Path, default=CORPUS_RECORD,
        help="the record of the corpus it was trained on (build_prior_corpus.py --record)",
    )  # fmt: skip
    parser.add_argument(
        "--history", type=Path,
        help="held-out bits/byte during training, one JSON object a line "
        "(train_prior.py's OUT/log.jsonl)",
    )  # fmt: skip
    args = parser.parse_args()

    trained = checkpoint.load(args.trained)
    settings = resolve_settings(args.preset)
    if trained.config != settings.model:
        raise SystemExit(f"{args.trained}: shape {trained.config} is not preset {args.preset}'s")
    prior = checkpoint.Checkpoint(trained.config, trained.params, settings=settings)
    blob = prior.to_bytes(dtype=args.dtype)
    sha = hashlib.sha256(blob).hexdigest()
    PRIORS.mkdir(parents=True, exist_ok=True)
    path = PRIORS / f"{sha}.safetensors"
    path.write_bytes(blob)
    shipped = checkpoint.load(path)

    heldout = args.heldout.read_bytes()
    # Three independent runs, one process each: on the shared machine that took 299 s for
    # the frozen one alone.
    runs = [(heldout, args.preset, shipped, "none"), (heldout, args.preset, shipped, None),
            (heldout, args.preset, None, None)]  # fmt: skip
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        (frozen, _), (online, _), (scratch, _) = pool.starmap(_heldout_run, runs)
    record = args.corpus_record.resolve()
    corpus = json.loads(record.read_text())
    history = {}
    if args.history:
        history["history"] = [json.loads(line) for line in args.history.read_text().splitlines()]
    manifest = {
        "sha256": sha,
        "file": f"{sha}.safetensors",
        "bytes": len(blob),
        "dtype": args.dtype,
        "preset": args.preset,
        "model": settings.to_dict()["model"],
        "description": args.description,
        "corpus": {
            "record": str(record.relative_to(REPO)),
            "sha256": corpus["sha256"],
            "bytes": corpus["bytes"],
        },
        "training": {
            "command": args.command,
            "seconds": round(args.seconds),
            "bytes_learned": trained.learned,
            "machine": machine(),
            "date": datetime.date.today().isoformat(),
        },
        **history,
        "heldout": {
            # Relative to where it ran (the checkout): no path of this machine in a release.
            "file": os.path.relpath(args.heldout),
            "sha256": hashlib.sha256(heldout).hexdigest(),
            "bytes": len(heldout),
            "bits_per_byte_frozen": round(frozen, 4),
            "bits_per_byte_online_from_prior": round(online, 4),
            "bits_per_byte_online_from_scratch": round(scratch, 4),
            "how": "the preset's Mamba alone (--mix none); frozen: --optimizer none",
        },
    }
    (PRIORS / f"{sha}.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(json.dumps(manifest, indent=2))


if __name__ == "__main__":
    main()
