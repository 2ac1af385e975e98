"""Priors: a preset starts its Mamba from a pretrained model shipped in models/priors/,
named by SHA-256 in the preset; the header records it and decompression finds it.

Most tests use a models/ folder of their own (a tiny preset and a prior made for it), so
that they do not depend on the shipped prior's bytes; the last ones check the shipped
presets and the package."""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_MODEL

import mambazip
from mambazip import checkpoint, codec, config, container, plan, priors
from mambazip.config import resolve_settings

REPO = Path(__file__).resolve().parent.parent
TEXT = b"a prior knows what bytes are before the first one arrives. " * 30


@pytest.fixture
def models(tmp_path, monkeypatch):
    """A models/ folder with the preset "tiny" and its prior: (folder, prior SHA-256)."""
    folder = tmp_path / "models"
    (folder / "priors").mkdir(parents=True)
    preset = {"model": {**TINY_MODEL, "d_inner": 16, "dt_rank": 1},
              "train": {"optimizer": "adam", "lr": 0.003, "bptt": 4}, "seed": 3}  # fmt: skip
    (folder / "tiny.json").write_text(json.dumps(preset))
    monkeypatch.setattr(config, "models_dir", lambda: folder)
    monkeypatch.setattr(priors, "models_dir", lambda: folder)
    settings = resolve_settings("tiny", mix="none")
    stats = codec.compress_stream(io.BytesIO(TEXT * 3), io.BytesIO(), settings)
    trained = checkpoint.Checkpoint.from_learner(stats.learner)
    prior = checkpoint.Checkpoint(trained.config, trained.params, settings=settings)
    blob = prior.to_bytes(dtype="F16")
    sha = hashlib.sha256(blob).hexdigest()
    (folder / "priors" / f"{sha}.safetensors").write_bytes(blob)
    (folder / "tiny.json").write_text(json.dumps({**preset, "prior": sha}))
    return folder, sha


TINY_PRESET = ("--preset", "tiny", "--mix", "none")


def test_compress_starts_from_the_prior_and_decompress_needs_no_flag(run_cli, models):
    _, sha = models
    packed = run_cli("compress", *TINY_PRESET, input=TEXT)
    assert packed.exit_code == 0, packed.stderr
    header = container.read_header(io.BytesIO(packed.stdout))
    assert (header["model_sha256"], header["model_resume"]) == (sha, False)
    back = run_cli("decompress", input=packed.stdout)
    assert back.exit_code == 0, back.stderr
    assert back.stdout == TEXT


def test_the_prior_codes_better_than_the_seeded_init(run_cli, models):
    from_prior = run_cli("compress", *TINY_PRESET, input=TEXT).stdout
    from_init = run_cli("compress", *TINY_PRESET, "--prior", "none", input=TEXT).stdout
    assert len(from_prior) < len(from_init)


def test_prior_none_starts_from_the_seeded_init(run_cli, models):
    packed = run_cli("compress", *TINY_PRESET, "--prior", "none", "-n", input=TEXT).stdout
    assert container.read_header(io.BytesIO(packed))["model_sha256"] is None
    out = io.BytesIO()
    codec.compress_stream(io.BytesIO(TEXT), out, resolve_settings("tiny", mix="none"),
                          stored_blocks=True, frame_size=mambazip.frames.DEFAULT_FRAME)  # fmt: skip
    assert packed == out.getvalue()


def test_model_overrides_the_prior(run_cli, models, tmp_path):
    other = tmp_path / "other.safetensors"
    stats = codec.compress_stream(
        io.BytesIO(TEXT), io.BytesIO(), resolve_settings("tiny", mix="none")
    )
    checkpoint.save(other, stats.learner)
    packed = run_cli("compress", *TINY_PRESET, "--model", other, input=TEXT).stdout
    header = container.read_header(io.BytesIO(packed))
    assert header["model_sha256"] == checkpoint.load(other).digest() != models[1]


def test_another_shape_or_no_mamba_leaves_the_prior_out(run_cli, models):
    for flags in (("--d-state", "8"), ("--mix", "cm")):
        packed = run_cli("compress", "--preset", "tiny", *flags, input=TEXT)
        assert packed.exit_code == 0, packed.stderr
        assert container.read_header(io.BytesIO(packed.stdout))["model_sha256"] is None


