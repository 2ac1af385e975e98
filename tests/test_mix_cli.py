"""The predictor through the command line: --mix chooses its parts, score --html shows where
the bits go, and a mix that leaves out the Mamba refuses a starting model."""

import io
import struct
from html.parser import HTMLParser

import pytest
from conftest import TINY_FLAGS

import mambazip
from mambazip import container
from mambazip.frames import DEFAULT_FRAME


def header_settings(blob):
    return container.read_header(io.BytesIO(blob))["settings"]


@pytest.mark.parametrize("mode", ["none", "cm", "full"])
def test_each_mix_round_trips_and_is_recorded_in_the_header(run_cli, sample_file, mode):
    packed = run_cli("compress", "-c", "--mix", mode, *TINY_FLAGS, sample_file)
    assert packed.exit_code == 0, packed.stderr
    settings = header_settings(packed.stdout)
    if mode == "none":
        assert settings.mix is None
    else:
        assert settings.mix.mamba == (mode == "full")
    assert mambazip.decompress(packed.stdout) == sample_file.read_bytes()


def test_mix_none_codes_the_blocks_the_library_codes_for_the_mamba_alone(run_cli, sample_file):
    """The CLI's header carries the name and mtime and its file is one frame and its index
    (version 4); the frame's coded blocks and end are the Mamba alone's, as the pre-mixing
    formats coded them."""
    packed = run_cli("compress", "-c", "-n", "--mix", "none", *TINY_FLAGS, sample_file).stdout
    settings = header_settings(packed)
    library = mambazip.compress(sample_file.read_bytes(), settings)
    assert container.format_version(settings) < 3
    (cli_len,) = struct.unpack_from("<I", packed, 10)
    (lib_len,) = struct.unpack_from("<I", library, 10)
    body = library[14 + lib_len + 4 :]
    frame_and_index = packed[14 + cli_len + 4 :]
    assert frame_and_index[: len(body)] == body
    index = io.BytesIO(frame_and_index[len(body) + 4 :])
    [frame] = container.read_index(index, 1, 0, DEFAULT_FRAME).frames
    assert (frame.packed_size, frame.size) == (len(body), sample_file.stat().st_size)


def test_mix_cm_with_a_starting_model_is_a_usage_error(run_cli, sample_file, tmp_path):
    ckpt = tmp_path / "start.safetensors"
    saved = run_cli("compress", "-c", "--mix", "none", *TINY_FLAGS, "--save-model", ckpt,
                    sample_file)  # fmt: skip
    assert saved.exit_code == 0, saved.stderr
    result = run_cli("compress", "-c", "--mix", "cm", "--model", ckpt, sample_file)
    assert "--mix cm" in result.error_line(2)


class Parts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.summary, self.cells, self._in = None, [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "p" and attrs.get("id") == "summary":
            self.summary = attrs
        if tag == "table":
            self._in = attrs.get("id")
        if tag == "td" and self._in == "parts" and attrs.get("class") == "part":
            self.cells.append("")

    def handle_endtag(self, tag):
        if tag == "table":
            self._in = None

    def handle_data(self, data):
        if self._in == "parts" and self.cells and not self.cells[-1]:
            self.cells[-1] = data.strip()


@pytest.mark.parametrize("mode", ["cm", "full"])
def test_score_html_page_names_every_part_and_covers_the_file(run_cli, sample_file, tmp_path,
                                                              mode):  # fmt: skip
    page = tmp_path / "where.html"
    result = run_cli("score", "-q", "--mix", mode, *TINY_FLAGS, "--html", page, sample_file)
    assert result.exit_code == 0, result.stderr
    parser = Parts()
    parser.feed(page.read_text())
    assert int(parser.summary["data-bytes"]) == sample_file.stat().st_size
    settings = mambazip.resolve_settings(model={"d_model": 8}, mix=mode)
    assert parser.cells == list(settings.mix.part_names)
    assert ("mamba" in parser.cells) == (mode == "full")


def test_score_html_refuses_to_overwrite_without_force(run_cli, sample_file, tmp_path):
    page = tmp_path / "where.html"
    page.write_text("keep me")
    result = run_cli("score", "-q", *TINY_FLAGS, "--html", page, sample_file)
    assert "already exists" in result.error_line(1)
    assert page.read_text() == "keep me"


def test_save_model_with_the_context_models_alone_is_a_usage_error(run_cli, sample_file, tmp_path):
    ckpt = tmp_path / "model.safetensors"
    result = run_cli("compress", "-c", "--mix", "cm", *TINY_FLAGS, "--save-model", ckpt,
                     sample_file)  # fmt: skip
    assert "--mix cm" in result.error_line(2)
    assert not ckpt.exists()


def test_decompress_save_model_of_a_file_without_the_mamba_is_one_line(run_cli, sample_file,
                                                                         tmp_path):  # fmt: skip
    packed = tmp_path / "x.mz"
    assert run_cli("compress", "--mix", "cm", *TINY_FLAGS, "-o", packed, sample_file).exit_code == 0
    ckpt, out = tmp_path / "model.safetensors", tmp_path / "x.out"
    result = run_cli("decompress", "--save-model", ckpt, "-o", out, packed)
    assert "no model to save" in result.error_line(1)
    assert not ckpt.exists() and not out.exists()
