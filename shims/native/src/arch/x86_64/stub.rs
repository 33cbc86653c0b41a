//! The x86-64 register-saving stub every trampoline calls (`slt_patch_stub`), the per-thread
//! guard byte it reads (`slt_patch_guard`, initial-exec TLS), and the choice of vector state
//! it keeps ([`init`]).
//!
//! The stub saves every register the hook may change, calls `patch::slt_patched_enter` with
//! the function's address and its stack pointer at entry (the CFA is known exactly: no
//! unwinding), restores them and returns into the trampoline, which runs the moved
//! instructions and jumps back. No return address is touched: returns are rebuilt by the
//! frame repair (frames.rs).

std::arch::global_asm!(
    ".pushsection .text.slt_patch_stub,\"ax\",@progbits",
    ".globl slt_patch_stub",
    ".hidden slt_patch_stub",
    ".type slt_patch_stub,@function",
    "slt_patch_stub:",
    // [rsp]: the return address into the trampoline (its start + 22). EVERY register the
    // hook may change is saved, not only the argument registers: gcc at -O2 (-fipa-ra) keeps
    // values in call-clobbered registers (r8-r11, xmm8-xmm15, ...) across a call to a local
    // function that it knows leaves them alone, and that function's entry now calls the
    // hook (tests/native_patch.rs, examples/c/regs.c). rbx keeps the unaligned stack
    // pointer: the stack is not always 16-byte aligned at a function's entry (gcc calls its
    // own local leaf functions with any alignment).
    "push rax",
    "push rdi",
    "push rsi",
    "push rdx",
    "push rcx",
    "push r8",
    "push r9",
    "push r10",
    "push r11",
    "push rbx",
    // A patched function called by the hook itself (libc, when it is patched) or by the
    // shim while it patches runs unrecorded: the thread's guard (initial-exec TLS) is set.
    "mov rax, qword ptr [rip + slt_patch_guard@GOTTPOFF]",
    "cmp byte ptr fs:[rax], 0",
    "jne 6f",
    "mov byte ptr fs:[rax], 1",
    "mov rbx, rsp",
    "and rsp, -32",
    "sub rsp, 544",
    // Which vector state to keep (SIMD_MODE; the choice is kept at [rsp + 512]):
    // 0: xmm0-15 (no AVX); 1: xmm0-15, then vzeroupper after the hook (AVX, but the upper
    // halves are not in use: XINUSE says so, and they are zero); 2: whole ymm0-15 (the
    // program uses them: the slow path's libc calls may run AVX code that ends with
    // vzeroupper). Saving ymm when the program does not use AVX would leave the upper
    // halves "in use" after the restore, and every SSE instruction after (the hook's, the
    // program's) would pay for it: 2.5 times the recording's cost, measured.
    "movzx eax, byte ptr [rip + {avx}]",
    "cmp eax, 1",
    "jne 7f",
    "mov ecx, 1",
    "xgetbv",
    "test al, 4",
    "mov eax, 1",
    "jz 7f",
    "mov eax, 2",
    "7:",
    "mov dword ptr [rsp + 512], eax",
    "cmp eax, 2",
    "je 2f",
    "movdqu xmmword ptr [rsp + 0], xmm0",
    "movdqu xmmword ptr [rsp + 16], xmm1",
    "movdqu xmmword ptr [rsp + 32], xmm2",
    "movdqu xmmword ptr [rsp + 48], xmm3",
    "movdqu xmmword ptr [rsp + 64], xmm4",
    "movdqu xmmword ptr [rsp + 80], xmm5",
    "movdqu xmmword ptr [rsp + 96], xmm6",
    "movdqu xmmword ptr [rsp + 112], xmm7",
    "movdqu xmmword ptr [rsp + 128], xmm8",
    "movdqu xmmword ptr [rsp + 144], xmm9",
    "movdqu xmmword ptr [rsp + 160], xmm10",
    "movdqu xmmword ptr [rsp + 176], xmm11",
    "movdqu xmmword ptr [rsp + 192], xmm12",
    "movdqu xmmword ptr [rsp + 208], xmm13",
    "movdqu xmmword ptr [rsp + 224], xmm14",
    "movdqu xmmword ptr [rsp + 240], xmm15",
    "jmp 3f",
    "2:",
    "vmovdqu ymmword ptr [rsp + 0], ymm0",
    "vmovdqu ymmword ptr [rsp + 32], ymm1",
    "vmovdqu ymmword ptr [rsp + 64], ymm2",
    "vmovdqu ymmword ptr [rsp + 96], ymm3",
    "vmovdqu ymmword ptr [rsp + 128], ymm4",
    "vmovdqu ymmword ptr [rsp + 160], ymm5",
    "vmovdqu ymmword ptr [rsp + 192], ymm6",
    "vmovdqu ymmword ptr [rsp + 224], ymm7",
    "vmovdqu ymmword ptr [rsp + 256], ymm8",
    "vmovdqu ymmword ptr [rsp + 288], ymm9",
    "vmovdqu ymmword ptr [rsp + 320], ymm10",
    "vmovdqu ymmword ptr [rsp + 352], ymm11",
    "vmovdqu ymmword ptr [rsp + 384], ymm12",
    "vmovdqu ymmword ptr [rsp + 416], ymm13",
    "vmovdqu ymmword ptr [rsp + 448], ymm14",
    "vmovdqu ymmword ptr [rsp + 480], ymm15",
    "3:",
    "mov rdi, qword ptr [rbx + 80]",
    "mov rdi, qword ptr [rdi - 22]",
    // The function's stack pointer at entry (its CFA - 8).
    "lea rsi, [rbx + 88]",
    "call {hook}",
    "mov eax, dword ptr [rsp + 512]",
    "cmp eax, 2",
    "je 4f",
    "cmp eax, 1",
    "jne 8f",
    "vzeroupper",
    "8:",
    "movdqu xmm0, xmmword ptr [rsp + 0]",
    "movdqu xmm1, xmmword ptr [rsp + 16]",
    "movdqu xmm2, xmmword ptr [rsp + 32]",
    "movdqu xmm3, xmmword ptr [rsp + 48]",
    "movdqu xmm4, xmmword ptr [rsp + 64]",
    "movdqu xmm5, xmmword ptr [rsp + 80]",
    "movdqu xmm6, xmmword ptr [rsp + 96]",
    "movdqu xmm7, xmmword ptr [rsp + 112]",
    "movdqu xmm8, xmmword ptr [rsp + 128]",
    "movdqu xmm9, xmmword ptr [rsp + 144]",
    "movdqu xmm10, xmmword ptr [rsp + 160]",
    "movdqu xmm11, xmmword ptr [rsp + 176]",
    "movdqu xmm12, xmmword ptr [rsp + 192]",
    "movdqu xmm13, xmmword ptr [rsp + 208]",
    "movdqu xmm14, xmmword ptr [rsp + 224]",
    "movdqu xmm15, xmmword ptr [rsp + 240]",
    "jmp 5f",
    "4:",
    "vmovdqu ymm0, ymmword ptr [rsp + 0]",
    "vmovdqu ymm1, ymmword ptr [rsp + 32]",
    "vmovdqu ymm2, ymmword ptr [rsp + 64]",
    "vmovdqu ymm3, ymmword ptr [rsp + 96]",
    "vmovdqu ymm4, ymmword ptr [rsp + 128]",
    "vmovdqu ymm5, ymmword ptr [rsp + 160]",
    "vmovdqu ymm6, ymmword ptr [rsp + 192]",
    "vmovdqu ymm7, ymmword ptr [rsp + 224]",
    "vmovdqu ymm8, ymmword ptr [rsp + 256]",
    "vmovdqu ymm9, ymmword ptr [rsp + 288]",
    "vmovdqu ymm10, ymmword ptr [rsp + 320]",
    "vmovdqu ymm11, ymmword ptr [rsp + 352]",
    "vmovdqu ymm12, ymmword ptr [rsp + 384]",
    "vmovdqu ymm13, ymmword ptr [rsp + 416]",
    "vmovdqu ymm14, ymmword ptr [rsp + 448]",
    "vmovdqu ymm15, ymmword ptr [rsp + 480]",
    "5:",
    "mov rsp, rbx",
    "mov rax, qword ptr [rip + slt_patch_guard@GOTTPOFF]",
    "mov byte ptr fs:[rax], 0",
    "6:",
    "pop rbx",
    "pop r11",
    "pop r10",
    "pop r9",
    "pop r8",
    "pop rcx",
    "pop rdx",
    "pop rsi",
    "pop rdi",
    "pop rax",
    "ret",
    ".size slt_patch_stub, . - slt_patch_stub",
    // slt_patch_guard_swap(new: u8) -> old: u8
    ".hidden slt_patch_guard_swap",
    ".globl slt_patch_guard_swap",
    ".type slt_patch_guard_swap,@function",
    "slt_patch_guard_swap:",
    "mov rax, qword ptr [rip + slt_patch_guard@GOTTPOFF]",
    "movzx ecx, byte ptr fs:[rax]",
    "mov byte ptr fs:[rax], dil",
    "mov eax, ecx",
    "ret",
    ".size slt_patch_guard_swap, . - slt_patch_guard_swap",
    ".popsection",
    ".pushsection .tbss.slt_patch_guard,\"awT\",@nobits",
    ".hidden slt_patch_guard",
    ".globl slt_patch_guard",
    ".type slt_patch_guard,@object",
    ".p2align 3",
    "slt_patch_guard:",
    ".zero 8",
    ".size slt_patch_guard, 8",
    ".popsection",
    hook = sym crate::patch::slt_patched_enter,
    avx = sym SIMD_MODE,
);

