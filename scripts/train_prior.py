"""Train a preset's Mamba on the prior corpus in batch with PyTorch (CPU), then export it.

``mambazip train`` learns online, one byte at a time, as compress does: 3.4 KB/s on this
machine, an hour per 13 MB. This trains the same model (the Hugging Face ``MambaForCausalLM``
layout that mambazip loads) on whole batches of sequences, so one epoch of the 36 MB corpus
takes about an hour of one core. PyTorch is needed here only; the package never imports it.

    pip install torch  # once, into the venv of the checkout
    nice -n 10 python scripts/train_prior.py train --corpus /work/prior-corpus \
        --out /work/prior-run --preset default --epochs 1 --minutes 60
    python scripts/train_prior.py export --out /work/prior-run --to trained.safetensors
    python scripts/make_prior.py trained.safetensors --preset default --dtype F16 ...

Dimensions (mamba-minimal's letters): b batch, T sequence, D d_model, E d_inner, N d_state,
R dt_rank, K d_conv, V = 256, L layers.

Data: the corpus's training documents (manifest.json), each preceded by the byte 0 (compress
primes the Mamba with 0 before a file's first byte), in an order shuffled by ``--seed`` and
the epoch, concatenated and cut into sequences of ``--seq-len`` that are then shuffled into
batches. The state starts at zero in every sequence, as it does at the start of a file.
The held-out text is scored as compress scores it: one stream, primed with 0, the state
carried through. The checkpoint (``OUT/state.pt``) is written every few minutes and at the
end; ``train`` resumes from it, to the same batches. ``--skip STEPS`` starts at that batch
of the seed's order, so that a run from ``--init`` goes on to the data the run that made the
prior did not reach (f13eff77 stopped at step 1797 of seed 0).

The selective scan runs in Numba (``scan_forward``/``scan_backward``, one pass over time per
channel), not as a Python loop over time: autograd over T small steps was the slow part.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mambazip import priors  # noqa: E402
from mambazip.config import resolve_settings  # noqa: E402
from mambazip.kernels.detmath import exp32  # noqa: E402
from mambazip.params import Params, init_params  # noqa: E402

f32 = np.float32
LN2 = math.log(2.0)


# ---------------------------------------------------------------- selective scan (Numba)
# Channels are the inner loop (state laid out (N, E)), so every line is a vector operation
# over E. fastmath: this is training, not the coding path (DESIGN's determinism rules hold
# for the compressor; a prior is a file of weights, checked against mambazip's forward); it
# lets the sums over channels (gB, gC) vectorise. Without it the scan was 80 % of a step.
@njit(cache=True, error_model="numpy", fastmath=True)
def scan_forward(y, hs, h_last, u, dt, Bm, Cm, A, D_skip, h0):
    """Mamba-1's selective scan over a batch.

    h_t (N, E) = exp(dt_t A) * h_{t-1} + (dt_t u_t) B_t;  y_t (E,) = C_t . h_t + D_skip u_t.
    y (b, T, E) out; hs (b, T, N, E) out: every h_t, for the backward (give an array with
    hs.shape[1] != T to save nothing); h_last (b, N, E) out: the state after the last step;
    u, dt (b, T, E); Bm, Cm (b, T, N); A (N, E) = -exp(A_log).T; D_skip (E,);
    h0 (b, N, E): the state before the first step.
    """
    nb, T, E = u.shape
    N = A.shape[0]
    save = hs.shape[1] == T
    h = np.empty((N, E), dtype=np.float32)
    du = np.empty(E, dtype=np.float32)
    for b in range(nb):
        h[:, :] = h0[b]
        for t in range(T):
            for e in range(E):
                du[e] = dt[b, t, e] * u[b, t, e]
                y[b, t, e] = D_skip[e] * u[b, t, e]
            for n in range(N):
                bn = Bm[b, t, n]
                cn = Cm[b, t, n]
                for e in range(E):
                    h[n, e] = exp32(dt[b, t, e] * A[n, e]) * h[n, e] + du[e] * bn
                    y[b, t, e] += h[n, e] * cn
            if save:
                hs[b, t] = h
        h_last[b] = h


@njit(cache=True, error_model="numpy", fastmath=True)
def scan_backward(gu, gdt, gB, gC, gA, gD, gy, hs, u, dt, Bm, Cm, A, D_skip):
    """Gradients of ``scan_forward`` from h0 = 0 given gy (b, T, E); outputs are overwritten.

    Forward was h_t = a_t h_{t-1} + dt_t u_t B_t with a_t = exp(dt_t A), y_t = C_t.h_t + D u_t,
    so with gh_t = gy_t C_t + a_{t+1} gh_{t+1} (the carry):
      gC_t = sum_e gy_t h_t, gB_t = sum_e gh_t dt_t u_t, gD = sum_t gy_t u_t,
      gdt_t = sum_n gh_t h_{t-1} a_t A + gh_t u_t B_t, gA = sum_t gh_t h_{t-1} a_t dt_t,
      gu_t = sum_n gh_t dt_t B_t + gy_t D.
    gu, gdt (b, T, E); gB, gC (b, T, N); gA (N, E); gD (E,).
    """
    nb, T, E = u.shape
    N = A.shape[0]
    gA[...] = 0.0
    gD[...] = 0.0
    carry = np.empty((N, E), dtype=np.float32)
    for b in range(nb):
        carry[:, :] = 0.0
        for t in range(T - 1, -1, -1):
            for e in range(E):
                gdt[b, t, e] = 0.0
                gu[b, t, e] = gy[b, t, e] * D_skip[e]
                gD[e] += gy[b, t, e] * u[b, t, e]
            for n in range(N):
                bn = Bm[b, t, n]
                cn = Cm[b, t, n]
                sB = np.float32(0.0)
                sC = np.float32(0.0)
                for e in range(E):
                    d = dt[b, t, e]
                    g = gy[b, t, e]
                    a = exp32(d * A[n, e])
                    hp = hs[b, t - 1, n, e] if t > 0 else np.float32(0.0)
                    gh = g * cn + carry[n, e]
                    sC += g * hs[b, t, n, e]
                    sB += gh * d * u[b, t, e]
                    gda = gh * hp * a
                    gdt[b, t, e] += gda * A[n, e] + gh * u[b, t, e] * bn
                    gA[n, e] += gda * d
                    gu[b, t, e] += gh * d * bn
                    carry[n, e] = gh * a
                gB[b, t, n] = sB
                gC[b, t, n] = sC


def _torch():
    import torch  # only this script needs torch

    return torch


def build_model_classes():
    torch = _torch()
    nn = torch.nn
    F = torch.nn.functional

    class Scan(torch.autograd.Function):
        """y (b, T, E) of the selective scan from a zero state; A is passed as A_log (E, N)."""

        @staticmethod
        def forward(ctx, u, dt, Bm, Cm, A_log, D_skip, hs):
            """hs: the caller's (b, T, N, E) buffer for the saved states, reused from step
            to step (allocating 134 MB anew made the forward scan 6x slower: page faults)."""
            A = -torch.exp(A_log).T  # (N, E)
            nb, T, E = u.shape
            N = A.shape[0]
            arrays = [x.detach().contiguous().numpy() for x in (u, dt, Bm, Cm, A, D_skip)]
            y = np.empty((nb, T, E), dtype=f32)
            h0 = np.zeros((nb, N, E), dtype=f32)
            h_last = np.empty((nb, N, E), dtype=f32)
            scan_forward(y, hs, h_last, *arrays, h0)
            ctx.saved = (hs, *arrays)
            return torch.from_numpy(y)

        @staticmethod
        def backward(ctx, gy):
            hs, u, dt, Bm, Cm, A, D_skip = ctx.saved
            gy = gy.contiguous().numpy()
            gu, gdt = np.empty_like(u), np.empty_like(dt)
            gB, gC = np.empty_like(Bm), np.empty_like(Cm)
            gA, gD = np.empty_like(A), np.empty_like(D_skip)
            scan_backward(gu, gdt, gB, gC, gA, gD, gy, hs, u, dt, Bm, Cm, A, D_skip)
            ctx.saved = None
            # A = -exp(A_log): dA/dA_log = A.
            gA_log = (gA * A).T
            return (*(torch.from_numpy(x) for x in (gu, gdt, gB, gC, gA_log, gD)), None)

    def scan_with_state(u, dt, Bm, Cm, A_log, D_skip, h0):
        """Forward only, from state h0 (b, N, E): (y, h_last), for scoring a long stream."""
        A = -torch.exp(A_log).T
        arrays = [x.detach().contiguous().numpy() for x in (u, dt, Bm, Cm, A, D_skip)]
        nb, T, E = u.shape
        y = np.empty((nb, T, E), dtype=f32)
        h_last = np.empty_like(h0)
        scan_forward(y, np.empty((1, 0, 1, 1), dtype=f32), h_last, *arrays, h0)
        return torch.from_numpy(y), h_last

    class RMSNorm(nn.Module):
        def __init__(self, D, eps):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(D))
            self.eps = eps

        def forward(self, x):
            rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
            return x * rstd * self.weight

    class Mixer(nn.Module):
        """HF MambaMixer's parameters and slow path (in_proj, conv1d, x_proj, dt_proj, A_log,
        D, out_proj), the scan in Numba."""

        def __init__(self, cfg):
            super().__init__()
            D, E, N, R, K = cfg.d_model, cfg.d_inner, cfg.d_state, cfg.dt_rank, cfg.d_conv
            self.E, self.N, self.R, self.K = E, N, R, K
            self.in_proj = nn.Linear(D, 2 * E, bias=cfg.proj_bias)
            self.conv1d = nn.Conv1d(E, E, K, groups=E, padding=K - 1, bias=cfg.conv_bias)
            self.x_proj = nn.Linear(E, R + 2 * N, bias=cfg.x_proj_bias)
            self.dt_proj = nn.Linear(R, E, bias=True)
            self.A_log = nn.Parameter(torch.zeros(E, N))
            self.D = nn.Parameter(torch.ones(E))
            self.out_proj = nn.Linear(E, D, bias=cfg.proj_bias)
            self.hs = np.empty((0, 0, N, E), dtype=f32)

        def forward(self, h, state=None):
            """h (b, T, D) -> (b, T, D). ``state``: None (zero state, trainable) or a dict
            with the conv inputs' tail "conv" (b, K-1, E) and "ssm" (b, N, E), updated."""
            T = h.shape[1]
            x, z = self.in_proj(h).chunk(2, dim=-1)  # (b, T, E) each
            if state is None:
                xc = self.conv1d(x.transpose(1, 2))[..., :T]
            else:
                padded = torch.cat([state["conv"], x], dim=1).transpose(1, 2)
                xc = F.conv1d(padded, self.conv1d.weight, self.conv1d.bias, groups=self.E)
                state["conv"] = torch.cat([state["conv"], x], dim=1)[:, -(self.K - 1) :]
            u = F.silu(xc.transpose(1, 2))  # (b, T, E)
            dtr, Bm, Cm = self.x_proj(u).split([self.R, self.N, self.N], dim=-1)
            dt = F.softplus(self.dt_proj(dtr))  # (b, T, E)
            if state is None:
                if self.hs.shape[:2] != u.shape[:2]:
                    self.hs = np.empty((*u.shape[:2], self.N, self.E), dtype=f32)
                y = Scan.apply(u, dt, Bm, Cm, self.A_log, self.D, self.hs)
            else:
                y, state["ssm"] = scan_with_state(u, dt, Bm, Cm, self.A_log, self.D, state["ssm"])
            return self.out_proj(y * F.silu(z))

    class Block(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
            self.mixer = Mixer(cfg)

        def forward(self, x, state=None):
            return x + self.mixer(self.norm(x), state)

    class Backbone(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.embeddings = nn.Embedding(cfg.vocab, cfg.d_model)
            self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
            self.norm_f = RMSNorm(cfg.d_model, cfg.norm_eps)

    class MambaLM(nn.Module):
        """MambaForCausalLM's names, so ``state_dict`` is mambazip's HF layout."""

        def __init__(self, cfg):
            super().__init__()
            if cfg.tie_embeddings or cfg.head_bias:
                raise SystemExit("this trainer has an untied head without bias")
            self.cfg = cfg
            self.backbone = Backbone(cfg)
            self.lm_head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)

        def forward(self, tokens, states=None):
            """tokens (b, T) int64 -> logits (b, T, V); ``states``: one dict per layer."""
            x = self.backbone.embeddings(tokens)
            for i, layer in enumerate(self.backbone.layers):
                x = layer(x, None if states is None else states[i])
            return self.lm_head(self.backbone.norm_f(x))

        def new_states(self, nb):
            c = self.cfg
            return [
                {
                    "conv": torch.zeros(nb, c.d_conv - 1, c.d_inner),
                    "ssm": np.zeros((nb, c.d_state, c.d_inner), dtype=f32),
                }
                for _ in range(c.n_layer)
            ]

        def load_hf(self, tensors):
            own = self.state_dict()
            missing = set(own) - set(tensors)
            if missing:
                raise SystemExit(f"tensors missing: {sorted(missing)}")
            self.load_state_dict({k: torch.from_numpy(np.asarray(tensors[k], f32)) for k in own})

        def hf_tensors(self):
            return {k: v.detach().numpy().astype(f32) for k, v in self.state_dict().items()}

    return MambaLM


# ---------------------------------------------------------------- data
def load_corpus(corpus):
    """(training documents as a list of bytes, held-out text) from the built corpus."""
    manifest = json.loads((corpus / "manifest.json").read_text())
    blobs = {f["name"]: (corpus / f["name"]).read_bytes() for f in manifest["files"]}
    docs = [
        blobs[d["file"]][d["offset"] : d["offset"] + d["bytes"]]
        for d in manifest["document_list"]
        if not d["heldout"]
    ]
    return docs, (corpus / "heldout.txt").read_bytes()


def epoch_sequences(docs, seed, epoch, seq_len):
    """(S, seq_len + 1) uint8: the documents, each after a 0, in a seeded order, cut into
    sequences (each row's last byte is the next row's first) and shuffled."""
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(docs))
    stream = np.frombuffer(b"".join(b"\0" + docs[i] for i in order), dtype=np.uint8)
    S = (len(stream) - 1) // seq_len
    idx = np.arange(S)[:, None] * seq_len + np.arange(seq_len + 1)[None, :]
    return stream[idx][rng.permutation(S)]


