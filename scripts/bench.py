"""Benchmark mambazip against standard compressors on the shared corpus.

For each (file, compressor) pair this measures:

* bits/byte: compressed bytes * 8 / original bytes;
* compress and decompress speed in KB/s (KB = 1000 bytes), from the wall time of the child
  process, so it includes the process's start-up (for mambazip: Python, imports, loading the
  cached Numba kernels);
* peak memory: the child's maximum resident set size (``ru_maxrss`` from ``os.wait4``), the
  larger of the compress and decompress runs, in MB (10^6 bytes);
* a round-trip check: SHA-256 of the decompressed output against the original.

Compressors: mambazip (one row per ``--preset``, all with the same ``--mambazip-args``),
``xz -9e``, ``bzip2 -9``, ``zstd -19``, and, when found on PATH, ``lstm-compress``, ``paq8px -0L``
and ``-8L``, ``cmix`` and ``nncp`` (absent ones are skipped and listed in the output). With
``--ablate`` each preset also runs as the Mamba alone (``--mix none``) and as the context models
alone (``--mix cm``). Every tool runs as a
subprocess in its own empty temporary directory; inputs are first copied (or cut to ``--limit``
bytes) into a temporary directory, so nothing is ever written next to the corpus.

Before timing, each mambazip variant compresses and decompresses a small warm-up file so that
the first timed run does not pay for Numba compilation (compiled kernels are cached on disk).

Run from the repository root (it takes long: mambazip codes 3 to 20 kilobytes per second):

    .venv/bin/python scripts/bench.py                            # default corpus subset
    .venv/bin/python scripts/bench.py --limit 20000 ../shared/bench/corpus/calgary/paper1
    .venv/bin/python scripts/bench.py --preset default --preset other --out bench.md
    .venv/bin/python scripts/bench.py --mambazip-args "--lr 0.002" --skip-decompress

Exit status is 0 only if every run succeeded and every round trip matched.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import hashlib
import importlib.metadata
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "bench" / "corpus"
DEFAULT_FILES = (
    "enwik8/enwik6",
    "calgary/book1",
    "canterbury/alice29.txt",
    "calgary/paper1",
    "canterbury/kennedy.xls",
    "calgary/obj2",
)
WARMUP_BYTES = 4096
XZ_NAME = "xz -9e"


# --------------------------------------------------------------------------------------------
# Compressors


@dataclass(frozen=True)
class Compressor:
    """How to run one compressor. ``{in}`` and ``{out}`` in the argv templates are replaced by
    the input and output paths; with ``stdout=True`` the tool writes its output to stdout."""

    name: str
    compress: tuple[str, ...]
    decompress: tuple[str, ...]
    stdout: bool = False
    is_mambazip: bool = False


BASELINES = (
    Compressor(XZ_NAME, ("xz", "-9e", "-c", "{in}"), ("xz", "-d", "-c", "{in}"), stdout=True),
    Compressor("bzip2 -9", ("bzip2", "-9", "-c", "{in}"), ("bzip2", "-d", "-c", "{in}"), True),
    Compressor(
        "zstd -19", ("zstd", "-19", "-q", "-c", "{in}"), ("zstd", "-d", "-q", "-c", "{in}"), True
    ),
)

# The usual command lines of these tools; none is installed here, so they are untested.
OPTIONAL = (
    Compressor(
        "lstm-compress",
        ("lstm-compress", "-c", "{in}", "{out}"),
        ("lstm-compress", "-d", "{in}", "{out}"),
    ),
    # -0L: its LSTM alone; -8L: every model and the LSTM (paq8px v216).
    Compressor("paq8px -0L", ("paq8px", "-0L", "{in}", "{out}"), ("paq8px", "-d", "{in}", "{out}")),
    Compressor("paq8px -8L", ("paq8px", "-8L", "{in}", "{out}"), ("paq8px", "-d", "{in}", "{out}")),
    Compressor("cmix", ("cmix", "-c", "{in}", "{out}"), ("cmix", "-d", "{in}", "{out}")),
    Compressor("nncp", ("nncp", "c", "{in}", "{out}"), ("nncp", "d", "{in}", "{out}")),
)


def mambazip_command() -> list[str]:
    """The mambazip console script of this interpreter's environment, else the module."""
    script = Path(sys.executable).with_name("mambazip")
    if script.exists():
        return [str(script)]
    found = shutil.which("mambazip")
    return [found] if found else [sys.executable, "-m", "mambazip"]


