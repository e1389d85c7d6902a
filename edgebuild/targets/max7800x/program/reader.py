"""Reading an MSDK CNN project back into the canonical program (program.Program.canonical's
form): what a MAX7800x project does to the accelerator, whoever wrote it — edgebuild, the
vendor's synthesis tool, or a developer who edited one by hand.

The reader understands the C the vendor's projects are written in, no more: literal 32-bit
volatile stores, `#define NAME { ... }` initializers, arrays initialized from them, and calls
with literal addresses. It reads
- registers: the final value of each store in cnn_init() and cnn_configure() (a register
  written twice ends with its last value, as on the device);
- start: cnn_start()'s stores, in order (their order starts the quadrants);
- kernels: the KERNELS table of weights.h, (address, length, words...) runs ended by 0;
- bias: every memcpy_8to32(address, array, ...) of cnn.c, the array's bytes one per word;
- input: main.c's load_input(): memcpy32(address, array, count) and literal stores;
- expected: SAMPLE_OUTPUT of sampleoutput.h, (address, mask, length, words...) runs ended by 0.
Anything else in the files (timers, clocks, printing) does not change the program.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from edgebuild.core import boundedjson
from edgebuild.targets.max7800x.program.program import JSONProgram

SOURCES = ("cnn.c", "weights.h", "main.c", "sampledata.h", "sampleoutput.h")
PARTS = ("registers", "start", "kernels", "bias", "input", "expected")
MAX_SOURCE_BYTES = 64 * 1024 * 1024  # one C file of a project (the largest izer output: MBs)
_NUMBER = r"(?:0[xX][0-9a-fA-F]+|\d+)"
_STORE = re.compile(r"\*\s*\(\s*\(\s*volatile\s+uint32_t\s*\*\s*\)\s*(" + _NUMBER + r")\s*\)"
                    r"\s*=\s*(" + _NUMBER + r")[uUlL]*\s*;")
_VALUE = re.compile(r"-?" + _NUMBER)


class ProjectError(ValueError):
    """The path is not a readable MSDK CNN project or canonical program."""


def _code(text: str) -> str:
    """The text without comments (a register's comment may hold anything)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _body(code: str, function: str) -> str:
    """The statements of `function`'s definition ("" when the file does not define it)."""
    found = re.search(r"\b" + re.escape(function) + r"\s*\([^;{)]*\)\s*\{", code)
    if found is None:
        return ""
    depth, end = 1, found.end()
    while depth and end < len(code):
        depth += {"{": 1, "}": -1}.get(code[end], 0)
        end += 1
    return code[found.end():end - 1]


def _hex(value: int) -> str:
    return f"0x{value & 0xFFFFFFFF:08x}"


def _stores(body: str) -> list[tuple[int, int]]:
    return [(int(a, 0), int(v, 0)) for a, v in _STORE.findall(body)]


def _values(text: str) -> list[int]:
    return [int(v, 0) & 0xFFFFFFFF for v in _VALUE.findall(text)]


def _initializer(code: str, name: str) -> list[int]:
    """The values of macro `name`, or of array `name` (its braces, or the macro it is set to)."""
    macro = re.search(r"#define\s+" + re.escape(name) + r"\s*\{(.*?)\}", code, flags=re.S)
    if macro is not None:
        return _values(macro.group(1).replace("\\\n", " "))
    array = re.search(r"\b" + re.escape(name) + r"\s*\[[^\]]*\]\s*=\s*(\{.*?\}|\w+)\s*;",
                      code, flags=re.S)
    if array is None:
        raise ProjectError(f"no values for {name!r} (neither a #define nor an array)")
    value = array.group(1)
    return _values(value) if value.startswith("{") else _initializer(code, value)


def _calls(body: str, function: str) -> list[list[str]]:
    """The argument texts of every call of `function` in `body`."""
    return [[arg.strip() for arg in args.split(",")]
            for args in re.findall(r"\b" + re.escape(function) + r"\s*\(([^;]*)\)\s*;", body)]


def _address(argument: str) -> int:
    """`(uint32_t *) 0x50400000` -> 0x50400000."""
    found = re.search(_NUMBER + r"\s*$", argument)
    if found is None:
        raise ProjectError(f"expected a literal address, found {argument!r}")
    return int(found.group(0), 0)


def _table(values: list[int], header: int) -> list[tuple[list[int], list[int]]]:
    """Runs of a 0-terminated table: (`header` values, the run's words); a run's last header
    value is its length."""
    runs, i = [], 0
    while i < len(values) and values[i] != 0:
        head = values[i:i + header]
        if len(head) < header:
            raise ProjectError("a table ends inside a run's header")
        words = values[i + header:i + header + head[-1]]
        runs.append((head, words))
        i += header + head[-1]
    return runs


def _registers(cnn: str) -> dict[str, str]:
    registers = {}
    for function in ("cnn_init", "cnn_configure"):
        for address, value in _stores(_body(cnn, function)):
            registers[_hex(address)] = _hex(value)
    return registers


def _kernels(weights: str) -> dict[str, str]:
    return {_hex(head[0] + 4 * k): _hex(word)
            for head, words in _table(_initializer(weights, "KERNELS"), 2)
            for k, word in enumerate(words)}


def _bias(cnn: str, everything: str) -> dict[str, str]:
    bias = {}
    for args in _calls(_body(cnn, "cnn_load_bias"), "memcpy_8to32"):
        address = _address(args[0])
        for k, value in enumerate(_initializer(everything, args[1])):
            bias[_hex(address + 4 * k)] = f"0x{value & 0xFF:02x}"
    return bias


def _input(main: str, everything: str) -> dict[str, str]:
    body = _body(main, "load_input")
    data = {}
    for args in _calls(body, "memcpy32"):
        address, words = _address(args[0]), _initializer(everything, args[1])
        count = int(args[2], 0)
        if count > len(words):
            raise ProjectError(f"load_input copies {count} words of {args[1]}, which has "
                               f"{len(words)}")
        data.update({_hex(address + 4 * k): _hex(words[k]) for k in range(count)})
    data.update({_hex(a): _hex(v) for a, v in _stores(body)})
    return data


def _expected(output: str) -> dict[str, list[str]]:
    return {_hex(head[0] + 4 * k): [_hex(word), _hex(head[1])]
            for head, words in _table(_initializer(output, "SAMPLE_OUTPUT"), 3)
            for k, word in enumerate(words)}


def read(project: Path) -> JSONProgram:
    """The canonical program of the MSDK project in directory `project`."""
    missing = [name for name in SOURCES if not (project / name).is_file()]
    if missing:
        raise ProjectError(f"{project}: not an MSDK CNN project (no {', '.join(missing)})")
    code = {name: _code(_source(project / name)) for name in SOURCES}
    cnn, main = code["cnn.c"], code["main.c"]
    everything = "\n".join(code.values())
    return {"registers": _registers(cnn),
            "start": [[_hex(a), _hex(v)] for a, v in _stores(_body(cnn, "cnn_start"))],
            "kernels": _kernels(code["weights.h"]), "bias": _bias(cnn, everything),
            "input": _input(main, everything), "expected": _expected(code["sampleoutput.h"])}


def _source(path: Path) -> str:
    """One C file of the project, refused above MAX_SOURCE_BYTES (izer writes a few MB for
    the largest networks; the regexes below are linear, a gigabyte still takes minutes)."""
    with open(path, "rb") as handle:
        raw = handle.read(MAX_SOURCE_BYTES + 1)
    if len(raw) > MAX_SOURCE_BYTES:
        raise ProjectError(f"{path}: larger than {MAX_SOURCE_BYTES} bytes; not a generated "
                           "MSDK CNN file")
    return raw.decode(errors="replace")


def load(path: Path) -> JSONProgram:
    """A project directory, or a canonical program as JSON (`.json`, or gzip `.json.gz`)."""
    if path.is_dir():
        return read(path)
    if not path.is_file():
        raise ProjectError(f"{path}: no such project directory or JSON file")
    try:
        with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as handle:
            raw = handle.read(boundedjson.MAX_BYTES + 1)  # a gzip bomb stops here, not at its end
        document = boundedjson.loads(raw)
    except (ValueError, OSError, EOFError) as exc:
        raise ProjectError(f"{path}: not a canonical program as JSON within the limits "
                           f"({exc})") from None
    if not isinstance(document, dict) or not set(PARTS) <= set(document):
        raise ProjectError(f"{path}: not a canonical program (expected the keys "
                           f"{', '.join(PARTS)})")
    return document
