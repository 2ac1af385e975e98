"""Building blocks of the recipe tests (test_rerun, test_overlap): the perturbed model their
learners and reference trainers start from, the bytes they learn, a model moved to other
weights in the same state, and an SGD step taken on the Hugging Face tensors the gradient
names."""

import numpy as np

from mambazip.config import Settings, TrainConfig
from mambazip.model import Model, OnlineLearner
from mambazip.params import Params

try:  # tests/ as a package or as a plain directory on sys.path
    from . import finite_differences as fdm
except ImportError:
    import finite_differences as fdm

f32 = np.float32
SEED = 20241129
NAME = "k4-allbias-untied"


def perturbed_params():
    """(cfg, Params) of the perturbed all-bias untied test model."""
    cfg, tensors = fdm.perturbed_setup(NAME, SEED)
    return cfg, Params.from_hf(cfg, {k: v.copy() for k, v in tensors.items()})


def moved_to(cfg, flat, model):
    """A Model of weights ``flat`` in the state of ``model``."""
    out = Model(cfg, Params(cfg, flat.copy()))
    out.conv_state[...], out.ssm_state[...] = model.conv_state, model.ssm_state
    out.counters[...] = model.counters
    return out


def sgd_stepped(cfg, flat, grads, lr):
    """The flat weights ``flat`` after one SGD step of rate ``lr`` on ``grads`` (by name)."""
    hf = Params(cfg, flat.copy()).to_hf()
    return Params.from_hf(cfg, {k: hf[k] - f32(lr) * g for k, g in grads.items()}).flat


BYTES = b"\x00mamba\xffzips bytes!!! and more of them, segment after segment"


def new_learner(replay_chunk=None, thread=None, **train):
    """An OnlineLearner of the recipe ``train`` from the perturbed model."""
    cfg, params = perturbed_params()
    return OnlineLearner(Settings(model=cfg, train=TrainConfig(**train)), params=params,
                         replay_chunk=replay_chunk, thread=thread)  # fmt: skip


def first_bytes(n):
    """The first ``n`` bytes of BYTES as the uint8 array a learner advances over."""
    return np.frombuffer(BYTES[:n], dtype=np.uint8)