def test_a_missing_prior_is_one_clear_line(run_cli, models):
    folder, sha = models
    blob = run_cli("compress", *TINY_PRESET, input=TEXT).stdout
    (folder / "priors" / f"{sha}.safetensors").unlink()
    line = run_cli("compress", *TINY_PRESET, input=TEXT).error_line(1)
    assert sha in line and "--prior none" in line
    line = run_cli("decompress", input=blob).error_line(1)
    assert sha in line and "install that release" in line and "--model" in line


def test_a_prior_name_is_64_lowercase_hex_digits():
    """A prior is named by its SHA-256 spelled as hashlib spells it; a preset name, another
    spelling or another type is not a prior's name."""
    digest = hashlib.sha256(b"any bytes").hexdigest()
    assert priors.is_sha(digest)
    for name in (digest.upper(), digest[:-1], digest + "0", "default", " " + digest, None, 7):
        assert not priors.is_sha(name)


def test_the_prior_is_found_through_a_folder_that_joins_one_name_at_a_time(models, monkeypatch):
    """An installed package's data folder can be a Traversable whose joinpath takes one name
    (a MultiplexedPath on Python 3.11): the prior is found through one all the same."""
    from importlib.resources.readers import MultiplexedPath

    folder, sha = models
    monkeypatch.setattr(priors, "models_dir", lambda: MultiplexedPath(str(folder)))
    assert priors.shipped(sha)
    assert priors.load(sha).digest() == sha


def test_an_empty_input_names_no_prior(run_cli, models):
    packed = run_cli("compress", *TINY_PRESET, input=b"")
    assert packed.exit_code == 0, packed.stderr
    assert container.read_header(io.BytesIO(packed.stdout))["model_sha256"] is None
    assert run_cli("decompress", input=packed.stdout).stdout == b""


def test_info_calls_a_shipped_prior_a_prior(run_cli, models):
    packed = run_cli("compress", *TINY_PRESET, input=TEXT).stdout
    line = next(
        line
        for line in run_cli("info", input=packed).stdout.decode().splitlines()
        if "starting model" in line
    )
    assert line.endswith("(a prior shipped with mambazip)"), line


def test_an_altered_prior_is_one_clear_line(run_cli, models):
    folder, sha = models
    path = folder / "priors" / f"{sha}.safetensors"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    line = run_cli("compress", *TINY_PRESET, input=TEXT).error_line(1)
    assert "altered or damaged" in line


def test_frames_each_start_from_the_prior(models):
    settings = resolve_settings("tiny", mix="none")
    prior = plan.prior_for("tiny", settings)
    out = io.BytesIO()
    stats = codec.compress_stream(io.BytesIO(TEXT), out, settings, model=prior, frame_size=600)
    assert stats.frames == 3
    assert mambazip.decompress(out.getvalue()) == TEXT
    alone = io.BytesIO()
    codec.compress_stream(io.BytesIO(TEXT[600:1200]), alone, settings, model=prior,
                          frame_size=600)  # fmt: skip
    _, whole = container.index_from_end(io.BytesIO(out.getvalue()))
    _, one = container.index_from_end(io.BytesIO(alone.getvalue()))
    second, only = whole.frames[1], one.frames[0]
    framed = out.getvalue()[second.packed_offset : second.packed_offset + second.packed_size]
    single = alone.getvalue()[only.packed_offset : only.packed_offset + only.packed_size]
    assert framed == single


def test_a_half_precision_checkpoint_loads_as_its_rounded_weights(tmp_path):
    settings = resolve_settings(model=TINY_MODEL, mix="none")
    stats = codec.compress_stream(io.BytesIO(TEXT), io.BytesIO(), settings)
    model = checkpoint.Checkpoint.from_learner(stats.learner)
    path = tmp_path / "half.safetensors"
    path.write_bytes(model.to_bytes(dtype="F16"))
    loaded = checkpoint.load(path)
    expected = model.params.flat.astype(np.float16).astype(np.float32)
    assert np.array_equal(loaded.params.flat, expected)
    assert loaded.moments is not None
    assert path.stat().st_size < 0.6 * len(model.to_bytes())


def test_every_shipped_preset_prior_is_in_models_and_matches_its_name():
    for preset in config.preset_names():
        sha = priors.preset_prior(preset)
        if sha is None:
            continue
        path = REPO / "models" / "priors" / f"{sha}.safetensors"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
        manifest = json.loads(path.with_suffix(".json").read_text())
        assert manifest["sha256"] == sha and manifest["preset"] == preset
        assert checkpoint.load(path).config == resolve_settings(preset).model


