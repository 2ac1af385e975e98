"""linalg kernels: the documented summation order, float64 accuracy, the same bits on every CPU
target (host vs NUMBA_CPU_NAME=generic), and no FMA in the compiled code (theirs and the
vector-IR scans').

Run as a script (``python test_linalg_determinism.py OUT.npz``) it evaluates every case and saves
the float32 results; the cross-target test does that in two subprocesses.
"""

import os
import platform
import re
import subprocess
import sys

import numpy as np
import pytest
from numba import njit

from mambazip.kernels import linalg
from mambazip.kernels.backward import ssm_backward
from mambazip.kernels.forward import ssm_forward

# (n_in, n_out) of Wt; n_out covers multiples of 16 and of 64, remainders 1..15, both at once
# (96, 100: outer_acc_rows' 64-output blocks and a tail), and empty matrices.
SHAPES = [(256, 1024), (512, 256), (512, 48), (40, 40), (64, 17), (7, 1), (9, 31), (3, 0), (0, 5),
          (9, 96), (5, 100)]  # fmt: skip
TOKENS = 3  # rows of outer_acc_rows' inputs
GRAD_TOKENS = 6  # rows of matvec_t_rows' inputs: one block of linalg.TOKENS and a remainder
U = 2.0**-24  # unit roundoff of float32
FMA_RE = re.compile(r"\b(v?fn?m(?:add|sub)\w*|fml[as]\w*|fmaf?)\b", re.IGNORECASE)


def make_case(k):
    """Inputs of case k: normals times 2^[-8, 8), so that any change of order changes bits."""
    n_in, n_out = SHAPES[k]
    rng = np.random.default_rng(1000 + k)

    def arr(*shape):
        scale = 2.0 ** rng.integers(-8, 8, size=shape)
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    case = {"Wt": arr(n_in, n_out), "x": arr(n_in), "bias": arr(n_out), "dy": arr(n_out),
            "dx": arr(n_in), "dWt": arr(n_in, n_out)}  # fmt: skip
    case["X"], case["dY"] = arr(TOKENS, n_in), arr(TOKENS, n_out)
    case["dX_t"], case["dY_t"] = arr(GRAD_TOKENS, n_in), arr(GRAD_TOKENS, n_out)
    return case


def run_kernels(case):
    """The five kernels on one case; matvec_t_acc and matvec_t_rows also on a strided view of
    the same Wt."""
    Wt, x, dy = case["Wt"], case["x"], case["dy"]
    y = np.empty(Wt.shape[1], np.float32)
    linalg.matvec(y, Wt, x, case["bias"])
    y_rows = np.empty((TOKENS, Wt.shape[1]), np.float32)
    linalg.matvec_rows(y_rows, Wt, case["X"], case["bias"])
    dx = case["dx"].copy()
    linalg.matvec_t_acc(dx, Wt, dy)
    wide = np.zeros((Wt.shape[0], 2 * Wt.shape[1]), np.float32)
    wide[:, ::2] = Wt
    dx_strided = case["dx"].copy()
    linalg.matvec_t_acc(dx_strided, wide[:, ::2], dy)
    dX = case["dX_t"].copy()
    linalg.matvec_t_rows(dX, Wt, case["dY_t"])
    dX_strided = case["dX_t"].copy()
    linalg.matvec_t_rows(dX_strided, wide[:, ::2], case["dY_t"])
    dWt_rows = case["dWt"].copy()
    unused = np.zeros_like(case["X"]), np.zeros(TOKENS, np.int64)
    linalg.outer_acc_rows(dWt_rows, case["X"], case["dY"], False, *unused)
    return {"y": y, "y_rows": y_rows, "dx": dx, "dx_strided": dx_strided, "dX_rows": dX,
            "dX_rows_strided": dX_strided, "dWt_rows": dWt_rows}  # fmt: skip


# Independent oracles in NumPy float32: each ufunc call rounds every element once (no FMA), and
# the loops spell out the order that linalg's docstring promises.
def matvec_order(Wt, x, bias):
    y = bias.copy()
    for c in range(Wt.shape[0]):
        y = y + Wt[c] * x[c]
    return y