# --ablate: each part of the predictor alone before the preset as it is.
ABLATIONS = (("--mix", "none"), ("--mix", "cm"))


def mambazip_variants(presets: list[str], extra: list[str], ablate=False,
                      scratch=False) -> list[Compressor]:  # fmt: skip
    """One mambazip compressor per preset, each with the extra CLI options; with ``ablate``,
    also the Mamba alone (--mix none) and the context models alone (--mix cm) per preset;
    with ``scratch``, also the preset from the seeded init instead of its prior."""
    exe = tuple(mambazip_command())
    variants = []
    for preset in presets:
        extras = (*(ABLATIONS if ablate else ()), *((("--prior", "none"),) if scratch else ()))
        for options in (*extras, ()):
            args = [*options, *extra]
            name = " ".join(["mambazip", preset, *args])
            comp = (*exe, "compress", "-q", "--preset", preset, *args, "-o", "{out}", "{in}")
            decomp = (*exe, "decompress", "-q", "-o", "{out}", "{in}")
            variants.append(Compressor(name, comp, decomp, is_mambazip=True))
    return variants


def available_optional() -> tuple[list[Compressor], list[str]]:
    """Split the optional compressors into those on PATH and the names of the absent ones."""
    found = [c for c in OPTIONAL if shutil.which(c.compress[0])]
    missing = [c.compress[0] for c in OPTIONAL if not shutil.which(c.compress[0])]
    return found, missing


# --------------------------------------------------------------------------------------------
# Running one child process


@dataclass
class Child:
    returncode: int
    seconds: float
    max_rss: int  # bytes
    stderr: str


def max_rss_bytes(usage) -> int:
    """ru_maxrss is in KiB on Linux and in bytes on macOS."""
    return usage.ru_maxrss if sys.platform == "darwin" else usage.ru_maxrss * 1024


@functools.cache
def gnu_time() -> str | None:
    """GNU time, if installed: it reports the child's max RSS without our own RSS in it.

    A forked child's ru_maxrss starts at its parent's resident size (the kernel keeps the
    pre-exec high-water mark), so wait4 from this Python process cannot report less than this
    process's own RSS. GNU time is a small process, so its floor is about 1 MB."""
    exe = shutil.which("time")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return exe if "GNU" in out.stdout + out.stderr else None


def read_time_rss(path: Path) -> int | None:
    """The %M (KiB) that GNU time wrote as the last line of its -o file, in bytes."""
    try:
        return int(path.read_text().split()[-1]) * 1024
    except (OSError, ValueError, IndexError):
        return None


def run_child(argv: list[str], cwd: Path, stdout_path: Path | None, log: Path) -> Child:
    """Run argv in cwd, wait for it with wait4 and return its wall time and peak RSS."""
    rss_file = log.with_suffix(".rss")
    timer = gnu_time()
    if timer:
        argv = [timer, "-f", "%M", "-o", str(rss_file), *argv]
    with open(stdout_path or os.devnull, "wb") as out, open(log, "wb") as err:
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        except OSError as exc:
            return Child(-1, 0.0, 0, f"cannot start {argv[0]}: {exc}")
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped: keep Popen from waiting
    rss = (read_time_rss(rss_file) if timer else None) or max_rss_bytes(usage)
    return Child(proc.returncode, seconds, rss, log.read_text(errors="replace"))


def rss_method(tmp: Path) -> str:
    """How peak memory was measured, and the floor of that method (RSS of running ``true``)."""
    floor = run_child(["true"], tmp, None, tmp / "floor.stderr").max_rss / 1e6
    if gnu_time():
        return f"max RSS of the child from GNU time %M (floor: `true` shows {floor:.1f} MB)"
    return (
        f"max RSS of the child from wait4; GNU time not found, so every value includes this "
        f"script's own RSS at fork time: `true` shows {floor:.1f} MB, values near that are "
        "upper bounds"
    )


