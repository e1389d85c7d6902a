"""Hostile manifests and network descriptions (issue 28): every YAML file edgebuild reads
from a user is read within limits that apply while it is parsed (edgebuild.core.document:
file size, number of values, nesting depth, alias expansion, length of a number), and the
float weights and data paths a manifest names are checked like any other field.

Every case is generated here, run through the CLI under a wall-time and peak-memory bound
(tests/hostile.py), and must end with exit 2 and one line naming the file, the limit (or
field) and what to do. The bounds are ten times what the cases take (under a second; at
most 170 MiB, for the 3 MB strings), so that a busy machine passes them, and below what
the same cases took when the limits were checked after parsing (measured on the 2-core
machine that runs the suite, where the bounded cases take 0.3-0.8 s): the 1,000,000-value
list 18 s and 689 MiB, 100,000 layers 16 s and 544 MiB, 300,000 keys 12 s and 500 MiB,
1,350,000 aliases 15 s, the network description 13 s and 379 MiB, the sexagesimal number
67 s (then an internal error), /dev/zero all the memory there was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from edgebuild.core import document
from edgebuild.core.errors import UserError

try:  # tests/ as a package (tests/__init__.py) or as plain rootdir modules
    from tests.conftest import NPZ_MANIFEST, npz_data
    from tests.hostile import Outcome, assert_user_error, run_bounded
except ImportError:
    from conftest import NPZ_MANIFEST, npz_data
    from hostile import Outcome, assert_user_error, run_bounded

SECONDS = 10  # per run; the cases take under a second
MIB = 256  # peak memory of the run; the cases take 35-170 MiB
LINE = 400  # the longest line a case may print: long keys and paths are cut short

# The limits as the messages state them (edgebuild.core.document's MAX_* constants): written
# out, so that the module also runs against the loader from before them.
VALUES = "more than 100000 values"
DEEP = "nested deeper than 64 levels"


@dataclass(frozen=True)
class Case:
    """A generated input: `make(tmp_path)` writes it and gives the CLI's arguments and the
    texts its one line must hold."""

    make: Callable[[Path], tuple[list[str], tuple[str, ...]]]
    seconds: float = SECONDS
    mib: float = MIB


def manifest(tmp_path: Path, text: str) -> tuple[list[str], tuple[str, ...]]:
    """`edgebuild check` of a project whose edgebuild.yaml is `text`, beside data.npz."""
    npz_data(tmp_path / "data.npz")
    (tmp_path / "edgebuild.yaml").write_text(text)
    return ["check"], ("edgebuild.yaml:",)


def edited(old: str, new: str) -> str:
    assert old in NPZ_MANIFEST, old
    return NPZ_MANIFEST.replace(old, new, 1)


def flow_list(items: int, value: str = "0") -> str:
    return "[" + ",".join([value] * items) + "]"


# --- too many values ---------------------------------------------------------------------

def flat_list(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    """The issue's case: 2 MB, a list of 1,000,000 numbers (under the 4 MiB size limit)."""
    args, needles = manifest(tmp_path, edited("input: [1, 4, 4]",
                                              f"input: {flow_list(1_000_000)}"))
    return args, (*needles, VALUES)


