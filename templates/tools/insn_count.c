/* edgebuild instruction and cycle counter: a QEMU TCG plugin (plugin API version 1, QEMU 7.2).
 *
 *   qemu-system-arm ... -plugin ./insn_count.so,start=0xADDR,stop=0xADDR,out=PATH[,layer=0xADDR]
 *
 * Counts the guest instructions executed from the first execution of the instruction at
 * `start` (included) up to the first later execution of the instruction at `stop` (not
 * included), estimates the Cortex-M4 cycles they take (the model below), and writes both to
 * `out` at exit: a line "<instructions> <cycles>", then, with `layer`, one such line per
 * segment between `start`, each execution of the function at `layer` and `stop`. The layer
 * marker costs nothing: its body (the translation block at `layer`) and every BL to it are
 * left out of every count, so the segments add up to the total exactly. Nothing is written
 * when `start` or `stop` is never reached (a missing file means "markers not hit"; the
 * reason goes to stderr: qemu_plugin_outs would need `-d plugin` to show anything).
 *
 * Counting: every translated instruction gets two inline adds (no helper call: fast), one
 * to the instruction counter and one of its cycle cost to the cycle counter; only the marker
 * instructions, conditional branches and block entries get callbacks. Marker snapshots see
 * the counters in the same state relative to their own instruction, so differences are
 * exact whatever order QEMU emits inline ops and callbacks in. There is no timer or interrupt
 * in edgebuild firmware, so a given binary executes the same instruction stream, and gives
 * the same counts, on every run.
 *
 * The cycle model: ARM DDI 0439B, Cortex-M4 Technical Reference Manual, §3.3 (instruction
 * set summary, load/store timings) and §7.2 (FPU instructions). Each instruction is decoded
 * once, when QEMU translates it, from its Thumb-2 encoding:
 *   data processing, MOVW/MOVT, shifts, extends, bit fields, saturation, CLZ, REV     1
 *   MUL, MLA, MLS, SMULL, UMULL, SMLAL, UMLAL and every DSP instruction (SMLAD, SMLALD,
 *     SMUAD, SMLABB, SXTB16, SXTAB16, SADD16, QADD, SEL, USADA8, ...)               1
 *   SDIV, UDIV: 2 to 12 by early termination on the operands, which plugin API v1 cannot
 *     read: DIV_CYCLES = 7, the midpoint (a division is off by at most 5 cycles)
 *   LDR/LDRB/LDRH/LDRSB/LDRSH/LDREX/STREX: 2, or 1 right after a single load whose loaded
 *     register does not form this one's address (address and data phases pipelined)
 *   STR/STRB/STRH with an immediate offset: 1 (the write buffer takes the data); with a
 *     register offset: 2, or 1 right after an independent single load
 *   LDRD, STRD: 3 (1 + N, not pipelined); LDM, STM, PUSH, POP: 1 + N (N registers)
 *   a load or store whose address register the previous data-processing instruction wrote:
 *     +1 (no forwarding path to the address generation)
 *   B, B.W, BL, BX, BLX, MOV/ADD to PC: 1 + P; POP/LDM with PC: 1 + N + P; LDR to PC: 2 + P;
 *     TBB, TBH: 2 + P
 *   B<cond>, CBZ, CBNZ, and any PC-writing instruction in an IT block: as above without P
 *     when not taken, with P when taken (taken: the next block executed does not start at
 *     the fall-through address)
 *   P, the pipeline refill: 1 to 3 by alignment, width and speculation: REFILL_CYCLES = 2
 *   IT: 0 when folded onto a preceding 16-bit instruction, else 1
 *   FPU: VADD, VSUB, VMUL, VNMUL, VABS, VNEG, VCMP, VCVT, VMOV 1; VMLA, VMLS, VNMLA, VNMLS,
 *     VFMA, VFMS, VFNMA, VFNMS 3; VDIV, VSQRT 14; VLDR, VSTR, 2-register VMOV 2;
 *     VLDM, VSTM, VPUSH, VPOP 1 + N (N 32-bit words)
 *   anything else (hints, barriers, MRS/MSR, CPS, BKPT): 1
 * Limits, deliberately: zero wait states (code and data as fast as the TRM's tables
 * assume: no flash wait states, no flash prefetch or cache effects), no bus contention (a
 * literal load's fetch contention, a full write buffer), aligned accesses (an unaligned
 * LDR/STR costs 1-2 more on silicon), a fixed P and DIV_CYCLES, a skipped conditional
 * instruction in an IT block costs what it would executed. Neighbour effects (pipelined
 * loads, the address stall, IT folding) look at the previous instruction of the same
 * translation block; the first instruction of a block follows a branch in the firmware
 * this runs (a block ends at every branch), except when QEMU splits straight-line code at a
 * page boundary, where one such effect can be missed. So the figure is an estimate for a
 * core running from zero-wait-state memory, exact to the table for straight-line code:
 * tests/test_cycles.py checks hand-counted sequences.
 *
 * Debian ships no qemu-plugin.h: the few API-v1 declarations used are copied by hand.
 * Build: gcc -shared -fPIC -O2 -o insn_count.so insn_count.c
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- QEMU plugin API, version 1 (include/qemu/qemu-plugin.h in QEMU 7.2) ---- */
#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t; /* only passed through by pointer here */
struct qemu_plugin_tb;
struct qemu_plugin_insn;

