"""Where the time of one byte goes: the parts of the truncated-BPTT loop, timed apart.

For a preset (with optional model overrides) the script trains a learner on the first bytes
of a file, then times each part in a compiled loop, so that Numba's dispatch is not counted,
and reports µs per byte:

* ``loop``: the whole online loop (``run_segments``) over the next bytes, as compression runs
  it (coding excluded); under train.overlap this thread's time leaves out the updates, which
  run on the other thread;
* ``forward``: one forward with the head (``forward_byte``);
* ``backward``: the backward of the 16 tokens of a segment (``backward_tokens``), and of that
  the weight-gradient terms (``flush_weight_grads``, not counted again in the sum);
* ``re-forward``: the state-only rerun of a segment after its update (``model_rerun``; with
  ``--no-rerun`` the loop skips it, so it is left out of the sum);
* ``optimizer``: one update, divided by the segment length (ten updates of a zero gradient:
  more would let the moments decay into subnormal numbers, whose arithmetic is slow); out of
  place under train.overlap, as it runs there, else in place.

The parts are timed on a warm cache and the same data again and again, so their sum can be
below ``loop``. Times are this thread's CPU time (``time.thread_time``), not wall time: on a
shared machine a process may get half a core, which doubled wall-clock figures (measured,
2026-12-03: 243 µs/byte wall, 98 CPU). Speeds still vary by 10-20 % between runs: compare
numbers from one run only.

    .venv/bin/python scripts/profile_step.py --preset default
    .venv/bin/python scripts/profile_step.py --preset default --d-model 64 --n-layer 2
    .venv/bin/python scripts/profile_step.py --preset default --no-rerun
"""

import argparse
import time
from pathlib import Path

import numpy as np

from mambazip.config import resolve_settings
from mambazip.jit import kernel
from mambazip.kernels.backward import flush_weight_grads
from mambazip.kernels.forward import model_rerun
from mambazip.kernels.layout import DIM_R, DIM_TIED, weight_views
from mambazip.kernels.segment import segment_forward
from mambazip.kernels.step import (
    C_BYTES,
    C_SEG,
    H_EPS,
    backward_tokens,
    forward_byte,
    optimizer_step,
)
from mambazip.kernels.views import copy_into
from mambazip.model import OnlineLearner

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "corpus"


@kernel
def _forwards(theta, A, offs, dims, hyper, conv_state, ssm_state, counters, work, data, reps):
    for i in range(reps):
        forward_byte(theta, A, offs, dims, hyper, conv_state, ssm_state, counters, work,
                     data[i % data.shape[0]])  # fmt: skip


@kernel
def _fill(theta, A, offs, dims, hyper, conv_state, ssm_state, counters, seg, data):
    counters[C_SEG] = 0
    for t in range(seg.inputs.shape[0]):
        segment_forward(theta, A, offs, dims, hyper, conv_state, ssm_state, counters, seg,
                        data[t])  # fmt: skip
        seg.targets[t] = data[t + 1]


@kernel
def _backwards(theta, A, grad, offs, need, dims, seg, reps):
    n = seg.inputs.shape[0]
    scale = np.float32(1.0 / n)
    for _ in range(reps):
        seg.dssm[...] = 0.0
        seg.dpend[...] = 0.0
        backward_tokens(theta, A, grad, offs, need, dims, seg.work, seg.inputs, seg.targets,
                        scale, True, seg.dssm, seg.dpend, seg.dfr)  # fmt: skip


@kernel
def _flushes(grad, offs, dims, seg, need, reps):
    for _ in range(reps):
        flush_weight_grads(weight_views(grad, offs, dims), seg.dfr, seg.inputs.shape[0],
                           seg.inputs, need, dims[DIM_TIED] != 0)  # fmt: skip


@kernel
def _reforwards(theta, A, offs, dims, hyper, conv_state, ssm_state, seg, scratch, reps):
    W = weight_views(theta, offs, dims)
    for _ in range(reps):
        copy_into(conv_state, seg.ck_conv[0])
        copy_into(ssm_state, seg.ck_ssm[0])
        model_rerun(W, A, conv_state, ssm_state, seg.ck_pos[0], seg.inputs, scratch, dims[DIM_R],
                    np.float32(hyper[H_EPS]))  # fmt: skip


@kernel
def _updates(src, theta, A, grad, adam_m, adam_v, offs, need, ranges, lrs, dims, hyper,
             counters, reps):  # fmt: skip
    for _ in range(reps):
        optimizer_step(src, theta, A, grad, adam_m, adam_v, offs, need, ranges, lrs, dims, hyper,
                       counters, counters[C_BYTES] + 1)  # fmt: skip