def many_layers(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    """100,000 layers (each a flow mapping of three keys)."""
    layers = "".join(f"    - {{name: l{i}, op: linear, out: 3}}\n" for i in range(100_000))
    args, needles = manifest(tmp_path, edited("    - {name: fc,", layers + "    - {name: fc,"))
    return args, (*needles, VALUES)


def many_keys(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    """300,000 top-level keys in block style (each an unknown key)."""
    keys = "".join(f"k{i}: 1\n" for i in range(300_000))
    args, needles = manifest(tmp_path, NPZ_MANIFEST + keys)
    return args, (*needles, VALUES)


def alias_flood(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    """1,350,000 aliases of one anchor (4 MB): each is a value, even if a shared one. They
    cost little memory, so this case's bound is its time (5 s: it takes 0.4)."""
    refs = ",".join(["*a"] * 1_350_000)
    args, needles = manifest(tmp_path, NPZ_MANIFEST + f"x: &a [1]\ny: [{refs}]\n")
    return args, (*needles, VALUES)


def ai8x_description(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    """import-ai8x reads network descriptions through the same loader: 40,000 layers of
    five keys each (500,000 values in 4 MB)."""
    layer = "  - {processors: 0x1, out_offset: 0x2000, operation: conv2d, kernel_size: 3x3, " \
            "pad: 1}\n"
    (tmp_path / "network.yaml").write_text("arch: ai85net\ndataset: MNIST\nlayers:\n"
                                           + layer * 40_000)
    return ["import-ai8x", "network.yaml", "-o", "out"], ("network.yaml:", VALUES)


# --- too deep --------------------------------------------------------------------------

def deep_flow(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    """A list nested 1,000,000 deep (2 MB of brackets)."""
    args, needles = manifest(tmp_path, edited("input: [1, 4, 4]",
                                              "input: " + "[" * 10**6 + "]" * 10**6))
    return args, (*needles, DEEP)


def deep_block(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    """Mappings nested 1000 deep in block style (indentation)."""
    lines = [" " * level + f"k{level}:" for level in range(1000)]
    args, needles = manifest(tmp_path, NPZ_MANIFEST + "\n".join(lines) + " 1\n")
    return args, (*needles, DEEP)


# --- aliases, numbers, strings -----------------------------------------------------------

def billion_laughs(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    """Nine levels of nine aliases: 9**9 values from 1 KB. Told apart from a plain file
    with too many values: the aliases are what expand."""
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, 9)]
    args, needles = manifest(tmp_path, NPZ_MANIFEST + "\n".join(lines) + "\n")
    return args, (*needles, "YAML aliases (*name) expand the file to more than 200000 values")


def sexagesimal(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    """YAML 1.1's base-60 integer `1:00:00:...` (3 MB): PyYAML converts it in quadratic
    time."""
    args, needles = manifest(tmp_path, edited("seed: 1", "seed: 1" + ":00" * 10**6))
    return args, (*needles, "edgebuild.yaml:2:7:", "a number of 3000001 characters")


def long_number(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    """5000 digits: Python refuses to convert more than 4300 (a ValueError, not a user
    error, before)."""
    args, needles = manifest(tmp_path, edited("seed: 1", "seed: " + "7" * 5000))
    return args, (*needles, "a number of 5000 characters")


def impossible_date(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    """Looks like a YAML timestamp, is none (a ValueError before)."""
    args, needles = manifest(tmp_path, edited("name: tiny", "name: 2020-99-99"))
    return args, (*needles, "edgebuild.yaml:1:7:", "'2020-99-99'", "month must be in 1..12")


def control_character(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    """A NUL byte: PyYAML's reader refuses it in a message of two lines (the second about
    "<unicode string>", position 10), raised before parsing starts."""
    args, needles = manifest(tmp_path, edited("name: tiny", "name: tiny\0"))
    return args, (*needles, "edgebuild.yaml:1:11:", "unacceptable character #x0000")


def long_key(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    """A 3 MB key: the line that names it stays short."""
    args, needles = manifest(tmp_path, NPZ_MANIFEST + f"? {'k' * 3_000_000}\n: 1\n")
    return args, (*needles, "unknown key 'kkkk", "...")


def endless_file(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    """A network description that never ends and states no size (/dev/zero)."""
    del tmp_path
    return ["import-ai8x", "/dev/zero", "-o", "out"], (
        "/dev/zero:", "more than 4194304 bytes")


# --- what the manifest names -------------------------------------------------------------

def float_weights(tmp_path: Path, array: str, value: float) -> None:
    """train.init's float.npz for NPZ_MANIFEST's one linear layer, `value` in `array`."""
    import numpy as np

    weights = {"fc.weight": np.zeros((3, 16), np.float32), "fc.bias": np.zeros(3, np.float32)}
    weights[array].flat[1] = value
    np.savez(tmp_path / "float.npz", **weights)


def nan_init(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    float_weights(tmp_path, "fc.weight", float("nan"))
    args, needles = manifest(tmp_path, edited("train: {epochs: 1,",
                                              "train: {init: float.npz, epochs: 0,"))
    return args, (*needles, "train.init:", "float.npz", "'fc.weight'", "NaN")


def inf_init(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    float_weights(tmp_path, "fc.bias", float("-inf"))
    args, needles = manifest(tmp_path, edited("train: {epochs: 1,",
                                              "train: {init: float.npz, epochs: 1,"))
    return args, (*needles, "train.init:", "float.npz", "'fc.bias'", "infinite")


def long_data_path(tmp_path: Path) -> tuple[list[str], tuple[str, ...]]:
    """A `dataset.path` too long for the file system (ENAMETOOLONG): a FILE:LINE:COL
    diagnostic at the field, the path cut short."""
    args, _ = manifest(tmp_path, edited("path: data.npz", f"path: {'d' * 5000}.npz"))
    return args, ("edgebuild.yaml:5:3: dataset.path:", "too long for the file system")


CASES = {case.make.__name__: case for case in [
    Case(flat_list), Case(many_layers), Case(many_keys), Case(alias_flood, seconds=5),
    Case(ai8x_description), Case(deep_flow), Case(deep_block), Case(billion_laughs),
    Case(sexagesimal), Case(long_number), Case(impossible_date), Case(control_character),
    Case(long_key),
    Case(endless_file), Case(nan_init), Case(inf_init), Case(long_data_path)]}


@pytest.mark.parametrize("name", CASES)
def test_hostile_input_is_one_bounded_user_error(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    if name == "endless_file" and not Path("/dev/zero").exists():
        pytest.skip("needs /dev/zero")
    args, needles = case.make(tmp_path)
    outcome = run_bounded(name, args, tmp_path, seconds=case.seconds, mib=case.mib)
    assert_user_error(outcome, *needles)
    assert_one_short_line(outcome)


def assert_one_short_line(outcome: Outcome) -> None:
    """One problem, one line, of a readable length (a 3 MB key or a 5000-character path
    is cut short)."""
    lines = outcome.lines()
    assert len(lines) == 1, (outcome.case, len(lines), outcome.stderr[:3000])
    assert len(lines[0]) <= LINE, (outcome.case, len(lines[0]), lines[0][:3000])


# --- the limits leave room for every real file -------------------------------------------

def big_real_manifest(layers: int) -> str:
    """A manifest as large as a real one gets: `layers` layers, each with a QAT override
    and a placement, aliases and a merge key."""
    body = ["name: big", "seed: 1", "dataset: {format: npz, path: data.npz}",
            "conv: &conv {op: conv2d, out: 8, kernel: 3, pad: 1, act: relu}", "model:",
            "  input: [1, 8, 8]", "  layers:"]
    body += [f"    - {{<<: *conv, name: c{i}}}" for i in range(layers)]
    body += ["qat:", "  overrides:"]
    body += [f"    c{i}: {{weight_bits: 4}}" for i in range(layers)]
    body += ["placement:"]
    body += [f"  c{i}: {{processors: 0x0000.0000.0000.00ff, out_offset: 0x2000}}"
             for i in range(layers)]
    return "\n".join(body) + "\n"


def test_a_1000_layer_manifest_is_within_every_limit() -> None:
    doc = document.parse(big_real_manifest(1000), "big.yaml")
    assert len(doc.data["model"]["layers"]) == 1000
    assert doc.data["model"]["layers"][999] == {
        "name": "c999", "op": "conv2d", "out": 8, "kernel": 3, "pad": 1, "act": "relu"}


def test_the_documented_limits() -> None:
    assert (document.MAX_NODES, document.MAX_DEPTH, document.MAX_EXPANDED_NODES,
            document.MAX_FILE_BYTES) == (100_000, 64, 200_000, 4 * 1024 * 1024)


def test_the_limits_count_while_parsing_not_after() -> None:
    """Reading stops at the first value past the limit: the line it names is where that
    value is, not the end of the file."""
    text = "a:\n" + "".join(f"  - {i}\n" for i in range(3 * document.MAX_NODES))
    with pytest.raises(UserError) as info:
        document.parse(text, "f.yaml")
    (problem,) = info.value.diagnostics
    assert VALUES in problem.message
    # the mapping, its key and the list are values 1-3: item i (line i + 2) is value i + 4
    assert problem.line == document.MAX_NODES - 1


@pytest.mark.parametrize("text", [
    "a: &a [*a]\n",  # an alias inside its own anchor
    "a: &a {b: *a}\n",
    "".join(f"a{i}: &a{i} [*a{i - 1}]\n" if i else "a0: &a0 [1]\n" for i in range(100)),
])
def test_aliases_nested_past_the_depth_limit_are_named(text: str) -> None:
    with pytest.raises(UserError) as info:
        document.parse(text, "f.yaml")
    assert "YAML aliases (*name) nest values deeper than 64 levels" in str(info.value)


def test_a_merge_chain_is_no_deeper_than_its_nesting() -> None:
    """Anchors come before their aliases and are built in file order: a chain of merges
    of merges recurses one level at a time, however long."""
    text = "a0: &a0 {k: 1}\n" + "".join(f"a{i}: &a{i} {{<<: *a{i - 1}, k{i}: {i}}}\n"
                                       for i in range(1, 300))
    assert len(document.parse(text, "f.yaml").data["a299"]) == 300


def test_libyaml_and_pyyaml_give_the_same_positions() -> None:
    """libyaml parses, PyYAML's parser is the reference: the marks must agree."""
    if len(document._LOADERS) < 2:
        pytest.skip("PyYAML without libyaml")
    text = big_real_manifest(20) + "s: café 😀\nt: |\n  block\nu: 'q''uote'\n"

    def marks(loader: Callable[[str], object]) -> list[tuple[int, int]]:
        found, todo = [], [loader(text).get_single_node()]
        while todo:
            node = todo.pop()
            found.append((node.start_mark.line, node.start_mark.column))
            if isinstance(node.value, list):
                todo += [n for item in node.value
                         for n in (item if isinstance(item, tuple) else (item,))]
        return found

    fast, pure = document._LOADERS
    assert marks(fast) == marks(pure)


def test_a_huge_unknown_key_in_a_network_description_is_quoted_short(tmp_path):
    """A 100 kB unknown key (top level and in a layer) is named in one short line each."""
    key = "k" * 100_000
    (tmp_path / "net.yaml").write_text(  # `? key` (an explicit key: any length)
        f"arch: x\ndataset: y\n? {key}\n: 1\nlayers:\n  - processors: 0x1\n"
        f"    out_offset: 0\n    ? {key}\n    : 2\n")
    outcome = run_bounded("ai8x 100 kB unknown keys", ["import-ai8x", "net.yaml", "--input",
                          "1,8,8"], tmp_path, seconds=20, mib=512)
    assert outcome.code == 2, outcome.stderr[-2000:]
    assert all(len(line) < 1000 for line in outcome.lines()), max(map(len, outcome.lines()))
    assert sum("unknown key 'kkkk" in line for line in outcome.lines()) == 2, outcome.stderr
