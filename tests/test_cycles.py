"""The QEMU plugin's Cortex-M4 cycle model against sequences counted by hand from the TRM's
table (ARM DDI 0439B §3.3; templates/tools/insn_count.c lists the model and its limits).

Each sequence is a Thumb-2 assembly function whose measured part starts at a block
boundary (reached by a branch, so no neighbour effect leaks in from the set-up) and ends at
`<name>_stop`. P, the taken-branch refill, is 2 and a divide 7 in the model. Also: per-layer
segments of the generated KAT firmware add up to its whole-inference count.

Skips (with the reason) when arm-none-eabi-gcc / newlib / qemu-system-arm are absent.
"""

from __future__ import annotations

import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from edgebuild.codegen import project as codegen
from edgebuild.targets import toolchain

try:  # tests/ as a package or as plain rootdir modules
    from tests.test_golden import tiny_spec
    from tests.test_toolchain import BUILD_FLAGS, link_script, plugin, tools  # noqa: F401
except ImportError:
    from test_golden import tiny_spec
    from test_toolchain import BUILD_FLAGS, link_script, plugin, tools  # noqa: F401

RUN_TIMEOUT_S = 30
P = 2  # REFILL_CYCLES
DIV = 7  # DIV_CYCLES


@dataclass(frozen=True)
class Sequence:
    """Assembly run between `<name>` + set-up and `<name>_stop`; r0 points at 16 words."""

    setup: str
    body: str
    instructions: int
    cycles: int
    why: str