def fill(template: tuple[str, ...], src: Path, dst: Path) -> list[str]:
    return [a.replace("{in}", str(src)).replace("{out}", str(dst)) for a in template]


def produced_file(expected: Path) -> Path | None:
    """The output file: the expected path, else the only file the tool left in its directory."""
    if expected.exists():
        return expected
    files = [p for p in expected.parent.iterdir() if p.is_file()]
    return files[0] if len(files) == 1 else None


def run_step(template, comp: Compressor, src: Path, rundir: Path, step: str):
    """Run one compress or decompress step in a fresh directory; return (Child, output|None)."""
    workdir = rundir / step
    workdir.mkdir()
    dst = workdir / ("out.cmp" if step == "compress" else "out.dat")
    child = run_child(
        fill(template, src, dst), workdir, dst if comp.stdout else None, rundir / f"{step}.stderr"
    )
    return child, (produced_file(dst) if child.returncode == 0 else None)


# --------------------------------------------------------------------------------------------
# Benchmarking


@dataclass
class Row:
    file: str
    size: int
    compressor: Compressor
    compressed: int = 0
    c_seconds: float = 0.0
    d_seconds: float | None = None
    peak: int = 0
    round_trip: str = "skipped (--skip-decompress)"
    errors: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.errors)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def bench_one(comp: Compressor, label: str, src: Path, rundir: Path, decompress: bool) -> Row:
    """Compress (and decompress, and check) one staged input with one compressor."""
    rundir.mkdir()
    row = Row(label, src.stat().st_size, comp)
    child, packed = run_step(comp.compress, comp, src, rundir, "compress")
    row.c_seconds, row.peak = child.seconds, child.max_rss
    if packed is None:
        row.round_trip = "FAILED"
        row.errors.append(step_error("compress", child))
        return row
    row.compressed = packed.stat().st_size
    if not decompress:
        return row
    child, unpacked = run_step(comp.decompress, comp, packed, rundir, "decompress")
    row.d_seconds, row.peak = child.seconds, max(row.peak, child.max_rss)
    if unpacked is None:
        row.round_trip = "FAILED"
        row.errors.append(step_error("decompress", child))
    elif sha256(unpacked) != sha256(src):
        row.round_trip = "FAILED"
        row.errors.append("decompressed output differs from the original (SHA-256)")
    else:
        row.round_trip = "ok"
    return row


def step_error(step: str, child: Child) -> str:
    tail = child.stderr.strip().splitlines()[-3:]
    why = f"exit {child.returncode}" if child.returncode else "no output file found"
    return f"{step} failed ({why}): " + " | ".join(tail)


def stage_input(path: Path, limit: int | None, tmp: Path, tag: str) -> Path:
    """Copy the input (or its first ``limit`` bytes) into the temporary directory."""
    dest = tmp / "inputs" / f"{tag}-{path.name}"
    dest.parent.mkdir(exist_ok=True)
    with open(path, "rb") as f:
        dest.write_bytes(f.read(limit) if limit is not None else f.read())
    return dest


def file_label(path: Path, size: int, limit: int | None) -> str:
    try:
        name = str(path.resolve().relative_to(CORPUS.resolve()))
    except ValueError:
        name = path.name
    return f"{name}[:{size}]" if limit is not None and size == limit else name


def warm_up(variants: list[Compressor], first: Path, tmp: Path) -> dict[str, tuple]:
    """Compress and decompress a small file with every mambazip variant; exit on failure.

    Then compress a single byte, which times little but the start-up of one process.
    Returns (warm-up compress seconds, one-byte compress seconds) per variant."""
    sample = stage_input(first, WARMUP_BYTES, tmp, "warmup")
    one_byte = stage_input(first, 1, tmp, "one-byte")
    seconds = {}
    for i, comp in enumerate(variants):
        print(f"warm-up: {comp.name} ...", file=sys.stderr, flush=True)
        row = bench_one(comp, "warm-up", sample, tmp / f"warmup-{i}", decompress=True)
        tiny = bench_one(comp, "one byte", one_byte, tmp / f"startup-{i}", decompress=False)
        if row.failed or tiny.failed:
            sys.exit(f"warm-up of {comp.name} FAILED: " + "; ".join(row.errors + tiny.errors))
        seconds[comp.name] = (row.c_seconds, tiny.c_seconds)
    return seconds


