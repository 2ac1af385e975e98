"""Where the context side's time goes, function by function: perf over the predictor alone.

    python scripts/profile_predictor.py FILE [--preset fast|default|max] [--set field=value ...]
        [--limit BYTES] [--top N]

Runs the context mixer alone (no Mamba; format 5, the preset's coding: the presets code
bits, ``--set bits=false`` the nibbles) over the first BYTES of
FILE under ``perf record`` and prints perf's flat profile (self time per function) of the
timed loop only (perf starts disabled; the run enables it through perf's control fifo once
the kernels are compiled and the tables warm) and the loop's µs/byte.

Numba registers no symbols with perf, so its functions would show as bare addresses. The run
writes perf's JIT map (/tmp/perf-PID.map) itself: the address of every function of every
compiled predictor kernel, each reaching to the next one's start (sizes are not known). To
list the functions a kernel links in, the kernels are compiled afresh in a temporary cache
directory (a kernel loaded from the cache keeps only its object code), so the run takes a
minute more. Functions inlined by LLVM count in their caller.

Needs perf (linux-tools) and the right to use it (root, or kernel.perf_event_paranoid <= 2).
"""

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_predictor import parse_value  # sibling script: the --set values

CHUNK = 4096


def write_perf_map(path):
    """perf's JIT map of every function of every compiled kernel of the package."""
    from numba.core.registry import CPUDispatcher

    entries = set()
    for name, module in list(sys.modules.items()):
        if not name.startswith("mambazip"):
            continue
        for obj in vars(module).values():
            if not isinstance(obj, CPUDispatcher):
                continue
            for cres in obj.overloads.values():
                library = cres.library
                names = {cres.fndesc.mangled_name}
                names.update(
                    f.name for f in library._final_module.functions if not f.is_declaration
                )
                for fn in names:
                    address = library.get_pointer_to_function(fn)
                    if address:
                        entries.add((address, fn))
    entries = sorted(entries)
    with open(path, "w") as f:
        for k, (address, fn) in enumerate(entries):
            end = entries[k + 1][0] if k + 1 < len(entries) else address + 65536
            f.write(f"{address:x} {min(end - address, 1 << 18):x} {short_name(fn)}\n")
    return len(entries)


def short_name(mangled):
    """module.function of a Numba mangled name (_ZN8mambazip9predictor4loop5_node...)."""
    parts, rest = [], mangled[3:] if mangled.startswith("_ZN") else mangled
    while rest[:1].isdigit():
        digits = len(rest) - len(rest.lstrip("0123456789"))
        n = int(rest[:digits])
        parts.append(rest[digits : digits + n])
        rest = rest[digits + n :]
    if parts and parts[0] == "mambazip":
        return ".".join(parts[1:]) or mangled
    return mangled if not parts else ".".join(parts)


def child(args):
    """Compile, warm up, map the functions, then run the timed loop with perf enabled."""
    import numpy as np

    from mambazip.predictor import DEFAULT, FAST, MAX, ContextMixer

    base = {"fast": FAST, "default": DEFAULT, "max": MAX}[args.preset]
    fields = dict(s.split("=", 1) for s in args.set)
    cfg = dataclasses.replace(base, mamba=False, **{k: parse_value(v) for k, v in fields.items()})
    data = np.frombuffer(Path(args.file).read_bytes()[: args.limit], np.uint8)
    warm = ContextMixer(cfg, nibbles=True)
    warm.prime()
    warm.advance(data[:CHUNK])
    n = write_perf_map(f"/tmp/perf-{os.getpid()}.map")
    mixer = ContextMixer(cfg, nibbles=True)
    mixer.prime()
    with open(args.control, "w") as ctl:
        ctl.write("enable\n")
    start = time.perf_counter()
    for i in range(0, data.size, CHUNK):
        mixer.advance(data[i : i + CHUNK])
    secs = time.perf_counter() - start
    with open(args.control, "w") as ctl:
        ctl.write("disable\n")
    print(f"{n} functions mapped; {data.size} bytes, {secs / data.size * 1e6:.2f} µs/byte")


def record(script, argv, sorts, hz=4000):
    """Run ``script argv --control FIFO`` under ``perf record`` (perf starts disabled; the
    script enables it through the fifo), its kernels compiled afresh in a temporary cache
    directory; returns perf's report (samples counted) for each sort key list of ``sorts``."""
    with tempfile.TemporaryDirectory() as tmp:
        control, data = os.path.join(tmp, "control"), os.path.join(tmp, "perf.data")
        os.mkfifo(control)
        cmd = [sys.executable, script, *argv, "--control", control]
        env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(tmp, "numba"))
        perf = ["perf", "record", "-q", "-D", "-1", "--control", f"fifo:{control}", "-F", str(hz)]
        subprocess.run([*perf, "-o", data, "--", *cmd], env=env, check=True)
        return [
            subprocess.run(
                ["perf", "report", "-i", data, "--sort", keys, "-n", "--stdio"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            for keys in sorts
        ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--preset", choices=("fast", "default", "max"), default="default")
    ap.add_argument("--set", action="append", default=[], help="MixConfig field=value")
    ap.add_argument("--limit", type=int, default=131072, help="first BYTES of the file")
    ap.add_argument("--top", type=int, default=25, help="functions to print")
    ap.add_argument("--control", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.control:
        child(args)
        return
    (report,) = record(__file__, sys.argv[1:], ["sym"])
    rows = [line for line in report.splitlines() if line.strip() and line[0] != "#"]
    for line in rows[: args.top]:
        print(line[:110])


if __name__ == "__main__":
    main()
