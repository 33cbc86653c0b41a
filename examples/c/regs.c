/* regs.c - x86-64 only: does a patched function's entry keep every register the caller set?
 *   regs [ROUNDS] [avx]
 *
 * gcc -O2 (-fipa-ra) keeps values in call-clobbered registers (r8-r11, xmm8-xmm15, ...)
 * across a call to a local function it knows does not touch them, so an entry hook must
 * keep EVERY register but rsp, not only the argument registers. `call_probe` (assembly)
 * loads a known value into each general-purpose register but rsp and into xmm0-xmm15, calls
 * `probe`, which stores what it sees, and stores what it finds after `probe` returned;
 * main compares both with what was loaded. Exit status 1 and the register named on a
 * difference. Between rounds main spins for 15 ms, so that later rounds run after the
 * recorder's clock calibration (its fast path then reads the TSC). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NGPR 14 /* every general-purpose register but rsp and rbp (the frame pointer) */
#define NXMM 16

uint64_t regs_gpr_in[NGPR], regs_gpr_seen[NGPR], regs_gpr_after[NGPR];
uint8_t regs_xmm_in[NXMM * 16], regs_xmm_seen[NXMM * 16], regs_xmm_after[NXMM * 16];

static const char *const gpr_names[NGPR] = {"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "r8",
                                            "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};

void call_probe(void);

/* probe: its first instruction (a 5-byte nop) is what a patcher moves; then it stores every
 * register it received. call_probe: loads the registers, calls probe, stores them again. */
__asm__(".text\n"
        ".globl probe\n"
        ".type probe,@function\n"
        "probe:\n"
        "  nopl 0x0(%rax,%rax,1)\n"
        "  mov %rax, regs_gpr_seen+0(%rip)\n"
        "  mov %rbx, regs_gpr_seen+8(%rip)\n"
        "  mov %rcx, regs_gpr_seen+16(%rip)\n"
        "  mov %rdx, regs_gpr_seen+24(%rip)\n"
        "  mov %rsi, regs_gpr_seen+32(%rip)\n"
        "  mov %rdi, regs_gpr_seen+40(%rip)\n"
        "  mov %r8, regs_gpr_seen+48(%rip)\n"
        "  mov %r9, regs_gpr_seen+56(%rip)\n"
        "  mov %r10, regs_gpr_seen+64(%rip)\n"
        "  mov %r11, regs_gpr_seen+72(%rip)\n"
        "  mov %r12, regs_gpr_seen+80(%rip)\n"
        "  mov %r13, regs_gpr_seen+88(%rip)\n"
        "  mov %r14, regs_gpr_seen+96(%rip)\n"
        "  mov %r15, regs_gpr_seen+104(%rip)\n"
        "  movdqu %xmm0, regs_xmm_seen+0(%rip)\n"
        "  movdqu %xmm1, regs_xmm_seen+16(%rip)\n"
        "  movdqu %xmm2, regs_xmm_seen+32(%rip)\n"
        "  movdqu %xmm3, regs_xmm_seen+48(%rip)\n"
        "  movdqu %xmm4, regs_xmm_seen+64(%rip)\n"
        "  movdqu %xmm5, regs_xmm_seen+80(%rip)\n"
        "  movdqu %xmm6, regs_xmm_seen+96(%rip)\n"
        "  movdqu %xmm7, regs_xmm_seen+112(%rip)\n"
        "  movdqu %xmm8, regs_xmm_seen+128(%rip)\n"
        "  movdqu %xmm9, regs_xmm_seen+144(%rip)\n"
        "  movdqu %xmm10, regs_xmm_seen+160(%rip)\n"
        "  movdqu %xmm11, regs_xmm_seen+176(%rip)\n"
        "  movdqu %xmm12, regs_xmm_seen+192(%rip)\n"
        "  movdqu %xmm13, regs_xmm_seen+208(%rip)\n"
        "  movdqu %xmm14, regs_xmm_seen+224(%rip)\n"
        "  movdqu %xmm15, regs_xmm_seen+240(%rip)\n"
        "  ret\n"
        ".size probe, .-probe\n"
        ".globl call_probe\n"
        ".type call_probe,@function\n"
        "call_probe:\n"
        "  push %rbx\n"
        "  push %r12\n"
        "  push %r13\n"
        "  push %r14\n"
        "  push %r15\n"
        "  mov regs_gpr_in+0(%rip), %rax\n"
        "  mov regs_gpr_in+8(%rip), %rbx\n"
        "  mov regs_gpr_in+16(%rip), %rcx\n"
        "  mov regs_gpr_in+24(%rip), %rdx\n"
        "  mov regs_gpr_in+32(%rip), %rsi\n"
        "  mov regs_gpr_in+40(%rip), %rdi\n"
        "  mov regs_gpr_in+48(%rip), %r8\n"
        "  mov regs_gpr_in+56(%rip), %r9\n"
        "  mov regs_gpr_in+64(%rip), %r10\n"
        "  mov regs_gpr_in+72(%rip), %r11\n"
        "  mov regs_gpr_in+80(%rip), %r12\n"
        "  mov regs_gpr_in+88(%rip), %r13\n"
        "  mov regs_gpr_in+96(%rip), %r14\n"
        "  mov regs_gpr_in+104(%rip), %r15\n"
        "  movdqu regs_xmm_in+0(%rip), %xmm0\n"
        "  movdqu regs_xmm_in+16(%rip), %xmm1\n"
        "  movdqu regs_xmm_in+32(%rip), %xmm2\n"
        "  movdqu regs_xmm_in+48(%rip), %xmm3\n"
        "  movdqu regs_xmm_in+64(%rip), %xmm4\n"
        "  movdqu regs_xmm_in+80(%rip), %xmm5\n"
        "  movdqu regs_xmm_in+96(%rip), %xmm6\n"
        "  movdqu regs_xmm_in+112(%rip), %xmm7\n"
        "  movdqu regs_xmm_in+128(%rip), %xmm8\n"
        "  movdqu regs_xmm_in+144(%rip), %xmm9\n"
        "  movdqu regs_xmm_in+160(%rip), %xmm10\n"
        "  movdqu regs_xmm_in+176(%rip), %xmm11\n"
        "  movdqu regs_xmm_in+192(%rip), %xmm12\n"
        "  movdqu regs_xmm_in+208(%rip), %xmm13\n"
        "  movdqu regs_xmm_in+224(%rip), %xmm14\n"
        "  movdqu regs_xmm_in+240(%rip), %xmm15\n"
        "  call probe\n"
        "  mov %rax, regs_gpr_after+0(%rip)\n"
        "  mov %rbx, regs_gpr_after+8(%rip)\n"
        "  mov %rcx, regs_gpr_after+16(%rip)\n"
        "  mov %rdx, regs_gpr_after+24(%rip)\n"
        "  mov %rsi, regs_gpr_after+32(%rip)\n"
        "  mov %rdi, regs_gpr_after+40(%rip)\n"
        "  mov %r8, regs_gpr_after+48(%rip)\n"
        "  mov %r9, regs_gpr_after+56(%rip)\n"
        "  mov %r10, regs_gpr_after+64(%rip)\n"
        "  mov %r11, regs_gpr_after+72(%rip)\n"
        "  mov %r12, regs_gpr_after+80(%rip)\n"
        "  mov %r13, regs_gpr_after+88(%rip)\n"
        "  mov %r14, regs_gpr_after+96(%rip)\n"
        "  mov %r15, regs_gpr_after+104(%rip)\n"
        "  movdqu %xmm0, regs_xmm_after+0(%rip)\n"
        "  movdqu %xmm1, regs_xmm_after+16(%rip)\n"
        "  movdqu %xmm2, regs_xmm_after+32(%rip)\n"
        "  movdqu %xmm3, regs_xmm_after+48(%rip)\n"
        "  movdqu %xmm4, regs_xmm_after+64(%rip)\n"
        "  movdqu %xmm5, regs_xmm_after+80(%rip)\n"
        "  movdqu %xmm6, regs_xmm_after+96(%rip)\n"
        "  movdqu %xmm7, regs_xmm_after+112(%rip)\n"
        "  movdqu %xmm8, regs_xmm_after+128(%rip)\n"
        "  movdqu %xmm9, regs_xmm_after+144(%rip)\n"
        "  movdqu %xmm10, regs_xmm_after+160(%rip)\n"
        "  movdqu %xmm11, regs_xmm_after+176(%rip)\n"
        "  movdqu %xmm12, regs_xmm_after+192(%rip)\n"
        "  movdqu %xmm13, regs_xmm_after+208(%rip)\n"
        "  movdqu %xmm14, regs_xmm_after+224(%rip)\n"
        "  movdqu %xmm15, regs_xmm_after+240(%rip)\n"
        "  pop %r15\n"
        "  pop %r14\n"
        "  pop %r13\n"
        "  pop %r12\n"
        "  pop %rbx\n"
        "  ret\n"
        ".size call_probe, .-call_probe\n");

/* The same with whole ymm registers (`regs 4 avx`): the upper halves in use, so the hook's
 * stub must keep all 256 bits (its AVX path). */
uint8_t regs_ymm_in[NXMM * 32], regs_ymm_seen[NXMM * 32], regs_ymm_after[NXMM * 32];
void call_probe_avx(void);

__asm__(".text\n"
        ".globl probe_avx\n"
        ".type probe_avx,@function\n"
        "probe_avx:\n"
        "  nopl 0x0(%rax,%rax,1)\n"
        "  .irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
        "  vmovdqu %ymm\\i, regs_ymm_seen+32*\\i(%rip)\n"
        "  .endr\n"
        "  ret\n"
        ".size probe_avx, .-probe_avx\n"
        ".globl call_probe_avx\n"
        ".type call_probe_avx,@function\n"
        "call_probe_avx:\n"
        "  sub $8, %rsp\n"
        "  .irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
        "  vmovdqu regs_ymm_in+32*\\i(%rip), %ymm\\i\n"
        "  .endr\n"
        "  call probe_avx\n"
        "  .irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
        "  vmovdqu %ymm\\i, regs_ymm_after+32*\\i(%rip)\n"
        "  .endr\n"
        "  vzeroupper\n"
        "  add $8, %rsp\n"
        "  ret\n"
        ".size call_probe_avx, .-call_probe_avx\n");

static int compare_ymm(const char *when, const uint8_t *ymm)
{
    int bad = 0;
    for (int i = 0; i < NXMM; i++)
        if (memcmp(ymm + 32 * i, regs_ymm_in + 32 * i, 32) != 0) {
            printf("%s: ymm%d differs\n", when, i);
            bad = 1;
        }
    return bad;
}

static void spin_ms(long ms)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
}

