"""Throughput of mambazip's matrix-vector kernels against NumPy (OpenBLAS) on model shapes.

Shapes are the in_proj and out_proj of a d_model=256, d_inner=512 model, given as PyTorch's
``W`` (out, in): in_proj (1024, 256) and out_proj (256, 512). mambazip stores ``Wt = W.T``
C-contiguous, shape (n_in, n_out), float32. Each operation is timed three ways:

==========  ============================================  ==========================================
operation   mambazip kernel (mambazip.kernels.linalg)     NumPy doing the same work
==========  ============================================  ==========================================
forward     ``matvec(y, Wt, x, bias)``: y = bias + x@Wt   ``np.matmul(W, x, out=y); y += bias``
backward    ``matvec_t_acc(dx, Wt, dy)``: dx += Wt @ dy   ``np.matmul(Wt, dy, out=t); dx += t``
weight      ``outer_acc_rows`` of one token: dWt += x ⊗ dy ``np.multiply(x[:, None], dy, out=T);
                                                          dWt += T`` (NumPy has no BLAS ger)
==========  ============================================  ==========================================

* "mambazip, compiled loop": the kernel called n times from a Numba-compiled loop, the way
  mambazip calls it (no Python dispatch per call);
* "mambazip, from Python": the same kernel called from a Python loop (adds Numba's dispatch);
* "NumPy": the NumPy expression above from a Python loop (the matmuls are BLAS sgemv).

Results are first checked against NumPy (``np.allclose``). Each trial repeats a call until it
has run for ``--min-time`` seconds; trials of all implementations are interleaved, and the
median over ``--trials`` trials is reported as µs per call, GFLOP/s (2·n_in·n_out flops per
call) and speed relative to NumPy (NumPy time ÷ this time: above 1 is faster than NumPy).
OpenBLAS threading is reported via threadpoolctl when installed; this script never changes
OPENBLAS_* or other threading variables.

Run from the repository root (takes about half a minute, plus Numba compilation):

    .venv/bin/python scripts/bench_matvec.py
    .venv/bin/python scripts/bench_matvec.py --trials 11 --min-time 0.1
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit

from mambazip.kernels.linalg import matvec, matvec_t_acc, outer_acc_rows

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import machine_line  # sibling script: shared machine line

SHAPES = {"in_proj": (1024, 256), "out_proj": (256, 512)}  # W (n_out, n_in)
NUMPY = "NumPy"
COMPILED = "mambazip, compiled loop"
PYTHON = "mambazip, from Python"


# --------------------------------------------------------------------------------------------
# Compiled loops: call each kernel n times from compiled code, as mambazip does


@njit
def loop_matvec(n, y, Wt, x, bias):
    for _ in range(n):
        matvec(y, Wt, x, bias)


@njit
def loop_matvec_t_acc(n, dx, Wt, dy):
    for _ in range(n):
        matvec_t_acc(dx, Wt, dy)


def one_token(x, dy):
    """outer_acc_rows' operands for dWt += x ⊗ dy: the token's rows (untied, so the last
    two, the embedding's, are not read)."""
    return (
        x[None, :],
        dy[None, :],
        False,
        np.zeros((1, x.shape[0]), np.float32),
        np.zeros(1, np.int64),
    )


@njit
def loop_outer_acc(n, dWt, X, dY, tied, emb_dx, inputs):
    for _ in range(n):
        outer_acc_rows(dWt, X, dY, tied, emb_dx, inputs)


# --------------------------------------------------------------------------------------------
# Operands and implementations


@dataclass
class Operands:
    W: np.ndarray  # (n_out, n_in), PyTorch layout
    Wt: np.ndarray  # (n_in, n_out), mambazip layout
    x: np.ndarray  # (n_in,)
    bias: np.ndarray  # (n_out,)
    dy: np.ndarray  # (n_out,)


def make_operands(n_out: int, n_in: int, seed: int = 0) -> Operands:
    rng = np.random.default_rng(seed)
    W = (rng.uniform(-1, 1, (n_out, n_in)) / np.sqrt(n_in)).astype(np.float32)
    return Operands(
        W=W,
        Wt=np.ascontiguousarray(W.T),
        x=rng.uniform(-1, 1, n_in).astype(np.float32),
        bias=rng.uniform(-0.1, 0.1, n_out).astype(np.float32),
        dy=rng.uniform(-1, 1, n_out).astype(np.float32),
    )


@dataclass
class Op:
    """One operation: a fresh output buffer, and a runner per implementation.

    A runner takes (n, out) and performs the operation n times into ``out``."""

    name: str
    formula: str
    new_out: Callable[[], np.ndarray]
    runners: dict[str, Callable[[int, np.ndarray], None]]


def python_loop(call: Callable[[np.ndarray], None]) -> Callable[[int, np.ndarray], None]:
    def run(n: int, out: np.ndarray) -> None:
        for _ in range(n):
            call(out)

    return run


def forward_op(o: Operands) -> Op:
    n_out = o.W.shape[0]

    def numpy_forward(y):
        np.matmul(o.W, o.x, out=y)
        np.add(y, o.bias, out=y)

    return Op(
        "forward",
        "y = bias + W x",
        lambda: np.zeros(n_out, np.float32),
        {
            COMPILED: lambda n, y: loop_matvec(n, y, o.Wt, o.x, o.bias),
            PYTHON: python_loop(lambda y: matvec(y, o.Wt, o.x, o.bias)),
            NUMPY: python_loop(numpy_forward),
        },
    )


def backward_op(o: Operands) -> Op:
    n_in = o.W.shape[1]
    tmp = np.empty(n_in, np.float32)

    def numpy_backward(dx):
        np.matmul(o.Wt, o.dy, out=tmp)
        np.add(dx, tmp, out=dx)

    return Op(
        "backward",
        "dx += Wᵀ dy",
        lambda: np.zeros(n_in, np.float32),
        {
            COMPILED: lambda n, dx: loop_matvec_t_acc(n, dx, o.Wt, o.dy),
            PYTHON: python_loop(lambda dx: matvec_t_acc(dx, o.Wt, o.dy)),
            NUMPY: python_loop(numpy_backward),
        },
    )


def weight_op(o: Operands) -> Op:
    tmp = np.empty_like(o.Wt)
    x_col = o.x[:, None]

    def numpy_outer(dWt):
        np.multiply(x_col, o.dy, out=tmp)
        np.add(dWt, tmp, out=dWt)

    return Op(
        "weight grad",
        "dWᵀ += x dyᵀ",
        lambda: np.zeros_like(o.Wt),
        {
            COMPILED: lambda n, dWt: loop_outer_acc(n, dWt, *one_token(o.x, o.dy)),
            PYTHON: python_loop(lambda dWt: outer_acc_rows(dWt, *one_token(o.x, o.dy))),
            NUMPY: python_loop(numpy_outer),
        },
    )


# --------------------------------------------------------------------------------------------
# Checking and timing


def check(op: Op) -> None:
    """One call of every implementation on a zeroed buffer must agree with NumPy."""
    results = {}
    for impl, run in op.runners.items():
        out = op.new_out()
        run(1, out)
        results[impl] = out
    for impl, out in results.items():
        if not np.allclose(out, results[NUMPY], rtol=1e-4, atol=1e-5):
            err = np.max(np.abs(out - results[NUMPY]))
            sys.exit(f"MISMATCH: {op.name} {impl} differs from NumPy (max abs error {err:.3g})")


def time_reps(run, out: np.ndarray, n: int) -> float:
    start = time.perf_counter()
    run(n, out)
    return time.perf_counter() - start


def calibrate(run, out: np.ndarray, min_time: float) -> int:
    """Repetitions that make one trial last at least ``min_time`` seconds."""
    n = 1
    while True:
        elapsed = time_reps(run, out, n)
        if elapsed >= min_time:
            return n
        n = max(n * 2, int(n * min_time / max(elapsed, 1e-9) * 1.2))


@dataclass
class Timing:
    median: float  # seconds per call
    best: float


def time_op(op: Op, trials: int, min_time: float) -> dict[str, Timing]:
    """Interleaved trials of every implementation; seconds per call."""
    outs = {impl: op.new_out() for impl in op.runners}
    for impl, run in op.runners.items():  # warm caches and branch predictors once
        run(3, outs[impl])
    reps = {impl: calibrate(run, outs[impl], min_time) for impl, run in op.runners.items()}
    samples: dict[str, list[float]] = {impl: [] for impl in op.runners}
    for _ in range(trials):
        for impl, run in op.runners.items():
            samples[impl].append(time_reps(run, outs[impl], reps[impl]) / reps[impl])
    return {impl: Timing(statistics.median(s), min(s)) for impl, s in samples.items()}


# --------------------------------------------------------------------------------------------
# Report


def blas_threading() -> str:
    """OpenBLAS library and thread count, as far as can be seen without changing anything."""
    env = [
        f"{k}={os.environ[k]}"
        for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
        if k in os.environ
    ]
    env_note = f"; env {', '.join(env)}" if env else "; no OPENBLAS/OMP_NUM_THREADS set"
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return f"BLAS {blas_build()}: threads unknown (threadpoolctl not installed){env_note}"
    pools = [
        f"{p.get('internal_api')} {p.get('version')} {p.get('num_threads')} threads"
        for p in threadpool_info()
        if p.get("user_api") == "blas"
    ]
    return f"BLAS {blas_build()}: {'; '.join(pools) or 'no BLAS pool found'}{env_note}"


def blas_build() -> str:
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # older NumPy: no dict mode
        return "unknown"


def table(results) -> list[str]:
    header = [
        "op",
        "W shape (out x in)",
        "implementation",
        "µs/call (median)",
        "µs (best)",
        "GFLOP/s",
        "vs NumPy",
    ]
    lines = ["| " + " | ".join(header) + " |", "|---|---|---|---:|---:|---:|---:|"]
    for label, shape, op, timings in results:
        flops = 2 * shape[0] * shape[1]
        ref = timings[NUMPY].median
        for impl, t in timings.items():
            cells = [
                f"{op.name} ({op.formula})",
                f"{label} {shape[0]}x{shape[1]}",
                impl,
                f"{t.median * 1e6:.2f}",
                f"{t.best * 1e6:.2f}",
                f"{flops / t.median / 1e9:.2f}",
                f"{ref / t.median:.2f}",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Time mambazip's matvec, matvec_t_acc and outer_acc_rows kernels against NumPy "
        "(BLAS) on the in_proj (1024x256) and out_proj (256x512) shapes."
    )
    p.add_argument("--trials", type=int, default=7, help="trials per measurement (default 7)")
    p.add_argument(
        "--min-time",
        type=float,
        default=0.05,
        metavar="SECONDS",
        help="minimum duration of one trial (default 0.05)",
    )
    args = p.parse_args(argv)
    if args.trials < 1 or args.min_time <= 0:
        p.error("--trials must be >= 1 and --min-time > 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    command = shlex.join([Path(sys.executable).name, *sys.argv])
    print("compiling and checking ...", file=sys.stderr, flush=True)
    results = []
    for label, shape in SHAPES.items():
        operands = make_operands(*shape)
        for op in (forward_op(operands), backward_op(operands), weight_op(operands)):
            check(op)
            print(f"timing {label} {op.name} ...", file=sys.stderr, flush=True)
            results.append((label, shape, op, time_op(op, args.trials, args.min_time)))
    lines = [
        "## mambazip matrix-vector kernels vs NumPy",
        "",
        f"- Machine: {machine_line()}",
        f"- {blas_threading()}",
        f"- Load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
        "(other processes may run on this machine)",
        f"- Command: `{command}`; {args.trials} interleaved trials of ≥ {args.min_time} s each; "
        "all results checked against NumPy with allclose(rtol=1e-4, atol=1e-5) first.",
        "- vs NumPy = NumPy time ÷ this time (above 1: faster than NumPy). "
        "GFLOP/s counts 2·out·in flops per call.",
        "",
        *table(results),
    ]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