def heldout_bits(model, heldout, chunk=8192):
    """Bits/byte of the model on ``heldout`` coded as one stream primed with 0."""
    torch = _torch()
    data = np.frombuffer(b"\0" + heldout, dtype=np.uint8).astype(np.int64)
    states = model.new_states(1)
    total = 0.0
    with torch.no_grad():
        for at in range(0, len(data) - 1, chunk):
            x = torch.from_numpy(data[at : at + chunk][None, : len(data) - 1 - at])
            target = torch.from_numpy(data[at + 1 : at + 1 + x.shape[1]][None])
            logits = model(x, states)
            total += torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="sum"
            ).item()
    return total / LN2 / len(heldout)


# ---------------------------------------------------------------- train
class Schedule:
    """Warm-up, a constant rate, then a linear decay to ``floor`` that fits the time left.

    The machine is shared, so how many steps an hour holds is not known in advance: the decay
    starts when ``decay`` of the ``--minutes`` budget is left, over as many steps as the rate
    measured so far fits into it (or at the step ``--steps`` gives, if that comes first)."""

    def __init__(self, args, state=None):
        self.peak, self.warmup, self.floor = args.lr, args.warmup, args.lr * args.lr_floor
        self.decay_start, self.decay_steps = (state or {}).get("decay", (None, None))

    def lr(self, step):
        if self.decay_start is not None:
            done = min(1.0, (step - self.decay_start) / self.decay_steps)
            return self.peak + (self.floor - self.peak) * done
        return self.peak * min(1.0, (step + 1) / self.warmup)

    def maybe_decay(self, step, steps_left, seconds_left, seconds_per_step, fraction):
        """Start the decay when at most ``fraction`` of the budget is left."""
        if self.decay_start is None:
            fits = int(seconds_left / seconds_per_step)
            if fits <= fraction * (step + fits) or steps_left <= fraction * (step + steps_left):
                self.decay_start, self.decay_steps = step, max(1, min(fits, steps_left))

    def done(self, step):
        return self.decay_start is not None and step >= self.decay_start + self.decay_steps