def _timed(fn, *args, reps):
    fn(*args, 1)  # compile and warm up
    start = time.thread_time()
    fn(*args, reps)
    return time.thread_time() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="default")
    p.add_argument("--d-model", type=int)
    p.add_argument("--n-layer", type=int)
    p.add_argument("--d-state", type=int)
    p.add_argument("--file", type=Path, default=CORPUS / "enwik8" / "enwik6")
    p.add_argument("--train", type=int, default=20000, help="bytes learned before timing")
    p.add_argument("--loop", type=int, default=20000, help="bytes of the timed loop")
    p.add_argument("--no-rerun", action="store_true", help="the recipe's rerun false")
    args = p.parse_args()
    model = {"d_model": args.d_model, "n_layer": args.n_layer, "d_state": args.d_state}
    train = {"rerun": False} if args.no_rerun else None
    settings = resolve_settings(args.preset, model=model, train=train)
    if settings.train.bptt < 2:
        p.error("this profile is of the truncated-BPTT loop: the settings have bptt 1")
    data = np.frombuffer(args.file.read_bytes()[: args.train + args.loop + 1], dtype=np.uint8)
    learner = OnlineLearner(settings)
    learner.advance(data[: args.train])
    start = time.thread_time()
    learner.advance(data[args.train : args.train + args.loop])
    loop = (time.thread_time() - start) / args.loop

    m, seg = learner.model, learner.seg
    bptt = seg.inputs.shape[0]
    if seg.work.shape[0] != bptt:
        p.error("the segment is replayed in chunks; profile with the whole segment in memory")
    theta, offs, dims, hyper = m.params.flat.copy(), m.params.offsets, m.dims, m.hyper
    A = m.A.copy()
    state = (m.conv_state.copy(), m.ssm_state.copy(), m.counters.copy())
    grad = np.zeros_like(theta)
    _fill(theta, A, offs, dims, hyper, *state, seg, data)
    per_segment = 200 * bptt
    adam_m, adam_v = learner.adam_m.copy(), learner.adam_v.copy()
    need, ranges = learner.need, learner.ranges
    scratch = np.zeros(seg.work.size, dtype=np.float32)
    # An overlapped update steps from one weight buffer into the other; else in place. The
    # compiled loop differs: in place, the compiler cannot rule out that the two overlap
    # and runs it one element at a time (about 10x slower, measured 2026-12-07).
    src = theta.copy() if settings.train.overlap else theta
    update_args = (src, theta, A, grad, adam_m, adam_v, offs, need, ranges, learner.lrs, dims,
                   hyper, state[2])  # fmt: skip
    parts = {
        "forward": _timed(_forwards, theta, A, offs, dims, hyper, *state, m.work, data, reps=4000)
        / 4000,
        "backward": _timed(_backwards, theta, A, grad, offs, learner.need, dims, seg, reps=200)
        / per_segment,
        "re-forward": _timed(
            _reforwards, theta, A, offs, dims, hyper, *state[:2], seg, scratch, reps=200
        )
        / per_segment,
        # Few updates: with a zero gradient the moments decay, and subnormal moments are slow.
        "optimizer": _timed(_updates, *update_args, reps=10) / (10 * bptt),
    }
    cfg = settings.model
    print(
        f"d_model {cfg.d_model} x {cfg.n_layer} layers, d_inner {cfg.d_inner}, "
        f"d_state {cfg.d_state}, bptt {bptt}, rerun {settings.train.rerun}, overlap "
        f"{settings.train.overlap}; after "
        f"{args.train} bytes of {args.file.name}"
    )
    if not settings.train.rerun:
        print(f"{'(re-forward, not run)':24s} {parts.pop('re-forward') * 1e6:7.1f} µs/byte")
    print(f"{'loop (run_segments)':24s} {loop * 1e6:7.1f} µs/byte  ({1e-3 / loop:.2f} KB/s)")
    flush = _timed(_flushes, grad, offs, dims, seg, learner.need, reps=200) / per_segment
    for name, seconds in parts.items():
        print(f"{name:24s} {seconds * 1e6:7.1f} µs/byte")
        if name == "backward":
            print(f"{'  of which weight terms':24s} {flush * 1e6:7.1f} µs/byte")
    print(f"{'sum of the parts':24s} {sum(parts.values()) * 1e6:7.1f} µs/byte")


if __name__ == "__main__":
    main()
