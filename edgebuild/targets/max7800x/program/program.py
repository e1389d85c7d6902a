"""The accelerator program: everything the generated MSDK project writes to the device, as
one record, and its canonical form (the facts two generators must agree on, whatever their
C formatting): final register values, the start sequence, kernel memory, bias memory, the
sample input and the expected output words with masks. The canonical form is the JSON
`ai8x_program.py` (../shared/tools) makes of a vendor project, so equality with committed
vendor JSON is equality with the vendor's program.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from edgebuild.targets.max7800x.program.registers import Wait, Write

JSONProgram = dict[str, object]


@dataclass(frozen=True)
class Program:
    init: tuple[Write | Wait, ...]  # cnn_init()
    configure: tuple[tuple[str, tuple[Write, ...]], ...]  # cnn_configure(), per layer
    start: tuple[Write, ...]  # cnn_start()
    kernels: tuple[tuple[int, tuple[int, ...]], ...]  # (address, words) runs of KERNELS
    bias: tuple[tuple[int, tuple[int, ...]], ...]  # (address, bytes) per quadrant
    input: tuple[tuple[int, tuple[int, ...]], ...]  # (address, words) runs
    expected: tuple[tuple[int, int, int], ...]  # (address, value, mask) by address
    summary: tuple[str, ...] = ()  # one line per layer, for the C comments
    output_shape: tuple[int, int, int] = (0, 1, 1)  # the last layer's output (C, H, W)
    output_bits: int = 8  # 8, or 32 for a wide (accumulator) output
    input_shape: tuple[int, int, int] = (0, 1, 1)  # the sample input (C, H, W)
    input_format: str = "HWC"  # how the first layer reads it: "HWC" or "CHW"
    # input through the FIFOs (program.stream) instead of `input`: the FIFO set-up that ends
    # cnn_configure(), and the words main.c writes to each FIFO (no data memory state: the
    # canonical form has no input then, as of the vendor's FIFO projects)
    fifo_setup: tuple[Write, ...] = ()
    fifo: tuple[tuple[int, ...], ...] = ()

    @property
    def bias_bytes(self) -> int:
        return sum(len(values) for _, values in self.bias)

    @property
    def kernel_words(self) -> int:
        return sum(len(words) for _, words in self.kernels)

    def canonical(self) -> JSONProgram:
        registers = {}
        for write in self.init + tuple(w for _, layer in self.configure for w in layer) \
                + self.fifo_setup:
            if isinstance(write, Write):  # a wait changes nothing
                registers[_hex(write.address)] = _hex(write.value)
        return {
            "registers": registers,
            "start": [[_hex(w.address), _hex(w.value)] for w in self.start],
            "kernels": _runs(self.kernels, _hex),
            "bias": _runs(self.bias, lambda v: f"0x{v & 0xFF:02x}"),
            "input": _runs(self.input, _hex),
            "expected": {_hex(a): [_hex(v), _hex(m)] for a, v, m in self.expected},
        }


def _hex(value: int) -> str:
    return f"0x{value & 0xFFFFFFFF:08x}"


def _runs(runs: tuple[tuple[int, tuple[int, ...]], ...], fmt: Callable[[int], str]
          ) -> dict[str, str]:
    return {_hex(address + 4 * k): fmt(v) for address, values in runs
            for k, v in enumerate(values)}


DIGESTED = ("kernels", "input", "expected")  # parts a canonical JSON may store as digests


def digest(values: dict[str, object]) -> dict[str, object]:
    """A part's digest: sha256 of sorted `address value` lines (an expected word's value and
    mask joined by a space) and its word count. A canonical JSON may hold a large kernel
    image, input or expected output as `<part>_digest` (with `<part>` empty), as the izer
    corpus stores the vendor's big networks: the comparison then compares digests."""
    import hashlib

    text = "".join(f"{address} {_text(values[address])}\n" for address in sorted(values))
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(), "words": len(values)}


def _text(value: object) -> str:
    return " ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def _stored_digest(program: JSONProgram, part: str) -> dict[str, object] | None:
    found = program.get(f"{part}_digest")
    return found if isinstance(found, dict) and found.get("sha256") else None


def words(program: JSONProgram, part: str) -> int:
    """A part's word (entry) count, from its digest when it is stored as one."""
    stored = _stored_digest(program, part)
    values = program.get(part)
    if stored is not None:
        return int(str(stored.get("words", 0)))
    return len(values) if isinstance(values, dict | list) else 0


def differences(a: JSONProgram, b: JSONProgram, limit: int = 40) -> list[str]:
    """Every fact on which two canonical programs disagree (empty: identical); a part one
    of them stores as a digest is compared by digest (one line when they differ)."""
    found = []
    for part in ("registers", "kernels", "bias", "input", "expected"):
        x, y = a.get(part, {}), b.get(part, {})
        assert isinstance(x, dict) and isinstance(y, dict)
        stored = _stored_digest(a, part), _stored_digest(b, part)
        if part in DIGESTED and (stored[0] or stored[1]):
            mine, theirs = stored[0] or digest(x), stored[1] or digest(y)
            if (mine["sha256"], mine["words"]) != (theirs["sha256"], theirs["words"]):
                found.append(f"{part}: digest {mine['sha256']} ({mine['words']} words) != "
                             f"{theirs['sha256']} ({theirs['words']} words)")
            continue
        found += [f"{part} {key}: {x.get(key)} != {y.get(key)}"
                  for key in sorted(set(x) | set(y)) if x.get(key) != y.get(key)]
    if a.get("start") != b.get("start"):
        found.append(f"start: {a.get('start')} != {b.get('start')}")
    return found[:limit] if limit else found