def run_all(files, compressors, args, tmp: Path) -> list[Row]:
    rows = []
    total = len(files) * len(compressors)
    for i, path in enumerate(files):
        src = stage_input(path, args.limit, tmp, str(i))
        label = file_label(path, src.stat().st_size, args.limit)
        for j, comp in enumerate(compressors):
            n = i * len(compressors) + j + 1
            print(f"[{n}/{total}] {label} {comp.name} ...", end=" ", file=sys.stderr, flush=True)
            row = bench_one(comp, label, src, tmp / f"run-{i}-{j}", not args.skip_decompress)
            print(progress_note(row), file=sys.stderr, flush=True)
            for err in row.errors:
                print(f"!!! {label} / {comp.name}: {err}", file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def progress_note(row: Row) -> str:
    if row.failed:
        return "FAILED"
    return f"{bits_per_byte(row):.3f} bpb, {row.c_seconds:.1f} s, round trip {row.round_trip}"


# --------------------------------------------------------------------------------------------
# Machine and versions


def cpu_model() -> str:
    info = Path("/proc/cpuinfo")
    text = info.read_text() if info.exists() else ""
    names = [ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")]
    flags = next(
        (ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), []
    )
    simd = [f for f in ("avx2", "fma", "avx512f") if f in flags]
    name = names[0] if names else platform.processor() or platform.machine()
    return f"{name} ({', '.join(simd)})" if simd else name


def ram_gb() -> str:
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) * 1024 / 1e9:.1f} GB RAM"
    return "RAM unknown"


