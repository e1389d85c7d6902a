/* edgebuild instruction counter: a QEMU TCG plugin (plugin API version 1, QEMU 7.2).
 *
 *   qemu-system-arm ... -plugin ./insn_count.so,start=0xADDR,stop=0xADDR,out=PATH
 *
 * Counts the guest instructions executed from the first execution of the instruction at
 * `start` (included) up to the first later execution of the instruction at `stop` (not
 * included), and writes the count as one decimal line to `out` at exit. Nothing is written
 * when `start` or `stop` is never reached (a missing file means "markers not hit"; the
 * reason goes to stderr: qemu_plugin_outs would need `-d plugin` to show anything).
 *
 * Every translated instruction gets an inline "counter += 1" (no helper call: fast); only
 * the instructions at `start` and `stop` get a callback, which snapshots the counter. Both
 * snapshots see the counter in the same state relative to their own instruction, so the
 * difference is exact whatever order QEMU emits inline ops and callbacks in; TB boundaries
 * do not matter. There is no timer or interrupt in edgebuild firmware, so a given binary
 * executes the same instruction stream, and gives the same count, on every run.
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
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
                                            qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn,
                                                enum qemu_plugin_op op, void *ptr,
                                                uint64_t imm);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb,
                                    void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);

QEMU_PLUGIN_EXPORT int qemu_plugin_version = 1;
QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv);

/* ---- the counter ---- */
enum { MARK_START = 1, MARK_STOP = 2 };

static uint64_t start_addr, stop_addr;
static char *out_path;
static uint64_t executed;      /* inline counter: every executed instruction */
static uint64_t at_start;
static uint64_t counted;
static bool started, stopped;

static void on_marker(unsigned int vcpu_index, void *userdata)
{
    const uintptr_t which = (uintptr_t)userdata;
    (void)vcpu_index;
    /* start == stop: counts from its first execution to its second one */
    if ((which & MARK_START) && !started) {
        started = true;
        at_start = executed;
        return;
    }
    if ((which & MARK_STOP) && started && !stopped) {
        stopped = true;
        counted = executed - at_start;
    }
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    const size_t n = qemu_plugin_tb_n_insns(tb);
    size_t i;
    (void)id;
    for (i = 0; i < n; ++i) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        const uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
        uintptr_t which = 0;
        qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &executed,
                                                   1);
        if (vaddr == start_addr) {
            which |= MARK_START;
        }
        if (vaddr == stop_addr) {
            which |= MARK_STOP;
        }
        if (which != 0) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_marker, QEMU_PLUGIN_CB_NO_REGS,
                                                   (void *)which);
        }
    }
}

static void on_plugin_exit(qemu_plugin_id_t id, void *userdata)
{
    FILE *f;
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
    fprintf(f, "%" PRIu64 "\n", counted);
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

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    bool have_start = false, have_stop = false;
    int i;
    (void)info;
    for (i = 0; i < argc; ++i) {
        const char *arg = argv[i];
        if (strncmp(arg, "start=", 6) == 0) {
            have_start = parse_addr(arg + 6, &start_addr);
            if (!have_start) {
                break;
            }
        } else if (strncmp(arg, "stop=", 5) == 0) {
            have_stop = parse_addr(arg + 5, &stop_addr);
            if (!have_stop) {
                break;
            }
        } else if (strncmp(arg, "out=", 4) == 0 && arg[4] != '\0') {
            const size_t len = strlen(arg + 4) + 1;
            free(out_path);
            out_path = malloc(len);
            if (out_path == NULL) {
                return -1;
            }
            memcpy(out_path, arg + 4, len);
        } else {
            fprintf(stderr, "insn_count: unknown argument '%s'\n", arg);
            return -1;
        }
    }
    if (!have_start || !have_stop || out_path == NULL) {
        fprintf(stderr, "insn_count: usage: start=0xADDR,stop=0xADDR,out=PATH\n");
        return -1;
    }
    /* Thumb: the instruction address is the symbol value with bit 0 cleared */
    start_addr &= ~(uint64_t)1;
    stop_addr &= ~(uint64_t)1;
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_plugin_exit, NULL);
    return 0;
}