def train(args):
    torch = _torch()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    settings = resolve_settings(args.preset)
    cfg = settings.model
    model = build_model_classes()(cfg)
    docs, heldout = load_corpus(args.corpus)
    per_epoch = (sum(len(d) + 1 for d in docs) - 1) // args.seq_len // args.batch
    max_steps = int(per_epoch * args.epochs) - args.skip
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() >= 2 and "A_log" not in name else no_decay).append(p)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.wd}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
    )  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    ckpt = args.out / "state.pt"
    log = args.out / "log.jsonl"
    state = None
    if ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, seconds = state["step"], state["seconds"]
        print(f"resumed at step {step}", flush=True)
    elif args.init:
        model.load_hf(priors.load(args.init).params.to_hf())
        step, seconds = 0, 0.0
    else:
        # The seeded init of mambazip itself (Mamba's init, deterministic from the seed).
        model.load_hf(init_params(cfg, settings.seed).to_hf())
        step, seconds = 0, 0.0
    schedule = Schedule(args, state)

    def save():
        state = {
            "model": model.state_dict(), "opt": opt.state_dict(), "step": step,
            "seconds": seconds, "decay": (schedule.decay_start, schedule.decay_steps),
            "args": {k: str(v) for k, v in vars(args).items()},
        }  # fmt: skip
        torch.save(state, args.out / "state.tmp")
        os.replace(args.out / "state.tmp", ckpt)

    def evaluate(lr):
        model.eval()
        bits = heldout_bits(model, heldout)
        model.train()
        row = {"step": step, "epoch": round((step + args.skip) / per_epoch, 4), "lr": lr,
               "bytes": step * args.batch * args.seq_len, "train_seconds": round(seconds),
               "heldout_bits_per_byte": round(bits, 4)}  # fmt: skip
        with log.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)

    started = time.monotonic()
    deadline = started + args.minutes * 60
    last_save = started
    epoch = None
    model.train()
    while step < max_steps and time.monotonic() < deadline and not schedule.done(step):
        at = step + args.skip  # the batch's place in the data: epoch at // per_epoch
        if at // per_epoch != epoch:
            epoch = at // per_epoch
            batches = epoch_sequences(docs, args.seed, epoch, args.seq_len)
        i = at % per_epoch
        rows = torch.from_numpy(batches[i * args.batch : (i + 1) * args.batch].astype(np.int64))
        t0 = time.monotonic()
        lr = schedule.lr(step)
        for group in opt.param_groups:
            group["lr"] = lr
        logits = model(rows[:, :-1])
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, cfg.vocab), rows[:, 1:].reshape(-1)
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        step += 1
        seconds += time.monotonic() - t0
        if step > args.warmup:
            # Wall time per step (evaluations and other sessions' load included).
            per_step = (time.monotonic() - started) / max(1, step - (state or {}).get("step", 0))
            schedule.maybe_decay(step, max_steps - step, deadline - time.monotonic(), per_step,
                                 args.decay)  # fmt: skip
        if step % 20 == 0:
            rate = step * args.batch * args.seq_len / seconds / 1e3
            print(f"step {step} epoch {(step + args.skip) / per_epoch:.3f} lr {lr:.2e} "
                  f"loss {loss.item() / LN2:.4f} bits  {rate:.1f} KB/s", flush=True)  # fmt: skip
        if (step + args.skip) % per_epoch == 0 or step % args.eval_every == 0:
            evaluate(lr)
        if time.monotonic() - last_save > 300:
            save()
            last_save = time.monotonic()
    if (step + args.skip) % per_epoch and step % args.eval_every:
        evaluate(schedule.lr(step - 1))
    save()
    print(f"stopped at step {step} (decay from {schedule.decay_start})", flush=True)