def test_every_prior_in_models_has_a_golden_file_that_decodes():
    """A file a release wrote from a prior must decode forever, so each prior has one."""
    golden = REPO / "tests" / "golden"
    named = set()
    for path in golden.glob("v*/*.mz"):
        with open(path, "rb") as f:
            named.add(container.read_header(f)["model_sha256"])
    for path in (REPO / "models" / "priors").glob("*.safetensors"):
        assert path.stem in named, f"no golden file compressed from the prior {path.name}"


def test_prior_manifests_name_no_path_of_the_machine_that_made_them():
    """A manifest's commands and files are as a user runs them from the checkout."""
    for path in (REPO / "models" / "priors").glob("*.json"):
        manifest = json.loads(path.read_text())
        for text in (manifest["training"]["command"], manifest["heldout"]["file"]):
            assert not re.search(r"(^|[\s=\"'])/(work|home|root|tmp)\b", text), text


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory):
    """The names in the wheel that pip builds from the checkout."""
    folder = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(folder), str(REPO)], check=True, capture_output=True)  # fmt: skip
    [wheel] = folder.glob("mambazip-*.whl")
    return set(zipfile.ZipFile(wheel).namelist())


def test_the_built_package_holds_the_priors(wheel_names):
    """A non-editable install finds the priors: they are in the wheel's package data."""
    shipped = sorted(p.name for p in (REPO / "models" / "priors").iterdir())
    assert any(name.endswith(".safetensors") for name in shipped)
    for name in shipped:
        assert f"mambazip/models/priors/{name}" in wheel_names


def test_the_built_package_holds_every_module_of_the_source_tree(wheel_names):
    """A package left out of pyproject.toml's list would install without its modules."""
    source = REPO / "mambazip"
    for path in source.rglob("*.py"):
        name = f"mambazip/{path.relative_to(source).as_posix()}"
        assert name in wheel_names, f"{name} is not in the wheel"


def test_binary_input_starts_from_the_seeded_init_not_the_prior(run_cli, models):
    """A prior trained on text costs binary data more than it saves: the first block
    decides, and the header records what was used."""
    binary = b"".join(i.to_bytes(4, "little") for i in range(600))  # half zero bytes
    packed = run_cli("compress", *TINY_PRESET, input=binary)
    assert packed.exit_code == 0, packed.stderr
    assert container.read_header(io.BytesIO(packed.stdout))["model_sha256"] is None
    assert run_cli("decompress", input=packed.stdout).stdout == binary


def test_text_is_told_from_binary_by_its_control_bytes():
    assert priors.looks_like_text(b"plain text\twith tabs\r\nand lines\x0c" * 10)
    assert priors.looks_like_text("UTF-8 tekst: żółć, 日本語".encode() * 10)
    assert not priors.looks_like_text(b"\x00\x01\x02\x03text" * 10)
    assert priors.looks_like_text(b"\x1b" * 25 + b"a" * 75)
    assert not priors.looks_like_text(b"\x1b" * 26 + b"a" * 74)


@pytest.fixture
def prior_recipe(models):
    """The "tiny" preset with a "prior_train" of its own: a Mamba that starts from its prior
    learns at a third of the preset's rate."""
    folder, sha = models
    preset = json.loads((folder / "tiny.json").read_text())
    (folder / "tiny.json").write_text(json.dumps({**preset, "prior_train": {"lr": 0.001}}))
    return sha


def test_a_mamba_that_starts_from_the_prior_learns_with_the_prior_recipe(run_cli, prior_recipe):
    packed = run_cli("compress", *TINY_PRESET, input=TEXT)
    assert packed.exit_code == 0, packed.stderr
    header = container.read_header(io.BytesIO(packed.stdout))
    assert header["model_sha256"] == prior_recipe
    assert header["settings"].train.lr == 0.001
    assert run_cli("decompress", input=packed.stdout).stdout == TEXT


def test_binary_input_learns_with_the_presets_own_recipe(run_cli, prior_recipe):
    binary = b"".join(i.to_bytes(4, "little") for i in range(600))
    packed = run_cli("compress", *TINY_PRESET, input=binary)
    header = container.read_header(io.BytesIO(packed.stdout))
    assert header["model_sha256"] is None
    assert header["settings"].train.lr == 0.003
    assert run_cli("decompress", input=packed.stdout).stdout == binary