SEQUENCES = {
    "adds10": Sequence("", "adds r1, r1, #1\n" * 10, 10, 10, "10 data processing x 1"),
    "add_w10": Sequence("", "add.w r1, r1, #1\n" * 10, 10, 10, "32-bit encodings: 1 each"),
    "ldr_ldr_independent": Sequence(
        "", "ldr r1, [r0]\nldr r2, [r0, #4]\n", 2, 3, "2, then 1: pipelined"),
    "ldr_ldr_dependent": Sequence(
        "str r0, [r0]\n", "ldr r1, [r0]\nldr r2, [r1, #4]\n", 2, 4,
        "2 + 2: the second address is the first load's result"),
    "ldrb_ldrsh_ldr": Sequence(
        "", "ldrb r1, [r0, #1]\nldrsh r2, [r0, #2]\nldr.w r3, [r0, #8]\n", 3, 4,
        "2 + 1 + 1: sizes and encodings pipeline alike"),
    "alu_then_ldr": Sequence(
        "", "adds r0, r0, #4\nldr r1, [r0]\n", 2, 4,
        "1 + 2 + 1: the address was computed by the previous instruction"),
    "str_imm": Sequence("", "str r1, [r0]\nstr r1, [r0, #4]\nstrb r1, [r0, #9]\n", 3, 3,
                        "stores with an immediate offset: 1 each"),
    "str_reg": Sequence("movs r2, #4\n", "str r1, [r0, r2]\n", 1, 2,
                        "a register-offset store: 2"),
    "ldr_str_reg": Sequence("movs r2, #4\n", "ldr r1, [r0]\nstr r1, [r0, r2]\n", 2, 3,
                            "2 + 1: a register-offset store pipelines after a load"),
    "str_then_ldr": Sequence("", "str r1, [r0]\nldr r2, [r0, #4]\n", 2, 3,
                             "1 + 2: nothing pipelines after a store"),
    "ldrd_ldm": Sequence("mov r4, r0\n", "ldrd r1, r2, [r0]\nldm r4, {r1, r2, r3}\n", 2, 7,
                         "LDRD 3 + LDM 1 + 3"),
    "push_pop": Sequence("", "push {r4, r5, r6}\npop {r4, r5, r6}\n", 2, 8, "(1 + 3) x 2"),
    "mul_family": Sequence(
        "movs r1, #3\nmovs r2, #5\n",
        "muls r3, r1, r3\nmla r3, r1, r2, r3\nsmull r4, r5, r1, r2\nsmlal r4, r5, r1, r2\n"
        "umlal r4, r5, r1, r2\nsmlad r3, r1, r2, r3\nsmlald r4, r5, r1, r2\nsxtb16 r3, r1\n"
        "sxtab16 r3, r3, r1\nsadd16 r3, r3, r1\nqadd r3, r3, r1\nsmuad r3, r1, r2\n", 12, 12,
        "every multiply and DSP instruction: 1"),
    "sdiv": Sequence("movs r1, #100\nmovs r2, #7\n", "sdiv r3, r1, r2\nudiv r3, r1, r2\n", 2,
                     2 * DIV, "divides: the 2-12 midpoint each"),
    "smlad_loop": Sequence(
        "movs r1, #3\nmovs r2, #5\n",
        "movs r3, #10\n1:\nsmlad r4, r1, r2, r4\nsubs r3, r3, #1\nbne 1b\n", 31,
        1 + 10 * 3 + 9 * P, "movs, 10 x (smlad + subs + bne), 9 taken back"),
    "branch_not_taken": Sequence("", "cmp r0, r0\nbne 1f\nnop\n1:\n", 3, 3,
                                 "cmp 1, bne not taken 1, nop 1"),
    "branch_taken": Sequence("", "cmp r0, r0\nbeq 1f\nnop\n1:\n", 2, 2 + P,
                             "cmp 1, beq taken 1 + P"),
    "cbz_both_ways": Sequence(
        "movs r1, #0\nmovs r2, #1\n", "cbz r2, 1f\ncbz r1, 1f\nnop\n1:\n", 2, 2 + P,
        "cbz not taken 1, cbz taken 1 + P"),
    "wide_branch": Sequence("", "b.w 1f\nnop\n1:\n", 1, 1 + P, "B.W: always 1 + P"),
    "call_return": Sequence("", "bl eb_leaf\n", 2, 2 * (1 + P), "BL 1 + P, BX LR 1 + P"),
    "pop_pc": Sequence("", "bl eb_pop_leaf\n", 3, (1 + P) + (1 + 2) + (1 + 2 + P),
                       "BL 1 + P, PUSH {r4, lr} 1 + 2, POP {r4, pc} 1 + 2 + P"),
    "it_folded": Sequence("", "cmp r0, #0\nit ne\nmovne r1, #1\n", 3, 2,
                          "IT after a 16-bit instruction folds: 1 + 0 + 1"),
    "it_not_folded": Sequence("", "cmp.w r0, #0\nit ne\nmovne r1, #1\n", 3, 3,
                              "IT after a 32-bit instruction: 1 + 1 + 1"),
    "it_conditional_return": Sequence(
        "", "cmp r0, #0\nit eq\nbxeq lr\nnop\n", 4, 3,
        "cmp 1, IT folded 0, BX in an IT block not taken 1, nop 1"),
    "fpu": Sequence(
        "vmov.f32 s1, #1.0\n",
        "vadd.f32 s0, s1, s1\nvmla.f32 s0, s1, s1\nvdiv.f32 s2, s0, s1\nvldr s3, [r0]\n", 4,
        1 + 3 + 14 + 2, "VADD 1, VMLA 3, VDIV 14, VLDR 2"),
}


def assembly() -> str:
    """Every sequence as a function: set-up, a branch to the measured part, `<name>_stop`."""
    parts = [".syntax unified", ".thumb", ".text",
             ".thumb_func\n.global eb_leaf\neb_leaf:\nbx lr",
             ".thumb_func\n.global eb_pop_leaf\neb_pop_leaf:\npush {r4, lr}\npop {r4, pc}"]
    for name, sequence in SEQUENCES.items():
        parts.append(textwrap.dedent(f"""\
            .balign 4
            .thumb_func
            .global {name}
            {name}:
            push {{r4, r5, r6, lr}}
            {sequence.setup}b.w {name}_start
            .global {name}_start
            {name}_start:
            {sequence.body}.global {name}_stop
            {name}_stop:
            pop {{r4, r5, r6, pc}}
            """))
    return "\n".join(parts) + "\n"


def main_c() -> str:
    calls = "\n".join(f"    {name}(words);" for name in SEQUENCES)
    declarations = "\n".join(f"void {name}(int32_t *words);" for name in SEQUENCES)
    return f"""#include <stdint.h>
{declarations}
static int32_t words[16] = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}};
int main(void)
{{
{calls}
    return 0;
}}
"""