# ---------------------------------------------------------------- check and export
def trained_params(out, cfg):
    torch = _torch()
    MambaLM = build_model_classes()
    model = MambaLM(cfg)
    model.load_state_dict(torch.load(out / "state.pt", weights_only=False)["model"])
    return model, Params.from_hf(cfg, model.hf_tensors())


def check(model, params, cfg, text):
    """Largest |logit difference| between this torch model and mambazip's forward (the
    Numba runtime, one byte at a time) on ``text`` primed with 0, and the logits' scale."""
    torch = _torch()
    from mambazip.model import Model

    data = np.frombuffer(b"\0" + text, dtype=np.uint8)
    ours = Model(cfg, params)
    want = []
    for byte in data:
        ours.forward(int(byte))
        want.append(ours.logits.copy())
    with torch.no_grad():
        got = model(torch.from_numpy(data.astype(np.int64))[None])[0].numpy()
        stream = np.concatenate(
            [model(torch.from_numpy(data[i : i + 7].astype(np.int64))[None], states)[0].numpy()
             for states in [model.new_states(1)] for i in range(0, len(data), 7)]
        )  # fmt: skip
    want = np.array(want)
    return (
        float(np.abs(got - want).max()),
        float(np.abs(stream - want).max()),
        float(np.abs(want).max()),
    )