def version_of(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def git_revision() -> str:
    try:
        rev = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("+dirty" if dirty else "")


def machine_line() -> str:
    """Date, CPU, cores, RAM, Python and the versions of the numeric packages."""
    date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    return (
        f"{date} · {cpu_model()}, {os.cpu_count()} cores, {ram_gb()} · "
        f"Python {platform.python_version()}, NumPy {version_of('numpy')}, "
        f"Numba {version_of('numba')}, llvmlite {version_of('llvmlite')}"
    )


def tool_version(exe: str) -> str:
    """First line of ``exe --version`` (bzip2 prints it on stderr)."""
    try:
        out = subprocess.run(
            [exe, "--version"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return f"{exe} ?"
    lines = (out.stdout or out.stderr).strip().splitlines()
    return lines[0].strip("* ") if lines else f"{exe} ?"


# --------------------------------------------------------------------------------------------
# Report


def bits_per_byte(row: Row) -> float:
    return row.compressed * 8 / row.size if row.size else 0.0


def speed(size: int, seconds: float | None) -> float | None:
    return size / 1000 / seconds if seconds else None


def fmt_speed(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def table_line(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def row_cells(row: Row) -> list:
    if row.failed and not row.compressed:
        return [row.file, row.size, row.compressor.name, "-", "-", "-", "-", "**FAILED**"]
    trip = f"**{row.round_trip}**" if row.round_trip.startswith("FAILED") else row.round_trip
    return [
        row.file,
        row.size,
        row.compressor.name,
        f"{bits_per_byte(row):.3f}",
        fmt_speed(speed(row.size, row.c_seconds)),
        fmt_speed(speed(row.size, row.d_seconds)),
        f"{row.peak / 1e6:.1f}",
        trip,
    ]


def total_row(rows: list[Row]) -> Row:
    """All files of one compressor together: summed sizes and times, largest peak."""
    good = [r for r in rows if not r.failed]
    total = Row("**all files**", sum(r.size for r in good), rows[0].compressor)
    total.compressed = sum(r.compressed for r in good)
    total.c_seconds = sum(r.c_seconds for r in good)
    d_times = [r.d_seconds for r in good if r.d_seconds is not None]
    total.d_seconds = sum(d_times) if d_times else None
    total.peak = max((r.peak for r in good), default=0)
    if len(good) < len(rows):
        total.round_trip = f"FAILED ({len(rows) - len(good)} runs excluded)"
    else:
        total.round_trip = "ok" if all(r.round_trip == "ok" for r in rows) else rows[0].round_trip
    return total


def results_table(rows: list[Row], compressors: list[Compressor], n_files: int) -> list[str]:
    header = [
        "file",
        "size",
        "compressor",
        "bits/byte",
        "compress KB/s",
        "decompress KB/s",
        "peak MB",
        "round trip",
    ]
    lines = [table_line(header), table_line(["---"] * 2 + ["---"] + ["---:"] * 4 + ["---"])]
    lines += [table_line(row_cells(r)) for r in rows]
    if n_files > 1:
        for comp in compressors:
            lines.append(
                table_line(row_cells(total_row([r for r in rows if r.compressor == comp])))
            )
    return lines


def speed_vs_xz(rows: list[Row], compressors: list[Compressor]) -> list[str]:
    """mambazip compress speed as a fraction of xz -9e's, per file and over all files."""
    xz = {r.file: r for r in rows if r.compressor.name == XZ_NAME and not r.failed}
    lines = [
        f"mambazip compress speed relative to {XZ_NAME} in this run "
        "(mambazip KB/s ÷ xz KB/s; below 1 means slower):",
        "",
        table_line(
            ["file", "compressor", "mambazip KB/s", "xz KB/s", "ratio", "xz is N times faster"]
        ),
        table_line(["---", "---", "---:", "---:", "---:", "---:"]),
    ]
    for comp in (c for c in compressors if c.is_mambazip):
        mine = [r for r in rows if r.compressor == comp and not r.failed and r.file in xz]
        pairs = [(r.file, r, xz[r.file]) for r in mine]
        if len(mine) > 1:
            pairs.append(("**all files**", total_row(mine), total_row([xz[r.file] for r in mine])))
        for label, m, x in pairs:
            ms, xs = speed(m.size, m.c_seconds), speed(x.size, x.c_seconds)
            ratio = ms / xs if ms and xs else None
            lines.append(
                table_line(
                    [
                        label,
                        comp.name,
                        fmt_speed(ms),
                        fmt_speed(xs),
                        f"{ratio:.3g}" if ratio else "-",
                        f"{1 / ratio:,.0f}" if ratio else "-",
                    ]
                )
            )
    return lines


def notes(args, missing: list[str], warmups: dict, rss: str) -> list[str]:
    out = []
    if args.limit is not None:
        out.append(f"- `--limit {args.limit}`: only the first {args.limit} bytes of each file.")
    if args.skip_decompress:
        out.append("- `--skip-decompress`: decompression was not run, round trips NOT checked.")
    for name, (warm, startup) in warmups.items():
        out.append(
            f"- Before timing, `{name}` compressed and decompressed a {WARMUP_BYTES}-byte warm-up "
            f"file (compress {warm:.1f} s wall; the first run after a change of mambazip's source "
            "also compiles the Numba kernels, cached on disk afterwards). Compressing 1 byte took "
            f"{startup:.1f} s: about the start-up cost included in each mambazip time below."
        )
    out.append(
        "- Speeds: wall time of the whole child process, start-up included; KB = 1000 bytes."
    )
    out.append(f"- Peak MB (10^6 bytes): {rss}, larger of compress and decompress.")
    if missing:
        out.append(f"- Not on PATH, skipped: {', '.join(missing)}.")
    return out


def report(rows, compressors, args, header: dict, missing, warmups, n_files) -> str:
    lines = [
        "## mambazip benchmark",
        "",
        f"- Machine: {header['machine']}",
        f"- mambazip {version_of('mambazip')} (git {git_revision()}); tools: {header['tools']}",
        f"- Load average at start / end: {header['load_start']} / {header['load_end']} "
        "(other processes may run on this machine)",
        f"- Command: `{header['command']}`",
        *notes(args, missing, warmups, header["rss"]),
        "",
        *results_table(rows, compressors, n_files),
        "",
        *speed_vs_xz(rows, compressors),
    ]
    return "\n".join(lines) + "\n"


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


# --------------------------------------------------------------------------------------------
# Command line


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Benchmark mambazip against xz, bzip2, zstd (and lstm-compress, paq8px, "
        "cmix, nncp when on PATH): bits/byte, speed, peak memory, round trip.",
    )
    p.add_argument(
        "files",
        nargs="*",
        type=Path,
        help=f"files to benchmark (default: {', '.join(DEFAULT_FILES)} under {CORPUS})",
    )
    p.add_argument(
        "--preset",
        action="append",
        metavar="NAME",
        help="mambazip preset; repeat to compare several (default: every preset in models/)",
    )
    p.add_argument(
        "--mambazip-args",
        default="",
        metavar="ARGS",
        help='extra options for "mambazip compress" for every preset, one string, '
        'e.g. --mambazip-args "--lr 0.002" (use --mambazip-args=--opt for a lone option)',
    )
    p.add_argument(
        "--ablate",
        action="store_true",
        help="per preset, also the Mamba alone (--mix none) and the context models alone "
        "(--mix cm): what each part of the predictor is worth",
    )
    p.add_argument(
        "--scratch",
        action="store_true",
        help="per preset, also a row started from the seeded init (--prior none) instead of "
        "the preset's pretrained prior: what the prior is worth",
    )
    p.add_argument(
        "--no-baselines",
        action="store_true",
        help="mambazip only: leave out xz, bzip2, zstd and the optional peers",
    )
    p.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help='run only these of the other compressors, by name (e.g. --only "paq8px -0L"); '
        "repeat for several (default: xz, bzip2, zstd and every optional peer on PATH)",
    )
    p.add_argument(
        "--limit",
        type=int,
        metavar="BYTES",
        help="benchmark only the first BYTES bytes of each file",
    )
    p.add_argument(
        "--out",
        type=Path,
        metavar="PATH",
        help="also write the markdown report to PATH (it is always printed)",
    )
    p.add_argument(
        "--skip-decompress",
        action="store_true",
        help="compress only: ratio and compress speed, no round-trip check",
    )
    p.add_argument(
        "--small",
        action="store_true",
        help=f"only the small-files table: prefixes of {SMALL_SOURCE} and "
        f"{RECORD_BYTES}-byte records, beside paq8px -8, zstd -19, gzip -9 and xz -9e",
    )
    args = p.parse_args(argv)
    if args.limit is not None and args.limit <= 0:
        p.error("--limit must be positive")
    known = [c.name for c in (*BASELINES, *OPTIONAL)]
    if args.only and (args.no_baselines or args.small):
        p.error("--only chooses among the other compressors: not with --no-baselines or --small")
    for name in args.only or ():
        if name not in known:
            p.error(f"--only {name!r}: not one of {', '.join(known)}")
    return args


# --small: prefixes of one text file, and records through the Python API.
SMALL_SOURCE = "canterbury/alice29.txt"
SMALL_SIZES = (0, 50, 200, 1000, 4000)
RECORD_BYTES, RECORDS = 200, 20
SMALL_PEERS = (
    Compressor("paq8px -8", ("paq8px", "-8", "{in}", "{out}"), ("paq8px", "-d", "{in}", "{out}")),
    BASELINES[2],  # zstd -19
    Compressor(
        "gzip -9 -n", ("gzip", "-9", "-n", "-c", "{in}"), ("gzip", "-d", "-c", "{in}"), True
    ),
    BASELINES[0],  # xz -9e
)


def small_files(presets: list[str], tmp: Path) -> list[str]:
    """The small-files table: each prefix of SMALL_SOURCE compressed by mambazip (-n) and the
    peers on PATH, in bytes, and the mean size of RECORDS records of RECORD_BYTES bytes, by
    ``mambazip.compress`` (the Python API, one process) and by each peer's command line."""
    import mambazip

    text = (CORPUS / SMALL_SOURCE).read_bytes()
    exe = tuple(mambazip_command())
    tools = [Compressor(f"mambazip {p} -n", (*exe, "compress", "-q", "-n", "--preset", p, "-o",
                                             "{out}", "{in}"), (), is_mambazip=True)
             for p in presets]  # fmt: skip
    tools += [c for c in SMALL_PEERS if shutil.which(c.compress[0])]
    inputs = {f"{SMALL_SOURCE}, first {n:,} bytes" if n else "empty file": text[:n]
              for n in SMALL_SIZES}  # fmt: skip
    records = [text[i * RECORD_BYTES : (i + 1) * RECORD_BYTES] for i in range(RECORDS)]
    lines = ["## small files (bytes)", "",
             table_line(["input", *(c.name for c in tools)]),
             table_line(["---"] * (len(tools) + 1))]  # fmt: skip

    def size_of(comp, data, tag):
        src = tmp / "small" / tag / "in.dat"
        src.parent.mkdir(parents=True)
        src.write_bytes(data)
        _, packed = run_step(comp.compress, comp, src, src.parent, "compress")
        return packed.stat().st_size if packed is not None else None

    for i, (label, data) in enumerate(inputs.items()):
        sizes = [size_of(c, data, f"{i}-{j}") for j, c in enumerate(tools)]
        lines.append(table_line([label, *("failed" if s is None else f"{s:,}" for s in sizes)]))
    means = []
    for j, comp in enumerate(tools):
        if comp.is_mambazip:
            preset = comp.name.split()[1]
            sizes = [len(mambazip.compress(r, preset=preset)) for r in records]
        else:
            sizes = [size_of(comp, r, f"r{k}-{j}") for k, r in enumerate(records)]
        means.append("failed" if None in sizes else f"{sum(sizes) / len(sizes):.1f}")
    api = f"{RECORDS} records of {RECORD_BYTES} bytes, mean (mambazip: Python API)"
    lines.append(table_line([api, *means]))
    return lines


def input_files(given: list[Path]) -> list[Path]:
    if given:
        missing = [str(f) for f in given if not f.is_file()]
        if missing:
            sys.exit(f"not a file: {', '.join(missing)}")
        return given
    found = [CORPUS / f for f in DEFAULT_FILES if (CORPUS / f).is_file()]
    absent = [f for f in DEFAULT_FILES if not (CORPUS / f).is_file()]
    if absent:
        print(f"note: not in the corpus, skipped: {', '.join(absent)}", file=sys.stderr)
    if not found:
        sys.exit(f"no default benchmark files found under {CORPUS}; give files explicitly")
    return found


def main(argv=None) -> int:
    args = parse_args(argv)
    presets = args.preset or sorted(p.stem for p in (REPO / "models").glob("*.json"))
    if args.small:
        with tempfile.TemporaryDirectory(prefix="mambazip-bench-") as tmpname:
            text = "\n".join([f"- Machine: {machine_line()}",
                              f"- mambazip {version_of('mambazip')} (git {git_revision()})",
                              f"- Load average at start: {load_average()}", "",
                              *small_files(presets, Path(tmpname))]) + "\n"  # fmt: skip
        print(text)
        if args.out:
            args.out.write_text(text)
        return 0
    files = input_files(args.files)
    variants = mambazip_variants(presets, shlex.split(args.mambazip_args), args.ablate,
                                 args.scratch)  # fmt: skip
    optional, missing = available_optional()
    baselines = [] if args.no_baselines else [*BASELINES, *optional]
    if args.only:
        absent = [n for n in args.only if n not in [c.name for c in (*BASELINES, *optional)]]
        if absent:
            sys.exit(f"bench.py: --only {absent[0]!r}: not on PATH")
        baselines = [c for c in baselines if c.name in args.only]
    compressors = [*variants, *baselines]
    header = {
        "machine": machine_line(),
        "tools": ", ".join(tool_version(c.compress[0]) for c in baselines) or "none",
        "load_start": load_average(),
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
    }
    with tempfile.TemporaryDirectory(prefix="mambazip-bench-") as tmpname:
        tmp = Path(tmpname)
        header["rss"] = rss_method(tmp)
        warmups = warm_up(variants, files[0], tmp)
        rows = run_all(files, compressors, args, tmp)
    header["load_end"] = load_average()
    text = report(rows, compressors, args, header, missing, warmups, len(files))
    print(text)
    if args.out:
        args.out.write_text(text)
    failures = [r for r in rows if r.failed]
    for r in failures:
        print(f"FAILED: {r.file} / {r.compressor.name}: {'; '.join(r.errors)}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