enum qemu_plugin_cb_flags {
    QEMU_PLUGIN_CB_NO_REGS,
    QEMU_PLUGIN_CB_R_REGS,
    QEMU_PLUGIN_CB_RW_REGS,
};

enum qemu_plugin_op {
    QEMU_PLUGIN_INLINE_ADD_U64,
};

typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
                                           qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
                                          qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
                                            qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn,
                                                enum qemu_plugin_op op, void *ptr,
                                                uint64_t imm);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb,
                                    void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;
QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv);

/* ---- the Cortex-M4 cycle model (see the top of this file) ---- */
enum { REFILL_CYCLES = 2, DIV_CYCLES = 7 };

enum kind {
    K_DATA,      /* data processing: writes `writes`, which an address may depend on */
    K_LOAD,      /* single load (LDR/LDRB/LDRH/LDRSB/LDRSH/LDREX, STREX): pipelines */
    K_STORE_IMM, /* single store, immediate offset */
    K_STORE_REG, /* single store, register offset */
    K_MEMORY,    /* LDRD/STRD, LDM/STM/PUSH/POP, VLDR/VSTR/VLDM/VSTM: not pipelined */
    K_IT,
    K_BRANCH,    /* writes the PC */
    K_OTHER,
};

#define REG(n) ((uint16_t)(1u << ((n) & 15u)))

typedef struct {
    unsigned size;      /* bytes: 2 or 4 */
    unsigned cycles;    /* cost before neighbour effects; a branch: when not taken */
    enum kind kind;
    uint16_t writes;    /* registers a K_DATA instruction writes */
    uint16_t address;   /* registers a load or store forms its address from */
    uint16_t loaded;    /* registers a K_LOAD writes */
    bool conditional;   /* a branch that may fall through (B<cond>, CBZ, CBNZ) */
    bool call;          /* BL, with its target */
    uint64_t target;
    unsigned it_count;  /* IT: the instructions of its block */
} insn_class;

static unsigned popcount16(unsigned bits)
{
    return (unsigned)__builtin_popcount(bits & 0xFFFFu);
}

static void branch(insn_class *c, unsigned cycles, bool conditional)
{
    c->kind = K_BRANCH;
    c->cycles = cycles;
    c->conditional = conditional;
}

static void load(insn_class *c, unsigned rt, uint16_t address)
{
    c->kind = K_LOAD;
    c->cycles = 2;
    c->loaded = REG(rt);
    c->address = address;
}

static void store(insn_class *c, bool register_offset, uint16_t address)
{
    c->kind = register_offset ? K_STORE_REG : K_STORE_IMM;
    c->cycles = register_offset ? 2 : 1;
    c->address = address;
}

static void memory(insn_class *c, unsigned cycles, uint16_t address)
{
    c->kind = K_MEMORY;
    c->cycles = cycles;
    c->address = address;
}