/// The stub's vector-state mode (see the stub): 0 no AVX, 1 AVX and XGETBV(1) tells whether
/// the upper halves are in use, 2 AVX without that (always whole ymm). Set before anything
/// is patched; read by the stub as one byte.
static SIMD_MODE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

extern "C" {
    /// Never called from Rust: its address goes into the trampolines (the stub above).
    pub(super) fn slt_patch_stub();
    /// None: swaps the calling thread's guard byte (`slt_patch_guard`, a TLS byte defined with
    /// the stub), returns the old one.
    pub(super) fn slt_patch_guard_swap(new: u8) -> u8;
}

/// Set up once, before the first object is patched (the stub's choice of registers).
pub(super) fn init() {
    let mode = if !std::arch::is_x86_feature_detected!("avx") {
        0
    } else {
        // CPUID.(EAX=0DH,ECX=1):EAX[2]: XGETBV with ECX = 1 (XINUSE) is supported.
        // SAFETY: cpuid is available on every x86-64 CPU.
        #[allow(unused_unsafe)]
        let xinuse = unsafe { std::arch::x86_64::__cpuid_count(0xd, 1) }.eax & 4 != 0;
        if xinuse {
            1
        } else {
            2
        }
    };
    SIMD_MODE.store(mode, std::sync::atomic::Ordering::Relaxed);
}
