"""The C text of an accelerator program: the MSDK project a MAX7800x developer drops into
the vendor's SDK (cnn.c, cnn.h, weights.h, sampledata.h, sampleoutput.h, main.c, Makefile,
project.mk), rendered from jinja2 templates (templates/max7800x/).

The form follows the vendor's generated projects, because tools and people read it that
way: every register write is a literal volatile 32-bit store, one per line with a comment
(`ai8x_program.py`, and edgebuild's own `reader`, recover the device state from them); the
kernel-memory image is a `KERNELS` macro of (address, length, words...) runs ended by 0;
each quadrant's bias bytes a `BIAS_<q>` array copied by `memcpy_8to32`; the sample input
`SAMPLE_INPUT_<k>` arrays copied by `memcpy32` in main.c's `load_input()` (a network that
streams its input: written word by word to FIFO k's data register after cnn_start(), waiting
while the FIFO is full); the expected
output a `SAMPLE_OUTPUT` macro of (address, mask, length, words...) runs ended by 0.

Everything here formats; what the words are is decided in `build` (a `Program`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import groupby

from edgebuild.targets.max7800x.program.device import Device
from edgebuild.targets.max7800x.program.program import Program
from edgebuild.targets.max7800x.program.registers import Wait, Write

FILES = ("Makefile", "cnn.c", "cnn.h", "main.c", "project.mk", "sampledata.h",
         "sampleoutput.h", "weights.h")
WORDS_PER_LINE = 8  # 32-bit values per line of a macro
BYTES_PER_LINE = 16  # bias bytes per line


@dataclass(frozen=True)
class Clocks:
    """How main.c and cnn_enable() clock the core and the accelerator, as the vendor's
    projects for the part do. MAX78000: the core on its 100 MHz oscillator, the accelerator
    on the APB clock. MAX78002: the core on 120 MHz, the accelerator on the 200 MHz PLL
    (started by main.c; cnn_enable() waits until it is ready), divided by 4 while the
    program loads and by 1 while it runs; powering its memories takes a delay."""

    core: str  # the core clock, for a comment
    source: str  # the accelerator's clock: MXC_S_GCR_PCLKDIV_CNNCLKSEL_<source>
    source_name: str  # ... for a comment
    load_divider: int  # while loading and after the run
    run_divider: int  # while the network runs
    pll: bool  # main.c starts (and stops) the PLL the accelerator runs on
    power_delay_ms: int  # after power is restored, before isolation is lifted (0: none)


CLOCKS = {"ai85": Clocks("100 MHz", "PCLK", "APB (50 MHz)", 1, 1, False, 0),
          "ai87": Clocks("120 MHz", "IPLL", "PLL (200 MHz)", 4, 1, True, 10)}


@dataclass(frozen=True)
class Project:
    """What the project says about itself beyond the program: the manifest's name, the part
    (MAX78000, MAX78002) and its SDK board."""

    name: str
    part: str
    board: str = "EvKit_V1"


def store(write: Write | Wait) -> str:
    """`*((volatile uint32_t *) 0x...) = 0x...; // comment`: the one form of a register write
    (a wait: `while ((*(...) & mask) != mask);`, which a reader of stores passes over)."""
    register = f"*((volatile uint32_t *) 0x{write.address:08x})"
    if isinstance(write, Wait):
        return f"while (({register} & 0x{write.mask:08x}) != 0x{write.mask:08x}); " \
               f"// {write.comment}"
    return f"{register} = 0x{write.value:08x}; // {write.comment}"


def macro_lines(values: Iterable[int], fmt: Callable[[int], str], per_line: int) -> list[str]:
    """The body lines of a `#define NAME { \\ ... }` initializer, each ending in a backslash."""
    text = [fmt(v) for v in values]
    rows = [", ".join(text[i:i + per_line]) for i in range(0, len(text), per_line)]
    return [f"{row}{',' if i < len(rows) - 1 else ''} \\" for i, row in enumerate(rows)]


def _word(value: int) -> str:
    return f"0x{value & 0xFFFFFFFF:08x}"


def _byte(value: int) -> str:
    return f"0x{value & 0xFF:02x}"


def kernel_table(program: Program) -> list[int]:
    """KERNELS: per run its address, its length in words, the words; 0 ends the table."""
    table: list[int] = []
    for address, words in program.kernels:
        table += [address, len(words), *words]
    return table + [0]


def output_table(program: Program) -> list[int]:
    """SAMPLE_OUTPUT: runs of consecutive words under one mask, each as address, mask,
    length, values; 0 ends the table."""
    table: list[int] = []
    for (address, mask, _), run in _runs(program.expected):
        values = [value for _, value, _ in run]
        table += [address, mask, len(values), *values]
    return table + [0]


def _runs(expected: tuple[tuple[int, int, int], ...]
          ) -> list[tuple[tuple[int, int, int], list[tuple[int, int, int]]]]:
    """Group (address, value, mask) entries into runs of consecutive addresses, same mask."""
    keyed = [((address - 4 * i, mask), (address, value, mask))
             for i, (address, value, mask) in enumerate(expected)]
    found = []
    for (_, mask), group in groupby(keyed, key=lambda item: item[0]):
        run = [entry for _, entry in group]
        found.append(((run[0][0], mask, len(run)), run))
    return found


def unload_runs(program: Program) -> list[tuple[int, int]]:
    """(address, words) that cnn_unload() copies: the expected output's consecutive words."""
    runs: list[tuple[int, int]] = []
    for address, _, _ in program.expected:
        if runs and runs[-1][0] + 4 * runs[-1][1] == address:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((address, 1))
    return runs


