"""limits: JSON depth checked before parsing, memory checked before allocating."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mambazip import limits
from mambazip.errors import MambazipError, MemoryLimitError


def reference_depth(data):
    """A character-by-character spelling of what json_depth computes."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in data.decode():
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def test_a_100000_deep_array_is_refused_without_recursing():
    with pytest.raises(ValueError, match=r"^x\.mz: JSON nested deeper than 64 levels$"):
        limits.loads_json(b"[" * 100_000 + b"]" * 100_000, "x.mz")


def test_the_error_class_is_the_callers():
    class MineError(Exception):
        pass

    with pytest.raises(MineError, match="nested deeper than 3 levels"):
        limits.loads_json('{"a": [[[1]]]}', "h", max_depth=3, error=MineError)
    assert limits.loads_json('{"a": [[1]]}', "h", max_depth=3) == {"a": [[1]]}


def test_brackets_inside_strings_do_not_count():
    text = json.dumps({"a": "[[[[[[[[" * 20, "b": '\\"[[[[' * 20, "c": ["\\\\", [["{{{{"]]]})
    assert limits.loads_json(text, "h", max_depth=4) == json.loads(text)
    with pytest.raises(ValueError, match="nested deeper than 3 levels"):
        limits.loads_json(text, "h", max_depth=3)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"a": NaN}', "not valid JSON (NaN is not a JSON number)"),
        (b'{"a": Infinity}', "not valid JSON (Infinity is not a JSON number)"),
        (b'{"a": 1', "not valid JSON (Expecting ',' delimiter"),
        (b"\x00\x00\x00[", "not valid JSON"),
        (b"[" + b"1" * 10_000 + b"]", "not valid JSON"),
    ],
)
def test_what_json_loads_refuses_is_one_line_of_the_given_class(raw, message):
    with pytest.raises(ValueError) as info:
        limits.loads_json(raw, "f")
    assert str(info.value).startswith(f"f: {message}")
    assert "\n" not in str(info.value)


def test_more_bytes_than_allowed_are_refused_before_parsing():
    with pytest.raises(ValueError, match=r"^f: JSON of 11 bytes, more than the 10 allowed$"):
        limits.loads_json(b"[1,2,3,4,5]", "f", max_bytes=10)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["[", "]", "{", "}", ",", "1"]),
            st.text(alphabet='[]{}"\\ab', max_size=6).map(json.dumps),
        ),
        max_size=40,
    ),
    st.sampled_from([1, 2, 3, 7, 1 << 20]),
)
def test_the_chunked_scan_agrees_with_a_character_scan(parts, chunk):
    # json.dumps escapes quotes and backslashes: strings with escapes cross chunk borders.
    data = "".join(parts).encode()
    old, limits._SCAN_CHUNK = limits._SCAN_CHUNK, chunk
    try:
        assert limits.json_depth(data) == reference_depth(data)
    finally:
        limits._SCAN_CHUNK = old


def test_check_memory_names_the_figure_the_limit_and_the_option():
    limits.check_memory(1 << 30, 1 << 30, "x")
    with pytest.raises(MemoryLimitError) as info:
        limits.check_memory(3 << 30, 1 << 30, "x.mz: decoding")
    assert isinstance(info.value, MambazipError)
    assert str(info.value) == (
        "x.mz: decoding needs 3.0 GiB of memory, more than the limit of 1.0 GiB "
        "(--memlimit raises it)"
    )


def test_the_default_limit_holds_the_largest_preset_with_a_small_margin():
    from mambazip.codec import CHUNK
    from mambazip.config import MAX_PARAMETERS, load_preset, resolve_settings
    from mambazip.predict import memory_bytes

    assert load_preset("max")["model"]["n_layer"] == 16
    needs = {p: memory_bytes(resolve_settings(p), None, CHUNK) for p in ("fast", "default", "max")}
    assert max(needs, key=needs.get) == "max"
    # The figure limits.py's docstring gives, and the limit just above it: enough for max with
    # a margin of at least 5 %, and not so much that a hostile file reaches 1 GiB of memory
    # beside the ~170 MiB the interpreter and kernels take.
    # 760,021,912 bytes before the Mamba ran a chunk ahead, plus that chunk's float32 pdfs,
    # 4096 x 256 x 4 = 4,194,304: 764,216,216 bytes.
    assert round(needs["max"] / 2**20, 1) == 728.8
    assert needs["max"] * 1.05 <= limits.DEFAULT_MEMLIMIT <= (1 << 30) - (192 << 20)
    limits.check_memory(needs["max"], None, "x")
    # Weights, gradient and two Adam moments of the largest model a header may declare.
    limits.check_memory(16 * MAX_PARAMETERS, None, "x")
    with pytest.raises(MemoryLimitError):
        limits.check_memory(limits.DEFAULT_MEMLIMIT + 1, None, "x")


def test_the_max_preset_compresses_and_decompresses_under_the_default_limit(tmp_path):
    # The estimate must admit the largest preset under the default --memlimit: end to end.
    import subprocess
    import sys

    sample = tmp_path / "x"
    sample.write_bytes(b"the max preset under the default memory limit\n" * 4)
    for args in (["compress", "--preset", "max", sample], ["decompress", "-c", f"{sample}.mz"]):
        proc = subprocess.run([sys.executable, "-m", "mambazip", *map(str, args)],
                              capture_output=True, timeout=600)  # fmt: skip
        assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == sample.read_bytes()


def test_a_budget_sums_what_it_is_given_and_refuses_the_step_past_the_limit():
    budget = limits.Budget(100, "m")
    budget.take(60)
    budget.take(40)
    with pytest.raises(MemoryLimitError, match=r"^m needs 101 bytes of memory, more than the li"):
        budget.take(1)
    assert budget.used == 100
    with pytest.raises(ValueError):
        limits.Budget(0)


@pytest.mark.parametrize(
    ("text", "value"),
    [("1073741824", 1 << 30), ("512MiB", 512 << 20), ("2G", 2 << 30), ("1.5GiB", 3 << 29),
     ("64k", 64 << 10), ("3 MB", 3 << 20)],
)  # fmt: skip
def test_parse_size_reads_the_spellings_xz_reads(text, value):
    assert limits.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "0", "2 GB please", "-1G", "G", "1e9"])
def test_parse_size_refuses_anything_else(text):
    with pytest.raises(ValueError):
        limits.parse_size(text)