def test_an_explicit_rate_wins_over_the_prior_recipe(run_cli, prior_recipe):
    packed = run_cli("compress", *TINY_PRESET, "--lr", "0.002", input=TEXT)
    header = container.read_header(io.BytesIO(packed.stdout))
    assert header["model_sha256"] == prior_recipe
    assert header["settings"].train.lr == 0.002


def test_the_prior_recipe_is_no_part_of_the_presets_settings(prior_recipe):
    assert resolve_settings("tiny").train.lr == 0.003
    assert resolve_settings("tiny", from_prior=True).train.lr == 0.001
    assert "prior_train" not in config.load_preset("tiny")


@pytest.fixture
def binary_mix(models):
    """The "tiny" preset with small mixing tables and a "binary_mix" of its own: an input
    that does not look like text is coded with combiners twice as fast."""
    folder, _ = models
    preset = json.loads((folder / "tiny.json").read_text())
    mix = {"ctx_log": 12, "hist_log": 16, "match_log": 12, "apm_log": 10, "combiner_lr": 4}
    preset = {**preset, "mix": mix, "binary_mix": {"combiner_lr": 8}}
    (folder / "tiny.json").write_text(json.dumps(preset))
    return folder


BINARY = b"".join(i.to_bytes(4, "little") for i in range(600))


def test_binary_input_codes_with_the_presets_binary_mix(run_cli, binary_mix):
    packed = run_cli("compress", "--preset", "tiny", "--mix", "cm", input=BINARY)
    assert packed.exit_code == 0, packed.stderr
    header = container.read_header(io.BytesIO(packed.stdout))
    assert header["settings"].mix.combiner_lr == 8
    assert header["settings"] == resolve_settings("tiny", mix="cm", binary=True)
    assert run_cli("decompress", input=packed.stdout).stdout == BINARY


def test_text_codes_with_the_presets_own_mix(run_cli, binary_mix):
    packed = run_cli("compress", "--preset", "tiny", "--mix", "cm", input=TEXT)
    assert packed.exit_code == 0, packed.stderr
    header = container.read_header(io.BytesIO(packed.stdout))
    assert header["settings"] == resolve_settings("tiny", mix="cm")
    assert header["settings"].mix.combiner_lr == 4
    assert run_cli("decompress", input=packed.stdout).stdout == TEXT


def test_a_given_model_codes_binary_input_with_the_presets_binary_mix(run_cli, binary_mix,
                                                                       tmp_path):  # fmt: skip
    saved = tmp_path / "given.safetensors"
    stats = codec.compress_stream(
        io.BytesIO(TEXT), io.BytesIO(), resolve_settings("tiny", mix="none")
    )
    checkpoint.save(saved, stats.learner)
    packed = run_cli(
        "compress", "--preset", "tiny", "--mix", "full", "--model", saved, input=BINARY
    )
    assert packed.exit_code == 0, packed.stderr
    assert container.read_header(io.BytesIO(packed.stdout))["settings"].mix.combiner_lr == 8
    restored = run_cli("decompress", "--model", saved, input=packed.stdout)
    assert restored.stdout == BINARY


def test_the_binary_mix_is_no_part_of_the_presets_settings(binary_mix):
    assert resolve_settings("tiny").mix.combiner_lr == 4
    assert resolve_settings("tiny", binary=True).mix.combiner_lr == 8
    assert resolve_settings("tiny", mix="none", binary=True).mix is None
    assert "binary_mix" not in config.load_preset("tiny", keep_prior=True)


def test_a_start_takes_its_binary_settings_for_binary_input_only():
    text_settings = resolve_settings("default")
    binary_settings = resolve_settings("default", binary=True)
    start = plan.Start(text_settings, binary_settings=binary_settings)
    assert start.for_input(BINARY).settings == binary_settings
    assert start.for_input(TEXT).settings == text_settings
    assert start.for_input(BINARY).binary_settings is None


def test_an_empty_input_keeps_the_presets_own_settings():
    text_settings = resolve_settings("default")
    start = plan.Start(text_settings, binary_settings=resolve_settings("default", binary=True))
    assert start.for_input(b"").settings == text_settings


def test_a_preset_start_holds_its_binary_settings_only_where_its_mix_has_them():
    assert plan.start("default", prior=False).binary_settings == resolve_settings(
        "default", binary=True
    )
    assert plan.start("default", mix="none", prior=False).binary_settings is None
    assert plan.start("fast").binary_settings == resolve_settings("fast", binary=True)
    assert resolve_settings("fast", binary=True) != resolve_settings("fast")
    assert plan.start("max").binary_settings is None  # max has no "binary_mix"