/* 16-bit: 010001xx special data processing and branch exchange */
static void special16(uint16_t hw, insn_class *c)
{
    const unsigned op = (hw >> 8) & 3, rd = ((hw >> 4) & 8) | (hw & 7);
    if (op == 3) { /* BX, BLX */
        branch(c, 1, false);
    } else if (op != 1 && rd == 15) { /* ADD PC / MOV PC */
        branch(c, 1, false);
    } else if (op != 1) {
        c->writes = REG(rd);
    }
}

/* 16-bit: 1011xxxx miscellaneous */
static void misc16(uint16_t hw, insn_class *c)
{
    if ((hw & 0xF500) == 0xB100) { /* CBZ, CBNZ */
        branch(c, 1, true);
    } else if ((hw & 0xFF00) == 0xB000) { /* ADD/SUB SP, #imm */
        c->writes = REG(13);
    } else if ((hw & 0xFF00) == 0xB200 || (hw & 0xFF00) == 0xBA00) { /* extend, reverse */
        c->writes = REG(hw & 7);
    } else if ((hw & 0xFE00) == 0xB400) { /* PUSH */
        memory(c, 1 + popcount16(hw & 0x1FF), REG(13));
    } else if ((hw & 0xFE00) == 0xBC00) { /* POP, with PC: a return */
        if (hw & 0x100) {
            branch(c, 1 + popcount16(hw & 0x1FF), false);
        } else {
            memory(c, 1 + popcount16(hw & 0xFF), REG(13));
        }
    } else if ((hw & 0xFF00) == 0xBF00 && (hw & 0xF) != 0) { /* IT */
        c->kind = K_IT;
        c->it_count = 4 - (unsigned)__builtin_ctz(hw & 0xF);
    } else { /* CPS, BKPT, hints */
        c->kind = K_OTHER;
    }
}

/* 16-bit loads and stores: 01001 literal, 0101 register offset, 011x/1000 immediate,
 * 1001 SP-relative */
static bool loadstore16(uint16_t hw, insn_class *c)
{
    const unsigned top4 = hw >> 12, rt = hw & 7, rn = (hw >> 3) & 7;
    if ((hw >> 11) == 0x09) {
        load(c, (hw >> 8) & 7, REG(15));
    } else if (top4 == 0x5) {
        const uint16_t address = REG(rn) | REG((hw >> 6) & 7);
        if (((hw >> 9) & 7) < 3) {
            store(c, true, address);
        } else {
            load(c, rt, address);
        }
    } else if (top4 == 0x6 || top4 == 0x7 || top4 == 0x8 || top4 == 0x9) {
        const bool sp = top4 == 0x9;
        const uint16_t address = sp ? REG(13) : REG(rn);
        if (hw & 0x800) {
            load(c, sp ? (hw >> 8) & 7 : rt, address);
        } else {
            store(c, false, address);
        }
    } else {
        return false;
    }
    return true;
}

static insn_class thumb16(uint16_t hw)
{
    insn_class c = {.size = 2, .cycles = 1, .kind = K_DATA};
    const unsigned top5 = hw >> 11;
    if (loadstore16(hw, &c)) {
        return c;
    }
    if (top5 <= 0x03 || top5 == 0x04 || top5 == 0x06 || top5 == 0x07) {
        c.writes = REG(top5 <= 0x03 ? hw & 7 : (hw >> 8) & 7); /* shift, add/sub, imm8 */
    } else if (top5 == 0x05) {
        /* CMP #imm8 */
    } else if ((hw >> 10) == 0x10) {
        const unsigned op = (hw >> 6) & 0xF; /* TST, CMP, CMN write no register */
        c.writes = (op == 8 || op == 10 || op == 11) ? 0 : REG(hw & 7);
    } else if ((hw >> 10) == 0x11) {
        special16(hw, &c);
    } else if (top5 == 0x14 || top5 == 0x15) { /* ADR, ADD Rd, SP, #imm */
        c.writes = REG((hw >> 8) & 7);
    } else if ((hw >> 12) == 0xB) {
        misc16(hw, &c);
    } else if (top5 == 0x18 || top5 == 0x19) { /* STM, LDM */
        memory(&c, 1 + popcount16(hw & 0xFF), REG((hw >> 8) & 7));
    } else if ((hw >> 12) == 0xD) { /* B<cond>; 1110 UDF, 1111 SVC */
        if (((hw >> 8) & 0xF) < 14) {
            branch(&c, 1, true);
        } else {
            c.kind = K_OTHER;
        }
    } else if (top5 == 0x1C) {
        branch(&c, 1, false);
    }
    return c;
}

