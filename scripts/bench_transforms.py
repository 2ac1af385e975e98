"""Estimate what the transforms (issue 24) gain before they are wired into the format.

For each input: run ``transforms.forward``, check that ``inverse`` gives the input back,
then compress the input as it is and the transformed stream with ``mambazip.compress``
(one preset, one process), and add the transform record's bytes to the latter, as a
file would have to carry them. A reference column compresses what the input should come
close to (book1 itself for a gzip of book1, a tar for a zip).

With ``--acceptance`` the inputs are the issue's: ``gzip -9n`` of calgary/book1 against
book1; ``zip -9 -X`` of the Canterbury corpus against a tar of it (fixed names, mtimes and
owners); a PDF written by ``scripts/make_pdf.py`` from canterbury/alice29.txt; and /bin/ls.
Files given on the command line are measured alone (no reference). With ``--corpus`` every
file of the Calgary and Canterbury corpora and enwik6 goes through ``forward``; those left
unchanged cost only the record's two bytes, the others are measured as above.

With ``--cli`` each input instead goes through the command line as a user runs it
(``python -m mambazip compress -n -c --preset P --transforms auto`` and ``none``, format 7
against format 6, headers and framing included), and the ``auto`` file is decompressed and
compared with the input; ``--corpus`` then compresses every corpus file both ways.

    .venv/bin/python scripts/bench_transforms.py --acceptance --preset fast
    .venv/bin/python scripts/bench_transforms.py --preset default --prefix 262144 FILE...
    .venv/bin/python scripts/bench_transforms.py --corpus
    .venv/bin/python scripts/bench_transforms.py --cli --acceptance --preset default
"""

from __future__ import annotations

import argparse
import io
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import mambazip
from mambazip import transforms
from mambazip.transforms import record

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "bench" / "corpus"
sys.path.insert(0, str(REPO / "scripts"))


def _tar(folder: Path) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path in sorted(folder.iterdir()):
            info = tarfile.TarInfo(f"{folder.name}/{path.name}")
            info.size = path.stat().st_size
            info.mtime = 0
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(path.read_bytes()))
    return out.getvalue()


def _zip(folder: Path) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "c.zip"
        names = sorted(p.name for p in folder.iterdir())
        subprocess.run(["zip", "-q", "-9", "-X", str(target), *names], cwd=folder, check=True)
        return target.read_bytes()


def acceptance_inputs():
    from make_pdf import make_pdf

    book1 = (CORPUS / "calgary" / "book1").read_bytes()
    gz = subprocess.run(["gzip", "-9n"], input=book1, capture_output=True, check=True).stdout
    canterbury = CORPUS / "canterbury"
    alice = (canterbury / "alice29.txt").read_bytes().decode("latin-1")
    return [
        ("book1.gz (gzip -9n)", gz, ("book1", book1)),
        ("canterbury.zip (zip -9 -X)", _zip(canterbury), ("canterbury.tar", _tar(canterbury))),
        ("alice29.pdf (make_pdf.py)", make_pdf(alice), None),
        ("/bin/ls", Path("/bin/ls").read_bytes(), None),
    ]


def corpus_inputs(everything=False):
    """The corpus files a transform changes (``everything``: all of them); the others are
    listed as unchanged."""
    changed = []
    for path in sorted(CORPUS.glob("*/*")):
        if everything:
            changed.append((f"{path.parent.name}/{path.name}", path.read_bytes(), None))
            continue
        data = path.read_bytes()
        _, regions = transforms.forward(data)
        name = f"{path.parent.name}/{path.name}"
        if regions:
            changed.append((name, data, None))
        else:
            print(f"input {name} | bytes {len(data)} | unchanged | record 2")
    return changed


def measure(name, data, reference, preset):
    t = time.perf_counter()
    stream, regions = transforms.forward(data)
    forward_s = time.perf_counter() - t
    rec = record.encode(regions)
    back = transforms.inverse(stream, record.decode(rec, len(data), len(stream)), len(data))
    assert back == data, name
    plain = len(mambazip.compress(data, preset=preset))
    coded = len(mambazip.compress(stream, preset=preset)) + len(rec)
    row = {
        "input": name,
        "bytes": len(data),
        "stream": len(stream),
        "record": len(rec),
        "kinds": ",".join(transforms.kinds(regions)) or "-",
        "regions": len(regions),
        "forward_s": f"{forward_s:.2f}",
        "none": plain,
        "auto": coded,
        "auto/none": f"{coded / plain:.4f}",
    }
    if reference is not None:
        ref_name, ref = reference
        ref_coded = len(mambazip.compress(ref, preset=preset))
        row["reference"] = f"{ref_name} {ref_coded}"
        row["auto/ref"] = f"{coded / ref_coded:.4f}"
    return row


def _cli(args, data):
    """stdout of ``python -m mambazip ARGS`` given ``data`` on stdin; (bytes, seconds)."""
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mambazip", *args], input=data,
                          capture_output=True, check=True)  # fmt: skip
    return done.stdout, time.perf_counter() - t


def measure_cli(name, data, reference, preset):
    """The input compressed by the command line with ``--transforms auto`` and ``none``;
    the auto file decompressed and checked."""
    flags = ["compress", "-n", "-c", "--preset", preset]
    auto, auto_s = _cli([*flags, "--transforms", "auto"], data)
    none, none_s = _cli([*flags, "--transforms", "none"], data)
    back, _ = _cli(["decompress", "-c"], auto)
    assert back == data, name
    row = {
        "input": name,
        "bytes": len(data),
        "none": len(none),
        "auto": len(auto),
        "auto/none": f"{len(auto) / len(none):.4f}",
        "none_s": f"{none_s:.1f}",
        "auto_s": f"{auto_s:.1f}",
    }
    if reference is not None:
        ref_name, ref = reference
        ref_coded = len(_cli([*flags, "--transforms", "none"], ref)[0])
        row["reference"] = f"{ref_name} {ref_coded}"
        row["auto/ref"] = f"{len(auto) / ref_coded:.4f}"
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--acceptance", action="store_true")
    parser.add_argument("--preset", default="fast")
    parser.add_argument("--prefix", type=int, default=0, help="first N bytes of each input")
    parser.add_argument("--corpus", action="store_true")
    parser.add_argument("--cli", action="store_true", help="through the command line")
    parser.add_argument("--only", help="the acceptance inputs whose name holds this")
    args = parser.parse_args()
    cases = acceptance_inputs() if args.acceptance else []
    cases = [c for c in cases if args.only is None or args.only in c[0]]
    if args.corpus:
        cases += corpus_inputs(everything=args.cli)
    cases += [(str(p), p.read_bytes(), None) for p in args.files]
    print(f"# preset {args.preset}, {platform.machine()} {platform.processor()}".rstrip())
    for name, data, reference in cases:
        if args.prefix:
            data = data[: args.prefix]
            if reference is not None:
                reference = (reference[0], reference[1][: args.prefix])
        row = (measure_cli if args.cli else measure)(name, data, reference, args.preset)
        print(" | ".join(f"{k} {v}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