def configure_blocks(dev: Device, program: Program) -> list[dict[str, object]]:
    """cnn_configure(): per layer and quadrant, its register stores."""
    blocks: list[dict[str, object]] = []
    for index, (name, writes) in enumerate(program.configure):
        for quadrant, group in groupby(writes, key=lambda w: dev.quadrant(w.address)):
            blocks.append({"layer": index, "name": name, "quadrant": quadrant,
                           "stores": [store(w) for w in group]})
    return blocks


def context(dev: Device, program: Program, project: Project) -> dict[str, object]:
    """Everything the templates use (they hold loops, not logic)."""
    quadrants = sorted({dev.quadrant(w.address) for w in program.start})
    mask = sum(1 << q for q in quadrants)
    channels, rows, columns = program.input_shape
    out_channels, out_rows, out_columns = program.output_shape
    return {
        "name": project.name, "part": project.part, "board": project.board,
        "target_lc": project.part.lower(), "layers": list(program.summary),
        "input_format": program.input_format,
        "input_comment": f"{channels}-channel {rows}x{columns} data input, "
                         f"{program.input_format}",
        "output_comment": f"{out_channels}x{out_rows}x{out_columns}, "
                          f"{program.output_bits}-bit data",
        "control": dev.control(quadrants[0], 0), "first_quadrant": quadrants[0],
        "controls": [dev.control(q, 0) for q in quadrants], "clock": CLOCKS[dev.family],
        "power_mask": mask, "iso_mask": ~mask & (1 << dev.groups) - 1,
        "init": [store(w) for w in program.init],
        "configure": configure_blocks(dev, program),
        "start": [store(w) for w in program.start[:-1]], "master": store(program.start[-1]),
        "kernels": macro_lines(kernel_table(program), _word, WORDS_PER_LINE),
        "bias": [{"quadrant": dev.quadrant(address), "address": f"0x{address:08x}",
                  "count": len(values), "lines": macro_lines(values, _byte, BYTES_PER_LINE)}
                 for address, values in program.bias],
        "inputs": [{"address": f"0x{address:08x}", "count": len(words),
                    "lines": macro_lines(words, _word, WORDS_PER_LINE)}
                   for address, words in program.input],
        "fifo_setup": [store(w) for w in program.fifo_setup],
        "fifo_status": f"0x{dev.fifo_control + 4:08x}",
        "fifos": [{"address": f"0x{dev.fifo_control + 8 + 4 * k:08x}", "count": len(words),
                   "full": f"{1 << k}",
                   "lines": macro_lines(words, _word, WORDS_PER_LINE)}
                  for k, words in enumerate(program.fifo)],
        "expected": macro_lines(output_table(program), _word, WORDS_PER_LINE),
        "unload": [{"address": f"0x{address:08x}", "words": words}
                   for address, words in unload_runs(program)],
        "output_words": len(program.expected), "outputs": out_channels * out_rows * out_columns,
        "wide": program.output_bits == 32,
        "kernel_bytes": program.kernel_words * 4, "bias_bytes": program.bias_bytes,
    }


def render(dev: Device, program: Program, project: Project) -> dict[str, str]:
    """Every file of the MSDK project: name -> text."""
    from edgebuild.codegen.project import environment

    # block tags on lines of their own leave no blank lines or indentation behind
    env = environment().overlay(trim_blocks=True, lstrip_blocks=True)
    values = context(dev, program, project)
    return {name: env.get_template(f"max7800x/{name}.j2").render(values) for name in FILES}