/* 32-bit, op1 = 01, op2 = 00xx0xx: LDM/STM (PUSH.W, POP.W) */
static void multiple32(uint16_t hw1, uint16_t hw2, insn_class *c)
{
    const unsigned n = popcount16(hw2);
    if ((hw1 & 0x10) && (hw2 & 0x8000)) {
        branch(c, 1 + n, false);
        return;
    }
    memory(c, 1 + n, REG(hw1 & 0xF));
}

/* 32-bit, op1 = 01, op2 = 00xx1xx: LDRD/STRD, LDREX/STREX, TBB/TBH */
static void dual32(uint16_t hw1, uint16_t hw2, insn_class *c)
{
    const unsigned op1 = (hw1 >> 7) & 3, op2 = (hw1 >> 4) & 3, op3 = (hw2 >> 4) & 0xF;
    const uint16_t base = REG(hw1 & 0xF);
    if (op1 == 0 && op2 == 0) { /* STREX: pipelines as a load, writes its status */
        load(c, (hw2 >> 8) & 0xF, base);
    } else if (op1 == 0 && op2 == 1) { /* LDREX */
        load(c, hw2 >> 12, base);
    } else if (op1 == 1 && op2 == 1 && op3 <= 1) { /* TBB, TBH */
        branch(c, 2, false);
    } else if (op1 == 1 && op2 == 1) { /* LDREXB, LDREXH */
        load(c, hw2 >> 12, base);
    } else if (op1 == 1 && op2 == 0) { /* STREXB, STREXH */
        load(c, hw2 & 0xF, base);
    } else { /* LDRD, STRD */
        memory(c, 3, base);
    }
}

/* 32-bit, op1 = 11, op2 = 000xxx0 (stores) or 00xxxx1 (loads) */
static void single32(uint16_t hw1, uint16_t hw2, insn_class *c)
{
    const unsigned rn = hw1 & 0xF, rt = hw2 >> 12, size = (hw1 >> 5) & 3;
    const bool register_offset = rn != 15 && !(hw1 & 0x80) && (hw2 & 0x0FC0) == 0;
    const uint16_t address = REG(rn) | (register_offset ? REG(hw2 & 0xF) : 0);
    if (!(hw1 & 0x10)) {
        store(c, register_offset, address);
    } else if (rt == 15 && size == 2) { /* LDR PC */
        branch(c, 2, false);
    } else if (rt == 15) { /* PLD, PLI */
        c->kind = K_OTHER;
    } else {
        load(c, rt, address);
    }
}

/* 32-bit, op1 = 10 with hw2[15] = 1: branches and miscellaneous control */
static void control32(uint16_t hw1, uint16_t hw2, uint64_t vaddr, insn_class *c)
{
    const unsigned op = (hw2 >> 12) & 5;
    if (op == 0 && ((hw1 >> 7) & 7) != 7) { /* B<cond>.W */
        branch(c, 1, true);
    } else if (op == 1) { /* B.W */
        branch(c, 1, false);
    } else if (op == 5) { /* BL: target = PC + SignExtend(S:I1:I2:imm10:imm11:0) */
        const uint32_t s = (hw1 >> 10) & 1, j1 = (hw2 >> 13) & 1, j2 = (hw2 >> 11) & 1;
        const uint32_t i1 = !(j1 ^ s), i2 = !(j2 ^ s);
        uint32_t offset = (i1 << 23) | (i2 << 22) | ((uint32_t)(hw1 & 0x3FF) << 12)
                          | ((uint32_t)(hw2 & 0x7FF) << 1);
        if (s) {
            offset |= 0xFF000000u;
        }
        branch(c, 1, false);
        c->call = true;
        c->target = (uint32_t)(vaddr + 4 + offset);
    } else { /* MSR, MRS, hints, barriers */
        c->kind = K_OTHER;
    }
}

