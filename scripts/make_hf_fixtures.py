"""Build the tiny Hugging Face / mamba_ssm model fixtures in tests/fixtures/hf/.

Each fixture is a random byte-level (vocab 256) Mamba-1 model made with ``transformers``,
perturbed away from its default init (so that norms, D, biases and A_log are not the values a
fresh model of ours would have by chance, and a transposed or swapped tensor shows), saved
the way its kind of checkpoint is saved (mamba-ssm-bin: torch.save, as mamba_ssm does), with
``reference.npz`` beside it:

    input     uint8 (T,)      the fixed byte string TEXT
    logits    float32 (T, V)  MambaForCausalLM logits for inputs [0, TEXT[:-1]]: row t is the
                              prediction of TEXT[t], the first after the priming byte 0 (the
                              per-byte loop of mambazip), V = the model's vocab
    logprobs  float32 (T,)    log p(TEXT[t]) by log_softmax over the first 256 logits (for a
                              padded vocabulary: what the model cut to 256 predicts)

All computed in float32 on the CPU with the sequential (non-parallel) scan. torch and
transformers are needed only here, never by mambazip or its tests:

    pip install torch transformers && python scripts/make_hf_fixtures.py
"""

import json
import shutil
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import MambaConfig, MambaForCausalLM

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "hf"
TEXT = b"mambazip \x00\xff fixture: a quick fox\n"

# name: (MambaConfig fields, how it is saved)
VARIANTS = {
    "untied": (dict(hidden_size=8, num_hidden_layers=2, state_size=4,
                    tie_word_embeddings=False), "transformers"),
    "tied-bias-eps": (dict(hidden_size=16, num_hidden_layers=1, state_size=8, conv_kernel=3,
                           time_step_rank=3, use_bias=True, layer_norm_epsilon=1e-3),
                      "transformers"),
    "no-conv-bias": (dict(hidden_size=8, num_hidden_layers=2, state_size=4, expand=3,
                          use_conv_bias=False), "transformers"),
    "fp16": (dict(hidden_size=8, num_hidden_layers=1, state_size=4), "float16"),
    "bf16": (dict(hidden_size=8, num_hidden_layers=1, state_size=4,
                  tie_word_embeddings=False), "bfloat16"),
    "sharded": (dict(hidden_size=8, num_hidden_layers=2, state_size=4,
                     tie_word_embeddings=False), "sharded"),
    "padded-vocab": (dict(vocab_size=264, hidden_size=8, num_hidden_layers=1, state_size=4,
                          tie_word_embeddings=False), "transformers"),
    "mamba-ssm": (dict(hidden_size=8, num_hidden_layers=2, state_size=4), "mamba_ssm"),
    "mamba-ssm-bin": (dict(hidden_size=8, num_hidden_layers=1, state_size=4, use_bias=True),
                      "mamba_ssm_bin"),
}  # fmt: skip


def build(seed, fields):
    torch.manual_seed(seed)
    config = MambaConfig(**{"vocab_size": 256, "use_associative_scan": False, **fields})
    model = MambaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            # Multiplicative on A_log keeps A negative, as a trained model's is.
            if name.endswith("A_log"):
                p.mul_(1 + 0.2 * torch.randn_like(p))
            else:
                p.add_(0.1 * torch.randn_like(p))
    return model


def reference(model):
    ids = torch.tensor([[0, *TEXT[:-1]]])
    with torch.no_grad():
        logits = model(ids).logits[0].float()
    logprobs = torch.log_softmax(logits[:, :256], dim=-1)
    target = torch.tensor(list(TEXT))
    return {
        "input": np.frombuffer(TEXT, dtype=np.uint8),
        "logits": logits.numpy().astype(np.float32),
        "logprobs": logprobs[torch.arange(len(TEXT)), target].numpy().astype(np.float32),
    }


def save(model, kind, folder):
    if kind in ("float16", "bfloat16"):
        # The reference is the float32 model with the rounded weights, as a loader sees them.
        model = model.to(getattr(torch, kind))
        model.save_pretrained(folder)
        return model.float()
    if kind == "sharded":
        model.save_pretrained(folder, max_shard_size="8KB")
        return model
    if kind.startswith("mamba_ssm"):
        # mamba_ssm names the embedding "embedding" and keeps the tied head in its state dict
        # (torch.save stores the shared tensor once; safetensors wants a copy).
        state = {k.replace("embeddings", "embedding"): v.contiguous().clone()
                 for k, v in model.state_dict().items()}  # fmt: skip
        state["lm_head.weight"] = state["backbone.embedding.weight"]
        if kind == "mamba_ssm_bin":
            torch.save(state, folder / "pytorch_model.bin")
        else:
            state["lm_head.weight"] = state["lm_head.weight"].clone()
            save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
        c = model.config
        ssm_cfg = {"d_state": c.state_size, "d_conv": c.conv_kernel, "expand": c.expand,
                   "bias": c.use_bias}  # fmt: skip
        config = {"d_model": c.hidden_size, "n_layer": c.num_hidden_layers, "vocab_size": 256,
                  "ssm_cfg": ssm_cfg, "rms_norm": True, "residual_in_fp32": True,
                  "fused_add_norm": True, "pad_vocab_size_multiple": 8,
                  "tie_embeddings": True}  # fmt: skip
        (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        return model
    model.save_pretrained(folder)
    return model


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    for seed, (name, (fields, kind)) in enumerate(VARIANTS.items()):
        folder = OUT / name
        folder.mkdir(parents=True)
        model = save(build(seed, fields), kind, folder)
        for extra in folder.glob("generation_config.json"):
            extra.unlink()
        np.savez(folder / "reference.npz", **reference(model))
        size = sum(p.stat().st_size for p in folder.iterdir())
        print(f"{name}: {sorted(p.name for p in folder.iterdir())}, {size} bytes")


if __name__ == "__main__":
    main()