static int compare(const char *when, const uint64_t *gpr, const uint8_t *xmm)
{
    int bad = 0;
    for (int i = 0; i < NGPR; i++)
        if (gpr[i] != regs_gpr_in[i]) {
            printf("%s: %s is %#llx, not %#llx\n", when, gpr_names[i], (unsigned long long)gpr[i],
                   (unsigned long long)regs_gpr_in[i]);
            bad = 1;
        }
    for (int i = 0; i < NXMM; i++)
        if (memcmp(xmm + 16 * i, regs_xmm_in + 16 * i, 16) != 0) {
            printf("%s: xmm%d differs\n", when, i);
            bad = 1;
        }
    return bad;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    int avx = argc > 2 && strcmp(argv[2], "avx") == 0;
    int bad = 0;
    if (avx && !__builtin_cpu_supports("avx")) {
        printf("no avx\n");
        return 0;
    }
    for (int r = 0; r < rounds && !bad; r++) {
        for (int i = 0; i < NGPR; i++)
            regs_gpr_in[i] = 0x0101010101010101ull * (uint64_t)(i + 1) + (uint64_t)r;
        for (int i = 0; i < NXMM * 16; i++)
            regs_xmm_in[i] = (uint8_t)(0xa0 + i + r);
        call_probe();
        bad |= compare("in probe", regs_gpr_seen, regs_xmm_seen);
        bad |= compare("after probe", regs_gpr_after, regs_xmm_after);
        if (avx) {
            for (int i = 0; i < NXMM * 32; i++)
                regs_ymm_in[i] = (uint8_t)(0x30 + 3 * i + r);
            call_probe_avx();
            bad |= compare_ymm("in probe_avx", regs_ymm_seen);
            bad |= compare_ymm("after probe_avx", regs_ymm_after);
        }
        spin_ms(15);
    }
    printf(bad ? "registers changed\n" : "registers kept\n");
    return bad;
}