/* 32-bit, op1 = 11, op2 = 0111xxx: long multiplies (1 cycle) and divides */
static void long32(uint16_t hw1, uint16_t hw2, insn_class *c)
{
    const unsigned op1 = (hw1 >> 4) & 7, op2 = (hw2 >> 4) & 0xF;
    if ((op1 == 1 || op1 == 3) && op2 == 0xF) { /* SDIV, UDIV */
        c->cycles = DIV_CYCLES;
        c->writes = REG(hw2 >> 8);
    } else {
        c->writes = REG(hw2 >> 12) | REG(hw2 >> 8);
    }
}

/* FPv4-SP (coprocessors 10 and 11); any other coprocessor instruction: 1 */
static void fpu32(uint16_t hw1, uint16_t hw2, insn_class *c)
{
    static const unsigned data_cycles[16] = {3, 3, 1, 1, 3, 3, 1, 1, 14, 3, 3, 1, 14, 3, 3, 1};
    c->kind = K_OTHER;
    if (((hw2 >> 9) & 7) != 5) {
        return;
    }
    if ((hw1 & 0x0E00) == 0x0C00) { /* extension register loads/stores, 64-bit moves */
        if ((hw1 & 0x01E0) == 0x0040) {
            c->cycles = 2;
        } else if ((hw1 & 0x0120) == 0x0100) { /* VLDR, VSTR */
            memory(c, 2, REG(hw1 & 0xF));
        } else { /* VLDM, VSTM, VPUSH, VPOP */
            memory(c, 1 + (hw2 & 0xFF), REG(hw1 & 0xF));
        }
    } else if ((hw1 & 0x0F00) == 0x0E00 && !(hw2 & 0x10)) { /* data processing */
        const unsigned opc1 = (hw1 >> 4) & 0xF;
        const bool sqrt = opc1 == 0xB || opc1 == 0xF ? (hw1 & 0xF) == 1 && ((hw2 >> 6) & 3) == 3
                                                      : false;
        c->cycles = sqrt ? 14 : data_cycles[opc1];
    } else if ((hw1 & 0x0F10) == 0x0E10 && (hw2 >> 12) != 15) { /* VMOV/VMRS to a core reg */
        c->kind = K_DATA;
        c->writes = REG(hw2 >> 12);
    }
}

static insn_class thumb32(uint16_t hw1, uint16_t hw2, uint64_t vaddr)
{
    insn_class c = {.size = 4, .cycles = 1, .kind = K_DATA};
    const unsigned op1 = (hw1 >> 11) & 3, op2 = (hw1 >> 4) & 0x7F;
    const unsigned rd = (hw2 >> 8) & 0xF; /* data processing: Rd = 15 means a compare */
    if (op1 == 1 && (op2 & 0x64) == 0x00) {
        multiple32(hw1, hw2, &c);
    } else if (op1 == 1 && (op2 & 0x64) == 0x04) {
        dual32(hw1, hw2, &c);
    } else if ((op1 == 1 || op1 == 3) && (op2 & 0x40)) {
        fpu32(hw1, hw2, &c);
    } else if (op1 == 2 && (hw2 & 0x8000)) {
        control32(hw1, hw2, vaddr, &c);
    } else if (op1 == 3 && ((op2 & 0x71) == 0x00 || ((op2 & 0x61) == 0x01 && (op2 & 6) != 6))) {
        single32(hw1, hw2, &c);
    } else if (op1 == 3 && (op2 & 0x78) == 0x38) {
        long32(hw1, hw2, &c);
    } else {
        /* data processing (immediate, shifted or plain register), multiplies, DSP */
        c.writes = rd == 15 ? 0 : REG(rd);
    }
    return c;
}

