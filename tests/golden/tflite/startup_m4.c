/* edgebuild Cortex-M4 startup for bare-metal runs (QEMU mps2-an386 or a real M4).
 *
 * Link with link.ld (rendered from link.ld.j2) and
 *   -nostartfiles --specs=nano.specs --specs=rdimon.specs
 * QEMU loads the initial SP and PC from the vector table at address 0 (it ignores the ELF
 * entry point), so this file, not newlib's crt0, is what runs first:
 *   - enable the FPU before any floating-point instruction (hard-float builds);
 *   - copy .data from flash, zero .bss;
 *   - open the semihosting stdio handles (crt0's job, skipped by -nostartfiles);
 *   - cap the newlib heap at the linker script's heap reservation;
 *   - run constructors, then exit(main()): the exit status reaches the host through
 *     semihosting (SYS_EXIT_EXTENDED), which is QEMU's own exit status.
 * A fault prints "edgebuild: <fault> pc=... cfsr=... hfsr=..." to the semihosting console
 * and exits with EB_FAULT_EXIT_BASE + exception number:
 *   0xF2 NMI, 0xF3 HardFault, 0xF4 MemManage, 0xF5 BusFault, 0xF6 UsageFault,
 *   0xFF any other unexpected exception.
 */
#include <stdint.h>
#include <stdlib.h>

#define EB_FAULT_EXIT_BASE 0xF0
#define EB_FAULT_EXIT_OTHER 0xFF

/* System control block registers (ARMv7-M). */
#define EB_SCB_CPACR (*(volatile uint32_t *)0xE000ED88u)
#define EB_SCB_SHCSR (*(volatile uint32_t *)0xE000ED24u)
#define EB_SCB_CFSR (*(volatile uint32_t *)0xE000ED28u)
#define EB_SCB_HFSR (*(volatile uint32_t *)0xE000ED2Cu)
#define EB_SHCSR_FAULTS_ENABLE ((1u << 16) | (1u << 17) | (1u << 18)) /* Mem, Bus, Usage */

/* Linker script symbols (link.ld.j2). */
extern uint32_t _estack;
extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss;
extern char __heap_end__;

/* newlib / librdimon. __heap_limit is librdimon's variable (crt0 fills it from
 * SYS_HEAPINFO); weak so that this file also links against other libgloss flavours. */
extern unsigned int __heap_limit __attribute__((weak));
extern void initialise_monitor_handles(void) __attribute__((weak));
extern void __libc_init_array(void);
extern void _exit(int status) __attribute__((noreturn));
extern int main(void);

void Reset_Handler(void) __attribute__((noreturn));
void eb_fault_report(const uint32_t *frame, uint32_t exception) __attribute__((noreturn, used));
void NMI_Handler(void);
void HardFault_Handler(void);
void MemManage_Handler(void);
void BusFault_Handler(void);
void UsageFault_Handler(void);
void Default_Handler(void);

/* With -nostartfiles nothing else defines these; __libc_init_array calls _init. */
void _init(void) {}
void _fini(void) {}

typedef void (*eb_vector)(void);

/* Core exceptions only: edgebuild firmware enables no peripheral interrupts. */
__attribute__((section(".isr_vector"), used))
const eb_vector eb_vector_table[16] = {
    (eb_vector)(uintptr_t)&_estack, /* 0: initial main stack pointer */
    Reset_Handler,                  /* 1 */
    NMI_Handler,                    /* 2 */
    HardFault_Handler,              /* 3 */
    MemManage_Handler,              /* 4 */
    BusFault_Handler,               /* 5 */
    UsageFault_Handler,             /* 6 */
    0, 0, 0, 0,                     /* 7-10: reserved */
    Default_Handler,                /* 11: SVCall */
    Default_Handler,                /* 12: DebugMonitor */
    0,                              /* 13: reserved */
    Default_Handler,                /* 14: PendSV */
    Default_Handler,                /* 15: SysTick */
};

