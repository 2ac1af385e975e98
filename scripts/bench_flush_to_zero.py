"""What subnormal numbers cost the online loop: the same run with and without x86 flush-to-zero.

mambazip computes in strict IEEE float32, subnormals included, so that every CPU gives the same
bits. This script measures what that costs: a learner trains on the first ``--train`` bytes of
a file, then the next ``--loop`` bytes are timed, once in a process with the default
floating-point mode and once in a process with flush-to-zero and denormals-are-zero set
(MXCSR bits 15 and 6, x86-64 only). It prints µs per byte and the ideal bits/byte of the
timed stretch of both runs. Flush-to-zero is for this measurement only: mambazip never sets it.

    .venv/bin/python scripts/bench_flush_to_zero.py --d-model 64 --n-layer 2
"""

import argparse
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "corpus"
MXCSR_DEFAULT = 0x1F80
MXCSR_FTZ_DAZ = MXCSR_DEFAULT | 0x8000 | 0x0040


@intrinsic
def _load_mxcsr(typingctx, value):
    sig = types.void(types.int32)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer()])
        fn = builder.module.declare_intrinsic("llvm.x86.sse.ldmxcsr", fnty=fnty)
        slot = builder.alloca(ir.IntType(32))
        builder.store(args[0], slot)
        builder.call(fn, [builder.bitcast(slot, ir.IntType(8).as_pointer())])
        return context.get_dummy_value()

    return sig, codegen


@njit
def _set_mxcsr(value):
    _load_mxcsr(value)


def _run(args):
    from mambazip.config import resolve_settings
    from mambazip.model import OnlineLearner

    if args.mode == "ftz":
        _set_mxcsr(np.int32(MXCSR_FTZ_DAZ))
    model = {"d_model": args.d_model, "n_layer": args.n_layer}
    settings = resolve_settings(args.preset, model=model)
    data = args.file.read_bytes()[: args.train + args.loop]
    data = np.frombuffer(data, dtype=np.uint8)
    learner = OnlineLearner(settings)
    learner.advance(data[: args.train])
    start = time.perf_counter()
    _, p = learner.advance(data[args.train :])
    seconds = time.perf_counter() - start
    bits = float(-np.log2(p.astype(np.float64)).mean())
    print(f"{args.mode:5s} {seconds / args.loop * 1e6:7.1f} µs/byte, {bits:.6f} bits/byte")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="default")
    p.add_argument("--d-model", type=int)
    p.add_argument("--n-layer", type=int)
    p.add_argument("--file", type=Path, default=CORPUS / "enwik8" / "enwik6")
    p.add_argument("--train", type=int, default=100_000)
    p.add_argument("--loop", type=int, default=32_768)
    p.add_argument("--mode", choices=["ieee", "ftz"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if platform.machine() not in ("x86_64", "AMD64"):
        p.error("flush-to-zero is set through x86's MXCSR: x86-64 only")
    if args.mode:
        _run(args)
        return
    for mode in ("ieee", "ftz"):
        subprocess.run([sys.executable, __file__, *sys.argv[1:], "--mode", mode], check=True)


if __name__ == "__main__":
    main()