static insn_class classify(const uint8_t *bytes, size_t size, uint64_t vaddr)
{
    const uint16_t hw1 = (uint16_t)(bytes[0] | (bytes[1] << 8));
    if (size >= 4) {
        return thumb32(hw1, (uint16_t)(bytes[2] | (bytes[3] << 8)), vaddr);
    }
    return thumb16(hw1);
}

static bool accesses_memory(enum kind kind)
{
    return kind == K_LOAD || kind == K_STORE_IMM || kind == K_STORE_REG || kind == K_MEMORY;
}

/* Cycles of `c` after `prev` (NULL: the first instruction of a block), without a taken
 * branch's refill. */
static unsigned cycles_after(const insn_class *c, const insn_class *prev)
{
    unsigned cycles = c->cycles;
    if (c->kind == K_IT) {
        return prev != NULL && prev->size == 2 ? 0 : 1;
    }
    if (prev == NULL) {
        return cycles;
    }
    if (prev->kind == K_LOAD && (c->kind == K_LOAD || c->kind == K_STORE_REG)
        && !(prev->loaded & c->address)) {
        cycles -= 1;
    }
    if (prev->kind == K_DATA && accesses_memory(c->kind) && (prev->writes & c->address)) {
        cycles += 1;
    }
    return cycles;
}

/* ---- the counters ---- */
enum { MARK_START = 1, MARK_STOP = 2, MARK_LAYER = 4 };

typedef struct {
    uint64_t instructions, cycles;
} counts;

static uint64_t start_addr, stop_addr, layer_addr;
static bool have_layer;
static char *out_path;
static uint64_t executed;      /* inline: every executed instruction */
static uint64_t cycles;        /* inline: their static cost; callbacks: taken refills */
static uint64_t fallthrough;   /* the conditional branch just executed falls through here */
static bool branch_pending;
static counts at_start, at_mark, total;
static counts *segments;       /* between start, each layer mark and stop */
static size_t n_segments, cap_segments;
static bool started, stopped;

static counts now(void)
{
    const counts c = {executed, cycles};
    return c;
}

static counts since(counts then)
{
    const counts c = {executed - then.instructions, cycles - then.cycles};
    return c;
}

static void add_segment(void)
{
    if (n_segments == cap_segments) {
        const size_t cap = cap_segments ? 2 * cap_segments : 64;
        counts *grown = realloc(segments, cap * sizeof *grown);
        if (grown == NULL) {
            fprintf(stderr, "insn_count: out of memory\n");
            exit(2);
        }
        segments = grown;
        cap_segments = cap;
    }
    segments[n_segments++] = since(at_mark);
    at_mark = now();
}

static void on_marker(unsigned int vcpu_index, void *userdata)
{
    const uintptr_t which = (uintptr_t)userdata;
    (void)vcpu_index;
    /* start == stop: counts from its first execution to its second one */
    if ((which & MARK_START) && !started) {
        started = true;
        at_start = at_mark = now();
        return;
    }
    if (!started || stopped) {
        return;
    }
    if (which & MARK_LAYER) {
        add_segment();
    }
    if (which & MARK_STOP) {
        stopped = true;
        total = since(at_start);
        if (have_layer) {
            add_segment();
        }
    }
}

static void on_conditional_branch(unsigned int vcpu_index, void *userdata)
{
    (void)vcpu_index;
    fallthrough = (uint64_t)(uintptr_t)userdata;
    branch_pending = true;
}

/* Every block entry: a conditional branch executed last was taken unless this block starts
 * at its fall-through address (QEMU ends a block at every branch). */
static void on_block(unsigned int vcpu_index, void *userdata)
{
    (void)vcpu_index;
    if (branch_pending) {
        branch_pending = false;
        if ((uint64_t)(uintptr_t)userdata != fallthrough) {
            cycles += REFILL_CYCLES;
        }
    }
}