def lanes_order(dx, Wt, dy):
    n_in, n_out = Wt.shape
    lanes = np.zeros((n_in, 16), np.float32)
    for k in range(0, n_out, 16):
        m = min(16, n_out - k)
        lanes[:, :m] = lanes[:, :m] + Wt[:, k : k + m] * dy[k : k + m]
    width = 16
    while width > 1:
        width //= 2
        lanes[:, :width] = lanes[:, :width] + lanes[:, width : 2 * width]
    return dx + lanes[:, 0]


def rows_order(dWt, X, dY):
    for t in range(X.shape[0] - 1, -1, -1):
        dWt = dWt + np.outer(X[t], dY[t])
    return dWt


def expected(case):
    Wt, x, dy = case["Wt"], case["x"], case["dy"]
    dx = lanes_order(case["dx"], Wt, dy)
    y_rows = np.array([matvec_order(Wt, row, case["bias"]) for row in case["X"]], np.float32)
    dX = np.array(
        [lanes_order(row, Wt, d) for row, d in zip(case["dX_t"], case["dY_t"], strict=True)],
        np.float32,
    )
    dX = dX.reshape(GRAD_TOKENS, Wt.shape[0])
    return {"y": matvec_order(Wt, x, case["bias"]), "dx": dx, "dx_strided": dx,
            "dX_rows": dX, "dX_rows_strided": dX,
            "y_rows": y_rows.reshape(TOKENS, Wt.shape[1]),
            "dWt_rows": rows_order(case["dWt"], case["X"], case["dY"])}  # fmt: skip


def bits(a):
    return np.ascontiguousarray(a).view(np.uint32)


@pytest.mark.parametrize("k", range(len(SHAPES)), ids=[f"{a}x{b}" for a, b in SHAPES])
def test_kernels_follow_documented_order(k):
    """Bit-identical to the NumPy spelling of the order: the order is the one written down."""
    case = make_case(k)
    got, want = run_kernels(case), expected(case)
    for name in want:
        np.testing.assert_array_equal(bits(got[name]), bits(want[name]), err_msg=name)


def gamma(m):
    """Higham's gamma_m = m u / (1 - m u): the relative error bound of m rounded operations."""
    return m * U / (1 - m * U)


@pytest.mark.parametrize("k", range(len(SHAPES)), ids=[f"{a}x{b}" for a, b in SHAPES])
def test_kernels_close_to_float64(k):
    """Within the classical forward error bound of their float32 operation chains.

    A sum whose every term passes through at most m roundings (one product, then additions)
    is within gamma(m) * sum|terms| of the exact sum. Terms per output and m:
    matvec: bias + n_in products, m = n_in + 1 (one chain in input order);
    matvec_t_acc and matvec_t_rows: dx + n_out products, m = 1 + ceil(n_out/16) + 4 + 1
    (product, lane chain, 4 tree levels, final +=), e.g. 75 for n_out = 1024, i.e. < 5e-6
    relative;
    outer_acc_rows: dWt + TOKENS products, m = TOKENS + 1."""
    c = {key: v.astype(np.float64) for key, v in make_case(k).items()}
    got = run_kernels(make_case(k))
    n_in, n_out = c["Wt"].shape

    def check(name, value, exact, magnitude, m):
        err = np.abs(value.astype(np.float64) - exact)
        assert np.all(err <= gamma(m) * magnitude), (name, float(np.max(err / magnitude)))

    aW = np.abs(c["Wt"])
    check("y", got["y"], c["bias"] + c["x"] @ c["Wt"], np.abs(c["bias"]) + np.abs(c["x"]) @ aW,
          n_in + 1)  # fmt: skip
    m_t = 1 + -(-n_out // 16) + 4 + 1
    magnitude_t = np.abs(c["dx"]) + aW @ np.abs(c["dy"])
    for name in ("dx", "dx_strided"):
        check(name, got[name], c["dx"] + c["Wt"] @ c["dy"], magnitude_t, m_t)
    magnitude_rows_t = np.abs(c["dX_t"]) + np.abs(c["dY_t"]) @ aW.T
    for name in ("dX_rows", "dX_rows_strided"):
        check(name, got[name], c["dX_t"] + c["dY_t"] @ c["Wt"].T, magnitude_rows_t, m_t)
    rows = c["X"].T @ c["dY"]
    magnitude_rows = np.abs(c["dWt"]) + np.abs(c["X"]).T @ np.abs(c["dY"])
    check("dWt_rows", got["dWt_rows"], c["dWt"] + rows, magnitude_rows, TOKENS + 1)


def widest_vector_register():
    """Widest x86 vector register in matvec_t_acc's code (a fresh, uncached compile)."""
    asm = "\n".join(compiled_asm(linalg.matvec_t_acc))
    for reg in ("zmm", "ymm", "xmm"):
        if f"%{reg}" in asm:
            return reg
    return "none"


def emit(path):
    out = {}
    for k in range(len(SHAPES)):
        for name, value in run_kernels(make_case(k)).items():
            out[f"{k}/{name}"] = value
    width = widest_vector_register() if platform.machine() in ("x86_64", "AMD64") else "n/a"
    np.savez(path, widest=np.array(width), **out)


def test_same_bits_on_generic_and_host_cpu(tmp_path):
    """Two fresh processes with their own Numba caches: the host CPU, and the baseline ISA
    (NUMBA_CPU_NAME=generic: SSE2 on x86-64). Every float32 output must match bit for bit."""
    procs = {}
    for target in ("host", "generic"):
        env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / f"cache-{target}"))
        env.pop("NUMBA_CPU_FEATURES", None)
        env.pop("NUMBA_CPU_NAME", None)
        if target == "generic":
            env["NUMBA_CPU_NAME"] = "generic"
        out = tmp_path / f"{target}.npz"
        procs[target] = (subprocess.Popen([sys.executable, __file__, str(out)], env=env), out)
    results = {}
    for target, (proc, out) in procs.items():
        assert proc.wait(timeout=300) == 0, target
        results[target] = dict(np.load(out))
    host, generic = results["host"], results["generic"]
    if platform.machine() in ("x86_64", "AMD64"):  # the generic run really used SSE only
        assert generic.pop("widest") == "xmm"
        host.pop("widest")
    assert host.keys() == generic.keys()
    for name in host:
        assert host[name].tobytes() == generic[name].tobytes(), name
        k, key = name.split("/")
        assert host[name].tobytes() == bits(expected(make_case(int(k)))[key]).tobytes(), name