/* FPU on first, in its own non-inlined function: the compiler may use FP registers
 * (even as integer spill slots) in any C code compiled for hard-float. */
__attribute__((noinline)) static void eb_enable_fpu(void)
{
    EB_SCB_CPACR |= 0xFu << 20; /* CP10, CP11: full access */
    __asm__ volatile("dsb\n\tisb" ::: "memory");
}

void Reset_Handler(void)
{
    /* volatile: keeps the compiler from turning these loops into memcpy/memset calls */
    const uint32_t *src;
    volatile uint32_t *dst;

    eb_enable_fpu();
    EB_SCB_SHCSR |= EB_SHCSR_FAULTS_ENABLE;
    for (src = &_sidata, dst = &_sdata; dst < &_edata;) {
        *dst++ = *src++;
    }
    for (dst = &_sbss; dst < &_ebss;) {
        *dst++ = 0;
    }
    if (&__heap_limit != 0) {
        __heap_limit = (unsigned int)(uintptr_t)&__heap_end__;
    }
    if (initialise_monitor_handles != 0) {
        initialise_monitor_handles();
    }
    __libc_init_array();
    exit(main());
}

/* ---- faults -------------------------------------------------------------------------- */

/* SYS_WRITE0: needs no open file handles, safe in a fault handler. */
static void eb_semihost_write0(const char *text)
{
    register uint32_t op __asm__("r0") = 0x04;
    register const char *arg __asm__("r1") = text;
    __asm__ volatile("bkpt 0xab" : "+r"(op) : "r"(arg) : "memory");
}

static char *eb_put_str(char *out, const char *text)
{
    while (*text) {
        *out++ = *text++;
    }
    return out;
}

static char *eb_put_hex(char *out, uint32_t value)
{
    int shift;
    *out++ = '0';
    *out++ = 'x';
    for (shift = 28; shift >= 0; shift -= 4) {
        *out++ = "0123456789abcdef"[(value >> shift) & 0xFu];
    }
    return out;
}

/* frame: the exception stack frame (r0-r3, r12, lr, pc, xpsr). */
void eb_fault_report(const uint32_t *frame, uint32_t exception)
{
    static const char *const names[7] = {"exception", "exception", "NMI", "HardFault",
                                          "MemManage", "BusFault", "UsageFault"};
    char line[96];
    char *p = line;
    const int known = exception >= 2 && exception <= 6;

    p = eb_put_str(p, "edgebuild: ");
    p = eb_put_str(p, known ? names[exception] : "unexpected exception");
    p = eb_put_str(p, " pc=");
    p = eb_put_hex(p, frame[6]);
    p = eb_put_str(p, " cfsr=");
    p = eb_put_hex(p, EB_SCB_CFSR);
    p = eb_put_str(p, " hfsr=");
    p = eb_put_hex(p, EB_SCB_HFSR);
    *p++ = '\n';
    *p = '\0';
    eb_semihost_write0(line);
    _exit(known ? EB_FAULT_EXIT_BASE + (int)exception : EB_FAULT_EXIT_OTHER);
}

/* Naked stubs: pick the stack the frame was pushed on (EXC_RETURN bit 2), pass the
 * exception number (IPSR) and report. */
#define EB_FAULT_STUB(name)                                                                  \
    __attribute__((naked)) void name(void)                                                   \
    {                                                                                        \
        __asm__ volatile("tst lr, #4\n\t"                                                    \
                         "ite eq\n\t"                                                        \
                         "mrseq r0, msp\n\t"                                                 \
                         "mrsne r0, psp\n\t"                                                 \
                         "mrs r1, ipsr\n\t"                                                  \
                         "b eb_fault_report\n\t");                                           \
    }

EB_FAULT_STUB(NMI_Handler)
EB_FAULT_STUB(HardFault_Handler)
EB_FAULT_STUB(MemManage_Handler)
EB_FAULT_STUB(BusFault_Handler)
EB_FAULT_STUB(UsageFault_Handler)
EB_FAULT_STUB(Default_Handler)