static void instrument(struct qemu_plugin_insn *insn, const insn_class *c, unsigned cost,
                       bool conditional)
{
    const uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
    qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &executed, 1);
    qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &cycles, cost);
    if (conditional) {
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_conditional_branch,
                                               QEMU_PLUGIN_CB_NO_REGS,
                                               (void *)(uintptr_t)(vaddr + c->size));
    }
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    const size_t n = qemu_plugin_tb_n_insns(tb);
    const uint64_t tb_vaddr = qemu_plugin_tb_vaddr(tb);
    const bool marker_body = have_layer && tb_vaddr == layer_addr;
    insn_class prev = {0};
    unsigned it_left = 0;
    size_t i;
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS,
                                         (void *)(uintptr_t)tb_vaddr);
    for (i = 0; i < n; ++i) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        const uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
        const insn_class c = classify(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn),
                                      vaddr);
        const bool in_it = it_left > 0;
        const bool conditional = c.kind == K_BRANCH && (c.conditional || in_it);
        const unsigned cost = cycles_after(&c, i > 0 ? &prev : NULL)
                              + (c.kind == K_BRANCH && !conditional ? REFILL_CYCLES : 0);
        uintptr_t which = 0;
        it_left = c.kind == K_IT ? c.it_count : (in_it ? it_left - 1 : 0);
        if (!marker_body && !(c.call && have_layer && c.target == layer_addr)) {
            instrument(insn, &c, cost, conditional);
        }
        which |= vaddr == start_addr ? MARK_START : 0;
        which |= vaddr == stop_addr ? MARK_STOP : 0;
        which |= have_layer && vaddr == layer_addr ? MARK_LAYER : 0;
        if (which != 0) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_marker, QEMU_PLUGIN_CB_NO_REGS,
                                                   (void *)which);
        }
        prev = c;
    }
}

static void on_plugin_exit(qemu_plugin_id_t id, void *userdata)
{
    FILE *f;
    size_t i;
    (void)id;
    (void)userdata;
    if (!stopped) {
        fprintf(stderr, "insn_count: %s address never reached\n", started ? "stop" : "start");
        return;
    }
    f = fopen(out_path, "w");
    if (f == NULL) {
        fprintf(stderr, "insn_count: cannot open %s\n", out_path);
        return;
    }
    fprintf(f, "%" PRIu64 " %" PRIu64 "\n", total.instructions, total.cycles);
    for (i = 0; i < n_segments; ++i) {
        fprintf(f, "%" PRIu64 " %" PRIu64 "\n", segments[i].instructions, segments[i].cycles);
    }
    fclose(f);
}

static bool parse_addr(const char *text, uint64_t *value)
{
    char *end = NULL;
    if (*text == '\0') {
        return false;
    }
    *value = strtoull(text, &end, 0);
    return end != NULL && *end == '\0';
}

static bool parse_path(const char *text)
{
    const size_t len = strlen(text) + 1;
    free(out_path);
    out_path = malloc(len);
    if (out_path == NULL) {
        return false;
    }
    memcpy(out_path, text, len);
    return true;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    bool have_start = false, have_stop = false, ok = true;
    int i;
    (void)info;
    for (i = 0; i < argc && ok; ++i) {
        const char *arg = argv[i];
        if (strncmp(arg, "start=", 6) == 0) {
            ok = have_start = parse_addr(arg + 6, &start_addr);
        } else if (strncmp(arg, "stop=", 5) == 0) {
            ok = have_stop = parse_addr(arg + 5, &stop_addr);
        } else if (strncmp(arg, "layer=", 6) == 0) {
            ok = have_layer = parse_addr(arg + 6, &layer_addr);
        } else if (strncmp(arg, "out=", 4) == 0 && arg[4] != '\0') {
            if (!parse_path(arg + 4)) {
                return -1;
            }
        } else {
            fprintf(stderr, "insn_count: unknown argument '%s'\n", arg);
            return -1;
        }
    }
    if (!have_start || !have_stop || out_path == NULL) {
        fprintf(stderr, "insn_count: usage: start=0xADDR,stop=0xADDR,out=PATH[,layer=0xADDR]\n");
        return -1;
    }
    /* Thumb: the instruction address is the symbol value with bit 0 cleared */
    start_addr &= ~(uint64_t)1;
    stop_addr &= ~(uint64_t)1;
    layer_addr &= ~(uint64_t)1;
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_plugin_exit, NULL);
    return 0;
}