def compiled_asm(dispatcher):
    """Assembly of an uncached copy of a kernel, compiled for C-contiguous float32 arrays."""
    fresh = njit(error_model="numpy")(dispatcher.py_func)
    case = make_case(SHAPES.index((40, 40)))
    Wt, x, dy = case["Wt"], case["x"], case["dy"]
    E, N = 40, 20  # the scans: 16 channels at a time and one by one, whole and partial vectors

    def scan_arrays(*shapes):
        return [np.full(shape, 0.5, np.float32) for shape in shapes]

    args = {
        "ssm_forward": scan_arrays(E, (E, N), (E, N), (E, N), E, E, N, N, (E, N), E),
        "ssm_backward": (*scan_arrays(E, E, N, N, (E, N), E, (E, N), E, E, E, N, N, (E, N),
                                      (E, N), (E, N), E), True, True),
        "matvec": (np.empty(40, np.float32), Wt, x, case["bias"]),
        "matvec_t_acc": (case["dx"].copy(), Wt, dy),
        "matvec_t_rows": (case["dX_t"].copy(), Wt, case["dY_t"]),
        "outer_acc_rows": (case["dWt"].copy(), case["X"], case["dY"], False,
                           np.zeros_like(case["X"]), np.zeros(TOKENS, np.int64)),
    }[dispatcher.__name__]  # fmt: skip
    fresh(*args)
    return [fresh.inspect_asm(sig) for sig in fresh.signatures]


@pytest.mark.parametrize("kernel", [linalg.matvec, linalg.matvec_t_acc, linalg.matvec_t_rows,
                                    linalg.outer_acc_rows, ssm_forward, ssm_backward],
                         ids=lambda f: f.__name__)  # fmt: skip
def test_no_fma_in_compiled_kernels(kernel):
    for asm in compiled_asm(kernel):
        assert FMA_RE.findall(asm) == []


def test_fma_pattern_detects_contraction():
    """The pattern above does find FMA where the host has it and contraction is allowed."""
    import llvmlite.binding as llvm

    if not llvm.get_host_cpu_features().get("fma", False):
        pytest.skip("host CPU has no FMA")

    @njit(fastmath={"contract"})
    def fused(a, b, c):
        return a * b + c

    fused(1.0, 2.0, 3.0)
    assert FMA_RE.findall(fused.inspect_asm(fused.signatures[0]))


if __name__ == "__main__":
    emit(sys.argv[1])