FIXTURES = REPO / "tests" / "fixtures"
FIXTURE_TEXT = b"def main(argv):\n    return 0  # ok\n"


def write_fixture(sha):
    """tests/fixtures/train_prior-SHA.npy: the logits (T, V) that this script's torch model
    gives for FIXTURE_TEXT primed with 0, from the shipped prior ``sha`` (F16 weights as
    mambazip reads them), so that a test without torch holds mambazip's forward to them."""
    torch = _torch()
    torch.set_num_threads(1)
    prior = priors.load(sha)
    model = build_model_classes()(prior.config)
    model.load_hf(prior.params.to_hf())
    data = np.frombuffer(b"\0" + FIXTURE_TEXT, dtype=np.uint8).astype(np.int64)
    with torch.no_grad():
        logits = model(torch.from_numpy(data)[None])[0].numpy()
    np.save(FIXTURES / f"train_prior-{sha}.npy", logits.astype(f32))


def steps(text):
    """A count of batches for argparse: a non-negative integer."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("--corpus", type=Path, required=True)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--preset", default="default")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--init", metavar="SHA", help="start from this shipped prior, not the init")
    t.add_argument("--epochs", type=float, default=1.0, help="at most this many")
    t.add_argument("--seq-len", type=int, default=512)
    t.add_argument("--batch", type=int, default=16)
    t.add_argument("--lr", type=float, default=3e-3)
    t.add_argument("--lr-floor", type=float, default=0.1, help="final lr / peak")
    t.add_argument("--warmup", type=int, default=100)
    t.add_argument("--wd", type=float, default=0.01)
    t.add_argument("--clip", type=float, default=1.0)
    t.add_argument("--eval-every", type=int, default=500)
    t.add_argument("--minutes", type=float, required=True, help="the time budget of this run")
    t.add_argument(
        "--skip", type=steps, default=0, metavar="STEPS",
        help="start at this batch of the seed's data order (where an --init run stopped); "
        "the schedule's steps still count from 0, the logged epoch is the place in the data",
    )  # fmt: skip
    t.add_argument("--decay", type=float, default=0.3, help="share of the budget to decay in")
    c = sub.add_parser("check", help="torch's logits against mambazip's on the same weights")
    c.add_argument("--out", type=Path, help="a run's folder (default: the seeded init)")
    c.add_argument("--preset", default="default")
    e = sub.add_parser("export", help="check, then write the run's model as a checkpoint")
    e.add_argument("--out", type=Path, required=True)
    e.add_argument("--preset", default="default")
    e.add_argument("--to", type=Path, required=True, help="the .safetensors to write")
    f = sub.add_parser("fixture", help="torch's logits of a shipped prior, for the tests")
    f.add_argument("sha")
    args = parser.parse_args()
    if args.command == "train":
        train(args)
        return
    if args.command == "fixture":
        write_fixture(args.sha)
        return
    _torch().set_num_threads(1)
    settings = resolve_settings(args.preset)
    cfg = settings.model
    if args.out:
        model, params = trained_params(args.out, cfg)
    else:
        params = init_params(cfg, settings.seed)
        model = build_model_classes()(cfg)
        model.load_hf(params.to_hf())
    text = (REPO / "README.md").read_bytes()[:300]
    whole, streamed, scale = check(model, params, cfg, text)
    print(f"max |torch - mambazip| logits: {whole:.3g} (one pass), {streamed:.3g} "
          f"(in pieces of 7, state carried); max |logit| {scale:.3g}")  # fmt: skip
    if max(whole, streamed) > 1e-4 * max(1.0, scale):
        raise SystemExit("the torch model and mambazip disagree")
    if args.command == "export":
        from mambazip import checkpoint

        state = _torch().load(args.out / "state.pt", weights_only=False)
        learned = state["step"] * int(state["args"]["batch"]) * int(state["args"]["seq_len"])
        trained = checkpoint.Checkpoint(cfg, params, learned=learned, settings=settings)
        checkpoint.write(args.to, trained, force=True)
        print(f"wrote {args.to} ({learned:,} bytes learned)")


if __name__ == "__main__":
    main()