@pytest.fixture(scope="module")
def sequences_elf(tools, link_script, tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("cycles")
    (work / "sequences.S").write_text(assembly())
    (work / "main.c").write_text(main_c())
    return toolchain.build_firmware(tools, [work / "main.c", work / "sequences.S"], link_script,
                                    work / "sequences.elf", flags=BUILD_FLAGS)


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_hand_counted_sequence(tools, plugin, sequences_elf, name):
    sequence = SEQUENCES[name]
    start = toolchain.symbol_address(tools.nm, sequences_elf, f"{name}_start")
    stop = toolchain.symbol_address(tools.nm, sequences_elf, f"{name}_stop")
    run = toolchain.run_qemu(tools, sequences_elf, timeout=RUN_TIMEOUT_S, plugin=plugin,
                             start=start, stop=stop)
    assert run.exit_code == 0, run.stderr
    assert (run.instructions, run.cycles) == (sequence.instructions, sequence.cycles), \
        sequence.why


def test_layer_marker_splits_and_costs_nothing(tools, plugin, link_script, tmp_path):
    """Segments at each marker call add up to the total; the marker's call is not counted."""
    source = """
        #include <stdint.h>
        __attribute__((noinline)) void eb_marker_start(void) { __asm__ volatile(""); }
        __attribute__((noinline)) void eb_marker_stop(void) { __asm__ volatile(""); }
        __attribute__((noinline)) void eb_marker_layer(void) { __asm__ volatile(""); }
        __attribute__((noinline)) void work(int n) { while (n--) { __asm__ volatile(""); } }
        int main(void)
        {
            eb_marker_start();
            eb_marker_layer();
            work(10);
            eb_marker_layer();
            work(20);
            eb_marker_layer();
            eb_marker_stop();
            return 0;
        }
    """
    (tmp_path / "marks.c").write_text(textwrap.dedent(source))
    elf = toolchain.build_firmware(tools, [tmp_path / "marks.c"], link_script,
                                   tmp_path / "marks.elf", flags=BUILD_FLAGS)
    address = {name: toolchain.symbol_address(tools.nm, elf, f"eb_marker_{name}")
               for name in ("start", "stop", "layer")}
    marked = toolchain.run_qemu(tools, elf, timeout=RUN_TIMEOUT_S, plugin=plugin,
                                start=address["start"], stop=address["stop"],
                                layer=address["layer"])
    plain = toolchain.run_qemu(tools, elf, timeout=RUN_TIMEOUT_S, plugin=plugin,
                               start=address["start"], stop=address["stop"])
    assert len(marked.segments) == 4
    assert sum(s.instructions for s in marked.segments) == marked.instructions
    assert sum(s.cycles for s in marked.segments) == marked.cycles
    # three calls of the marker, 2 instructions (BL, BX LR) and 2 x (1 + P) cycles each
    assert plain.instructions - marked.instructions == 3 * 2
    assert plain.cycles - marked.cycles == 3 * 2 * (1 + P)
    work10, work20 = marked.segments[1], marked.segments[2]  # the same loop, 10 more times
    assert work20.instructions > work10.instructions > 10
    assert (work20.instructions - work10.instructions) % 10 == 0


def test_layers_of_the_kat_firmware_add_up(tools, plugin, tmp_path):
    """The generated KAT firmware marks each layer: one segment per planned step between
    the call into cnn_run and its return, adding up to the whole inference."""
    spec = tiny_spec()
    for relative, text in codegen.render(spec).items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    make = subprocess.run(["make", "-s", "m4"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert make.returncode == 0, make.stderr
    elf = tmp_path / "build" / "cnn_kat_m4.elf"
    address = {name: toolchain.symbol_address(tools.nm, elf, f"eb_marker_{name}")
               for name in ("start", "stop", "layer")}
    run = toolchain.run_qemu(tools, elf, timeout=RUN_TIMEOUT_S, plugin=plugin,
                             start=address["start"], stop=address["stop"],
                             layer=address["layer"])
    assert run.exit_code == 0, run.stdout + run.stderr
    assert len(run.segments) == len(spec.plan.steps) + 2
    assert sum(s.instructions for s in run.segments) == run.instructions
    assert sum(s.cycles for s in run.segments) == run.cycles
    outside = run.segments[0].instructions + run.segments[-1].instructions
    assert outside < 20, run.segments  # the calls into cnn_run and back: a few instructions
    assert all(s.instructions > 0 for s in run.segments[1:-1])
    assert run.instructions < run.cycles < 2 * run.instructions
