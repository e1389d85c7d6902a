"""User mistakes in manifests, through the CLI: `FILE:LINE:COL: field.path: message` on
stderr, exit status 2, every problem at once, never a traceback.

Most single-mistake cases share one `edgebuild check` run over a project holding one
manifest per case (a run reports every file's problems), so each case is still its own
test but the module pays for one process start; the rest run `edgebuild check` alone.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from edgebuild.core.fields import parse_bytes

try:  # tests/ as a package (tests/__init__.py) or as plain rootdir modules
    from tests.conftest import DIGITS_MANIFEST, EXAMPLES, run_cli, write
except ImportError:
    from conftest import DIGITS_MANIFEST, EXAMPLES, run_cli, write


def manifest(name: str = "small", *edits: tuple[str, str]) -> str:
    """The conftest digits manifest with `old -> new` text edits (each must apply)."""
    text = DIGITS_MANIFEST.format(name=name)
    for old, new in edits:
        assert old in text, f"edit {old!r} does not apply"
        text = text.replace(old, new, 1)
    return text


def position(text: str, at: str) -> str:
    """`LINE:COL` (1-based) of the first occurrence of `at` in `text`."""
    index = text.index(at)
    line = text.count("\n", 0, index) + 1
    col = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"{line}:{col}"


def check(cwd: Path, *args: str):
    result = run_cli(["check", *args], cwd, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def project(root: Path, **files: str) -> Path:
    for name, text in files.items():
        write(root / "manifests" / f"{name}.yaml", text)
    return root


# --- one shared run over many broken manifests ---------------------------------------------

@dataclass(frozen=True)
class Case:
    text: str
    at: str  # where the diagnostic points: the first occurrence of this text
    field: str | None  # the dotted field path, None for file-level errors (YAML syntax)
    message: str  # a fragment the message must contain


def case(name: str, edits: list[tuple[str, str]], at: str, field: str | None,
         message: str) -> tuple[str, Case]:
    return name, Case(manifest("small", *edits), at, field, message)


ADD_LAYERS = ("    - {name: fc,", "    - {name: conv2, op: conv2d, out: 4, kernel: 3, pad: 1, "
              "inputs: [conv1]}\n    - {name: sum, op: add, inputs: [conv1, conv2]}\n"
              "    - {name: fc,")

UNSAFE_NAMES = {"slash": "a/b", "dotdot": "..", "quote": "x'y", "semicolon": "a;b",
                "space": "has space", "keyword": "int", "digit_first": "9lives",
                "too_long": "a" * 49, "empty": ""}


def _name_message(value: str) -> str:
    if value == "int":
        return "'int' is a C keyword; choose another name"
    return (f"{value!r} is not a valid name: use a letter followed by up to 47 letters, "
            "digits or underscores")


CASES: dict[str, Case] = dict([
    # unknown keys get a "did you mean"
    case("epocs", [("epochs: 2", "epocs: 2")], "epocs", "train.epocs",
         "unknown key 'epocs'; did you mean 'epochs'?"),
    case("kernal", [("kernel: 3", "kernal: 3")], "kernal", "model.layers[0].kernal",
         "unknown key 'kernal'; did you mean 'kernel'?"),
    case("top_level_typo", [("seed: 1", "sead: 1")], "sead", "sead",
         "unknown key 'sead'; did you mean 'seed'?"),
    case("missing_name", [("name: small\n", "")], "seed", "name",
         "required field is missing"),
    case("duplicate_key", [("seed: 1", "seed: 1\nseed: 2")], "seed: 2", "seed",
         "duplicate key 'seed' (first defined at line 2)"),
    # types and ranges
    case("epochs_many", [("epochs: 2", "epochs: many")], "epochs", "train.epochs",
         "expected a whole number, got 'many'"),
    case("epochs_fraction", [("epochs: 2", "epochs: 1.5")], "epochs", "train.epochs",
         "expected a whole number, got 1.5"),
    case("seed_negative", [("seed: 1", "seed: -1")], "seed", "seed",
         "must be at least 0, got -1"),
    case("seed_huge", [("seed: 1", "seed: 2147483648")], "seed", "seed",
         "must be at most 2147483647, got 2147483648"),
    case("out_zero", [("out: 8,", "out: 0,")], "out: 0", "model.layers[0].out",
         "must be at least 1, got 0"),
    case("unknown_op", [("op: conv2d", "op: conv3d")], "{name: conv1", "model.layers[0]",
         "'conv3d'; allowed: 'conv1d', 'conv2d'"),
    case("unknown_device", [("device: host", "device: tpu")], "device", "target.device",
         "must be one of host, cortex-m4, max78000 or max78002, got 'tpu'"),
    # memory sizes: units parsed, absurd values refused
    case("l2_negative", [("l2: 128KiB", "l2: -5")], "l2", "target.memory.l2",
         "size -5 bytes is out of range (1 byte .. 1 TiB)"),
    case("l2_zero", [("l2: 128KiB", "l2: 0")], "l2", "target.memory.l2", "out of range"),
    case("flash_unit", [("flash: 512KiB", "flash: 12XB")], "flash", "target.memory.flash",
         "'12XB' is not a size"),
    case("l1_tib", [("l1: 16KiB", "l1: 2TiB")], "l1", "target.memory.l1",
         "'2TiB' is not a size"),
    case("l1_huge", [("l1: 16KiB", "l1: 2048GiB")], "l1", "target.memory.l1",
         "out of range (1 byte .. 1 TiB)"),
    case("l1_fraction", [("l1: 16KiB", "l1: 1.5B")], "l1", "target.memory.l1",
         "not a whole number of bytes"),
    case("l1_bool", [("l1: 16KiB", "l1: true")], "l1", "target.memory.l1",
         "expected a size"),
    # cross-field rules
    case("inputs_unknown", [("{name: fc,", "{name: fc, inputs: [nope],")], "inputs",
         "model.layers[1].inputs", "'nope' names no earlier layer (earlier: input, conv1)"),
    case("input_shape", [("input: [1, 8, 8]", "input: [1, 8, 9]")], "input:", "model.input",
         "the dataset's samples have shape [1, 8, 8] but model.input is [1, 8, 9]"),
    case("classes", [("out: 10,", "out: 7,")], "{name: fc", "model.layers[1]",
         "the last layer has 7 outputs but the dataset has 10 classes"),
    case("wide_not_last", [("act: relu}", "wide: true}")], "wide",
         "model.layers[0].wide", "only allowed on the last layer"),
    case("duplicate_layer", [("{name: fc,", "{name: conv1,")], "name: conv1, op: linear",
         "model.layers[1].name", "layer name 'conv1' is used twice"),
    case("add_mismatch", [ADD_LAYERS], "{name: sum", "model.layers[2]",
         "add needs inputs of one shape, got conv1=[8, 8, 8], conv2=[4, 8, 8]"),
    case("linear_not_flat", [("flatten: true, ", "")], "{name: fc", "model.layers[1]",
         "linear needs a flat input but gets [8, 8, 8]; add `flatten: true`"),
    # data files
    case("missing_npz", [("format: sklearn-digits", "format: npz\n  path: missing.npz")],
         "dataset", "dataset", "missing.npz: data file not found"),
    # YAML syntax
    case("yaml_syntax", [("seed: 1", "seed: 1: 2")], ": 2", None,
         "YAML syntax error: mapping values are not allowed here"),
    # unsafe names (they become directories and C identifiers)
    *(case(f"name_{key}", [("name: small", f"name: {json.dumps(value)}")], "name:",
           "name", _name_message(value)) for key, value in UNSAFE_NAMES.items()),
    *(case(f"layer_{key}", [("name: conv1", f"name: {json.dumps(value)}")],
           f"name: {json.dumps(value)}", "model.layers[0].name", _name_message(value))
      for key, value in UNSAFE_NAMES.items()),
])


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    root = project(tmp_path_factory.mktemp("broken"),
                   **{name: c.text for name, c in CASES.items()})
    result = check(root)
    return result, lines(result.stderr)


def test_batch_exits_2_and_attributes_every_line_to_a_file(batch):
    result, found = batch
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert not [line for line in found if not line.startswith("manifests/")]
    assert not [line for line in found if ": ok (" in line]
    assert len(found) == len(CASES), "\n".join(found)


@pytest.mark.parametrize("name", list(CASES))
def test_mistake_is_reported_at_its_place(batch, name):
    _, found = batch
    c = CASES[name]
    mine = [line for line in found if line.startswith(f"manifests/{name}.yaml:")]
    assert len(mine) == 1, "\n".join(mine) or f"nothing reported for {name}"
    prefix = f"manifests/{name}.yaml:{position(c.text, c.at)}: "
    if c.field is not None:
        prefix += f"{c.field}: "
    assert mine[0].startswith(prefix), f"expected prefix {prefix!r}\ngot {mine[0]!r}"
    assert c.message in mine[0]


@pytest.mark.parametrize("name", ["name_slash", "layer_keyword"])
def test_a_single_mistake_alone_exits_2(tmp_path: Path, name: str):
    project(tmp_path, m=CASES[name].text)
    result = check(tmp_path)
    assert result.returncode == 2
    (line,) = lines(result.stderr)
    assert line.startswith("manifests/m.yaml:")
    assert CASES[name].message in line


# --- runs of their own -----------------------------------------------------------------------

def test_unknown_keys_did_you_mean(tmp_path: Path):
    text = manifest("small", ("epochs: 2", "epocs: 2"), ("kernel: 3", "kernal: 3"))
    project(tmp_path, m=text)
    result = check(tmp_path)
    assert result.returncode == 2
    assert lines(result.stderr) == [
        f"manifests/m.yaml:{position(text, 'kernal')}: model.layers[0].kernal: unknown key "
        "'kernal'; did you mean 'kernel'? (allowed: name, inputs, doc, out, groups, bias, act, "
        "pool, wide, op, kernel, stride, pad, pad_end, dilation)",
        f"manifests/m.yaml:{position(text, 'epocs')}: train.epocs: unknown key 'epocs'; did "
        "you mean 'epochs'? (allowed: epochs, patience, init, batch, optimizer, schedule, "
        "clamp_activations, reproducible)",
    ]


def test_several_schema_problems_are_all_reported_in_one_run(tmp_path: Path):
    text = manifest("small", ("seed: 1", "seed: -1"), ("epochs: 2", "epocs: 2"),
                    ("batch: 64", "batch: lots"), ("l2: 128KiB", "l2: -5"),
                    ("flash: 512KiB", "flash: 12XB"), ("out: 8,", "out: 0,"))
    project(tmp_path, m=text)
    first = check(tmp_path)
    assert first.returncode == 2
    found = lines(first.stderr)
    assert [line.split(": ", 2)[1] for line in found] == [
        "seed", "model.layers[0].out", "train.epocs", "train.batch", "target.memory.l2",
        "target.memory.flash"]  # in file order
    # an invalid manifest is never memoized: the second run says the same
    second = check(tmp_path)
    assert (second.returncode, second.stderr) == (2, first.stderr)


def test_several_graph_problems_are_all_reported_in_one_run(tmp_path: Path):
    text = manifest("small", ("act: relu}", "wide: true}"),
                    ("{name: fc,", "{name: conv1, inputs: [nope],"))
    project(tmp_path, m=text)
    result = check(tmp_path)
    assert result.returncode == 2
    found = lines(result.stderr)
    assert len(found) == 2, result.stderr
    assert any("model.layers[0].wide:" in line for line in found)
    assert any("model.layers[1].name: layer name 'conv1' is used twice" in line
               for line in found)


def test_problems_in_several_files_are_all_reported(tmp_path: Path):
    project(tmp_path, a=manifest("a", ("seed: 1", "seed: -1")),
            b=manifest("b", ("epochs: 2", "epochs: many")), c=manifest("c"))
    result = check(tmp_path)
    assert result.returncode == 2
    found = lines(result.stderr)
    assert [line.split(":", 1)[0] for line in found] == ["manifests/a.yaml",
                                                          "manifests/b.yaml"]


def test_paths_in_messages_are_as_given(tmp_path: Path):
    write(tmp_path / "sub" / "edgebuild.yaml", manifest("small", ("seed: 1", "seed: -1")))
    result = check(tmp_path, "sub/edgebuild.yaml")
    assert result.returncode == 2
    assert lines(result.stderr) == [
        "sub/edgebuild.yaml:2:1: seed: must be at least 0, got -1"]


def test_two_manifests_with_one_name(tmp_path: Path):
    project(tmp_path, a=manifest("twin"), b=manifest("twin"))
    for _ in range(2):  # the second run takes the memoized (valid) records: still refused
        result = check(tmp_path)
        assert result.returncode == 2, result.stderr
        (line,) = lines(result.stderr)
        assert line.startswith("manifests/b.yaml:1:1: name: manifest name 'twin' is already "
                               "used by manifests/a.yaml")


def test_edgebuild_yaml_and_a_manifest_with_one_name(tmp_path: Path):
    write(tmp_path / "edgebuild.yaml", manifest("twin"))
    project(tmp_path, other=manifest("twin"))
    result = check(tmp_path)
    assert result.returncode == 2
    assert "edgebuild.yaml" in result.stderr and "manifests/other.yaml" in result.stderr


def test_missing_dataset_file(tmp_path: Path):
    project(tmp_path, m=manifest("small", ("format: sklearn-digits",
                                           "format: npz\n  path: data/missing.npz")))
    result = check(tmp_path)
    assert result.returncode == 2
    (line,) = lines(result.stderr)
    assert line.startswith("manifests/m.yaml:3:1: dataset: ")
    assert line.endswith(str(tmp_path / "manifests" / "data" / "missing.npz")
                         + ": data file not found")


def test_malformed_yaml(tmp_path: Path):
    project(tmp_path, m="name: small\nmodel:\n  input: [1, 8, 8\n  layers: []\n")
    result = check(tmp_path)
    assert result.returncode == 2
    (line,) = lines(result.stderr)
    assert line.startswith("manifests/m.yaml:4:9: YAML syntax error")


@pytest.mark.parametrize(("text", "message"), [
    ("", "file is empty"),
    ("- name: small\n", "a manifest is a mapping of sections"),
    ("name: small\n", "required field is missing"),
])
def test_not_a_manifest(tmp_path: Path, text: str, message: str):
    project(tmp_path, m=text)
    result = check(tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert all(line.startswith("manifests/m.yaml") for line in lines(result.stderr))


def test_directory_without_manifests(tmp_path: Path):
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "notes.txt").write_text("name: x\n")
    result = check(tmp_path)
    assert result.returncode == 2
    assert "no edgebuild.yaml or manifests/*.yaml here" in result.stderr


def test_path_that_does_not_exist(tmp_path: Path):
    result = check(tmp_path, "nope.yaml")
    assert result.returncode == 2
    assert lines(result.stderr) == ["nope.yaml: no such manifest file or project directory"]


def test_memory_sizes_with_units_are_accepted(tmp_path: Path):
    project(tmp_path, m=manifest("small", ("l1: 16KiB", "l1: 16384"), ("l2: 128KiB", "l2: 1MB"),
                                 ("flash: 512KiB", "flash: 0.5 MiB")),
            n=manifest("other"))  # 16KiB, 128KiB, 512KiB
    result = check(tmp_path)
    assert result.returncode == 0, result.stderr
    assert lines(result.stderr) == [
        "manifests/m.yaml: ok (small: 2 layers, 5210 parameters, 9728 MACs)",
        "manifests/n.yaml: ok (other: 2 layers, 5210 parameters, 9728 MACs)"]


@pytest.mark.parametrize(("text", "expected"), [
    (512, 512), ("512", 512), ("16KiB", 16384), ("16kib", 16384), ("2MiB", 2 * 1024**2),
    ("1GiB", 1024**3), ("512KB", 512_000), ("1MB", 10**6), ("0.5KiB", 512), (" 3 B ", 3),
    ("1024GiB", 1 << 40),
])
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", [0, -5, "0B", "12XB", "2TiB", "1025GiB", "1.5B", True, 1.5,
                                  None, "", "KiB", "-1KiB"])
def test_parse_bytes_refuses(text):
    with pytest.raises(ValueError):
        parse_bytes(text)


@pytest.mark.parametrize("value", ["true", "yes", "'3'"])
def test_booleans_and_strings_are_not_integers(tmp_path: Path, value: str):
    """Integers are strict: YAML `yes` is not 1 epoch, and "3" is not 3."""
    project(tmp_path, m=manifest("small", ("epochs: 2", f"epochs: {value}")))
    result = check(tmp_path)
    assert result.returncode == 2
    assert "train.epochs: expected a whole number, got " in result.stderr
    assert "Input should" not in result.stderr


def test_example_manifests_are_valid(tmp_path: Path):
    (tmp_path / "manifests").mkdir()
    examples = sorted(EXAMPLES.glob("*.yaml"))
    assert examples
    for path in examples:
        shutil.copy(path, tmp_path / "manifests" / path.name)
    for folder in (p for p in EXAMPLES.iterdir() if p.is_dir()):  # an import's weights, kat
        shutil.copytree(folder, tmp_path / "manifests" / folder.name)
    result = check(tmp_path)
    assert result.returncode == 0, result.stderr
    found = lines(result.stderr)  # one line per target: vowels.yaml lists two
    assert sorted(set(line.split(": ok (")[0] for line in found)) == [
        f"manifests/{p.name}" for p in examples]
    assert len(found) == len(examples) + 1


@pytest.mark.parametrize("command", [[], ["build"], ["check"], ["status"], ["schema"],
                                     ["init"], ["clean"], ["cache"], ["cache", "gc"],
                                     ["cache", "verify"]], ids=" ".join)
def test_help(tmp_path: Path, command: list[str]):
    result = run_cli([*command, "--help"], tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {' '.join(['edgebuild', *command])}")
    assert result.stderr == ""
    assert not list(tmp_path.iterdir())  # --help touches nothing


@pytest.mark.parametrize(("edit", "message"), [
    (("epochs: 2", "epochs: 2.5"), "train.epochs: expected a whole number, got 2.5"),
    (("seed: 1", "seed: yes"), "seed: expected a whole number, got true"),
    (("device: host", "device: esp32"), "target.device: must be one of"),
])
def test_schema_errors_speak_plainly(tmp_path: Path, edit, message):
    """What was given and what is allowed, in plain words: no pydantic phrasing."""
    project(tmp_path, m=manifest("small", edit))
    result = check(tmp_path)
    assert result.returncode == 2
    assert message in result.stderr, result.stderr
    assert "Input should" not in result.stderr and "valid integer" not in result.stderr


def test_a_misplaced_key_names_the_section_it_belongs_to(tmp_path: Path):
    project(tmp_path, m=manifest("small", ("epochs: 2", "epochs: 2, weight_bits: 4")))
    result = check(tmp_path)
    assert result.returncode == 2
    assert "train.weight_bits: unknown key 'weight_bits' here; it belongs in " \
        "qat.weight_bits" in result.stderr, result.stderr


def test_manifests_in_the_wrong_place_get_told_where_they_go(tmp_path: Path):
    write(tmp_path / "small.yaml", manifest("small"))
    result = check(tmp_path)
    assert result.returncode == 2
    assert "but small.yaml: a project's manifests go in manifests/" in result.stderr
    assert "`edgebuild build small.yaml`" in result.stderr
    assert check(tmp_path, "small.yaml").returncode == 0  # as the hint says


def test_schema_and_semantic_errors_in_one_round(tmp_path: Path):
    """A schema error in one section does not hide the cross-field errors of the others:
    here a misplaced training key, a class count that does not fit the dataset, and a
    flash budget below the weights, all in one `check`."""
    text = manifest("small", ("out: 10, flatten", "out: 7, flatten"),
                    ("train: {epochs: 2, batch: 64}", "train: {epochs: 2, batch: 64, weight_bits: 4}"),
                    ("flash: 512KiB", "flash: 1KiB"))
    project(tmp_path, small=text)
    result = check(tmp_path)
    assert result.returncode == 2
    found = lines(result.stderr)
    assert [line.split(": ")[1] for line in found] == [
        "model.layers[1]", "train.weight_bits", "target.memory.flash"], found
    assert "dataset has 10 classes" in found[0]
    assert "qat.weight_bits" in found[1]
    assert "needs at least" in found[2]


def test_a_broken_section_keeps_its_readers_quiet(tmp_path: Path):
    """The device and budget checks read the target: with the target itself broken they
    would judge a default, so only the schema error is reported there."""
    project(tmp_path, small=manifest("small", ("device: host", "device: hsot"),
                                     ("flash: 512KiB", "flash: 1KiB")))
    result = check(tmp_path)
    assert result.returncode == 2
    found = lines(result.stderr)
    assert len(found) == 1 and "target.device" in found[0], found
