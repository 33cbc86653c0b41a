//! Entry patching of ordinary builds (x86-64): the program and its libraries, at start-up and
//! after each `dlopen` (objects.rs decides which objects and when; this file patches one
//! object). See docs/native-recording.md for the design and what is missing.
//!
//! Every function symbol of an object's `.symtab` (else `.dynsym`) is considered. Its first
//! whole instructions covering 5 bytes are decoded with iced-x86 and moved into a
//! trampoline allocated within ±2 GiB (iced-x86's `BlockEncoder` re-targets RIP-relative
//! operands); the entry becomes `jmp trampoline`. The trampoline calls `slt_patch_stub`, which
//! saves every register the hook may change, calls the hot path with the function's address
//! and its stack pointer at entry (the CFA is known exactly: no unwinding), restores them,
//! runs the moved instructions and jumps back. No return address is touched: returns are
//! rebuilt by the frame repair (frames.rs).
//!
//! A function shorter than the jump is patched when alignment padding (`nop`s, `int3`s) after
//! it gives room, and it leaves by a return or a jump (`plan_short`).
//!
//! Refused: other functions shorter than 5 bytes, a first instruction that is not plain
//! (an indirect branch or call in the moved bytes), a moved byte that is the target of a jump
//! inside the function, bytes that do not decode, `.cold` fragments and the C runtime's own
//! start-up functions.

use crate::frames;
use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code, Decoder, DecoderOptions, FlowControl, Instruction, InstructionBlock, Mnemonic, OpKind,
    Register,
};

/// Trampoline layout: function address, stub address, `call [rip-14]`, moved code, `jmp`.
const HEAD: usize = 22;
const SLOT: usize = 96;
const JMP_LEN: usize = 5;

/// Why a function was not patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    TooShort,
    Undecodable,
    NotPlainPrologue,
    JumpTarget,
    RuntimeStartup,
    ColdFragment,
    TooLong,
    /// `mprotect` refused to make its entry's page writable or its trampoline executable (a
    /// W^X policy: SELinux `execmod`, PaX): left as it was, and said so.
    Protection,
}

/// Every instruction of `code` (at `ip`), or `Undecodable`.
fn decode_all(code: &[u8], ip: u64) -> Result<Vec<Instruction>, Refusal> {
    let mut dec = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let mut all = Vec::new();
    while dec.can_decode() {
        let i = dec.decode();
        if i.is_invalid() {
            return Err(Refusal::Undecodable);
        }
        all.push(i);
    }
    Ok(all)
}

/// What `plan` decided for one function: the bytes to move, or why not.
pub(crate) fn plan(code: &[u8], ip: u64) -> Result<Vec<Instruction>, Refusal> {
    if code.len() < JMP_LEN {
        return Err(Refusal::TooShort);
    }
    let all = decode_all(code, ip)?;
    let mut moved = Vec::new();
    let mut len = 0usize;
    for i in &all {
        if len >= JMP_LEN {
            break;
        }
        match i.flow_control() {
            // An indirect jump (`jmp [rax + 8]`, a tail call through a table) is moved as it
            // is (a RIP-relative operand is re-targeted by the encoder).
            FlowControl::Next
            | FlowControl::UnconditionalBranch
            | FlowControl::ConditionalBranch
            | FlowControl::Return
            | FlowControl::IndirectBranch => {}
            // A call is moved as `push <its return address>; jmp <target>`, so the callee
            // returns to the original code and unwinding never sees the trampoline. Its
            // operand must not read rsp (the push moves it).
            FlowControl::Call if i.is_call_near() => {}
            FlowControl::IndirectCall if i.code() == Code::Call_rm64 && !reads_rsp(i) => {}
            _ => return Err(Refusal::NotPlainPrologue),
        }
        len += i.len();
        moved.push(*i);
    }
    if len < JMP_LEN {
        return Err(Refusal::TooShort);
    }
    // A call must be the last moved instruction: the code after it (where it returns) stays.
    let is_call = |i: &Instruction| matches!(i.flow_control(), FlowControl::Call | FlowControl::IndirectCall);
    if moved[..moved.len() - 1].iter().any(is_call) {
        return Err(Refusal::NotPlainPrologue);
    }
    if len > SLOT - HEAD - JMP_LEN - 16 {
        return Err(Refusal::TooLong);
    }
    let end = ip + len as u64;
    for i in &all {
        let jumps = matches!(i.flow_control(), FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch);
        if jumps && i.near_branch_target() >= ip && i.near_branch_target() < end {
            return Err(Refusal::JumpTarget);
        }
    }
    Ok(moved)
}

/// The plan for a function shorter than the 5-byte jump (`ret`, `xor eax, eax; ret`, a tail
/// `jmp` with an 8-bit displacement): `code` is its `len` bytes, then the bytes up to the next
/// function's start. The jump may cover the alignment padding after the function when that
/// padding is only `nop`s and `int3`s (no code runs there), the function's last instruction
/// leaves it (return or jump: nothing runs on into the padding) and nothing in it jumps back
/// into its first 5 bytes. All its instructions are moved; the trampoline never comes back.
pub(crate) fn plan_short(code: &[u8], len: usize, ip: u64) -> Result<Vec<Instruction>, Refusal> {
    if len == 0 || len >= JMP_LEN || code.len() < JMP_LEN {
        return Err(Refusal::TooShort);
    }
    let moved = decode_all(&code[..len], ip)?;
    let ends =
        |i: &Instruction| matches!(i.flow_control(), FlowControl::Return | FlowControl::UnconditionalBranch | FlowControl::IndirectBranch);
    let plain = |i: &Instruction| matches!(i.flow_control(), FlowControl::Next | FlowControl::ConditionalBranch) || ends(i);
    if !moved.iter().all(plain) || !moved.last().is_some_and(ends) {
        return Err(Refusal::TooShort);
    }
    let end = ip + JMP_LEN as u64;
    if moved.iter().any(|i| i.flow_control() != FlowControl::Next && (ip..end).contains(&i.near_branch_target())) {
        return Err(Refusal::JumpTarget);
    }
    let mut pad = Decoder::with_ip(64, &code[len..], ip + len as u64, DecoderOptions::NONE);
    while (pad.ip() - ip) < JMP_LEN as u64 {
        let i = pad.decode();
        if i.is_invalid() || !matches!(i.mnemonic(), Mnemonic::Nop | Mnemonic::Int3) {
            return Err(Refusal::TooShort);
        }
    }
    Ok(moved)
}

/// How far past a function `plan_short` looks for padding: at most the largest alignment
/// compilers give functions.
const PADDING_MAX: u64 = 64;

/// Whether an instruction's operands read rsp (a register or a memory address).
fn reads_rsp(i: &Instruction) -> bool {
    let rsp = |r: Register| matches!(r, Register::RSP | Register::ESP);
    rsp(i.memory_base()) || rsp(i.memory_index()) || (0..i.op_count()).any(|k| i.op_kind(k) == OpKind::Register && rsp(i.op_register(k)))
}

/// The C runtime's start-up and tear-down functions, never patched.
fn is_runtime(name: &str) -> bool {
    const NAMES: [&str; 8] = [
        "_start",
        "_init",
        "_fini",
        "deregister_tm_clones",
        "register_tm_clones",
        "__do_global_dtors_aux",
        "frame_dummy",
        "_dl_relocate_static_pie",
    ];
    NAMES.contains(&name) || name.starts_with("__libc_csu") || name.starts_with("__x86.get_pc_thunk")
}

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
    hook = sym slt_patched_enter,
    avx = sym SIMD_MODE,
);

/// The stub's vector-state mode (see the stub): 0 no AVX, 1 AVX and XGETBV(1) tells whether
/// the upper halves are in use, 2 AVX without that (always whole ymm). Set before anything
/// is patched; read by the stub as one byte.
static SIMD_MODE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

extern "C" {
    /// Never called from Rust: its address goes into the trampolines (the stub above).
    fn slt_patch_stub();
    /// None: swaps the calling thread's guard byte (`slt_patch_guard`, a TLS byte defined with
    /// the stub), returns the old one.
    fn slt_patch_guard_swap(new: u8) -> u8;
}

/// Sets this thread's patch guard while alive (patched functions called meanwhile are not
/// recorded: the shim's own calls while it patches or reports), and puts the old value back.
pub(crate) struct Guard(u8);

impl Guard {
    pub(crate) fn set() -> Guard {
        // SAFETY: reads and writes this thread's guard byte.
        Guard(unsafe { slt_patch_guard_swap(1) })
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // SAFETY: as in `set`.
        unsafe { slt_patch_guard_swap(self.0) };
    }
}

/// Called by the stub: the entry of the patched function `func`, whose stack pointer at entry
/// was `sp` (its CFA is `sp + 8`, registered with frames.rs when it was patched).
extern "C" fn slt_patched_enter(func: u64, sp: u64) {
    // SAFETY: hot.c's entry point; it only touches this thread's block.
    unsafe { crate::hot::slt_enter(func as *mut libc::c_void, sp) }
}

impl Refusal {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Refusal::TooShort => "shorter than 5 bytes",
            Refusal::Undecodable => "undecodable",
            Refusal::NotPlainPrologue => "a call before the end of its first bytes, a call through rsp or a far branch",
            Refusal::JumpTarget => "a jump target in its first bytes",
            Refusal::RuntimeStartup => "C runtime start-up",
            Refusal::ColdFragment => "a .cold fragment, not an entry",
            Refusal::TooLong => "no room for its trampoline",
            Refusal::Protection => "its code page cannot be made writable, or its trampoline executable (mprotect refused)",
        }
    }
}

/// Counts of one object's patching.
#[derive(Debug, Default, Clone)]
pub(crate) struct Report {
    pub patched: usize,
    pub refused: Vec<(String, Refusal)>,
    /// (entry, end of the bytes moved to its trampoline) of each function planned: code
    /// there runs from the trampoline's copy (probe.rs plants no probe in it).
    pub moved: Vec<(u64, u64)>,
}

/// Set up once, before the first object is patched (the stub's choice of registers).
pub(crate) fn init() {
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

/// Patch the functions of the object loaded at `base` (its first page: symbol offsets count
/// from there), whose symbols are `syms`. Its code must not be running in another thread:
/// objects.rs calls this from the constructor (one thread) and right after `dlopen` loaded
/// the object (its code ran only in its constructors, on this thread, which returned).
pub(crate) fn patch_object(base: u64, syms: &crate::filter::Symbols) -> Report {
    let mut report = Report::default();
    let mut plans = Vec::new();
    for (k, (off, size, name)) in syms.funcs.iter().enumerate() {
        if name.contains(".cold") {
            report.refused.push((name.clone(), Refusal::ColdFragment));
            continue;
        }
        if is_runtime(name) {
            report.refused.push((name.clone(), Refusal::RuntimeStartup));
            continue;
        }
        let addr = base + off;
        let planned = if *size < JMP_LEN as u64 {
            // The next function's start bounds the padding (symbols are sorted by start).
            match syms.funcs[k + 1..].iter().map(|f| f.0).find(|&o| o > *off) {
                Some(next) if next - off >= JMP_LEN as u64 && next - off <= PADDING_MAX => {
                    // SAFETY: the bytes up to the next function's start lie in the object's
                    // mapped, readable text (between two functions of one text section).
                    let code = unsafe { std::slice::from_raw_parts(addr as *const u8, (next - off) as usize) };
                    plan_short(code, *size as usize, addr)
                }
                _ => Err(Refusal::TooShort),
            }
        } else {
            // SAFETY: the symbol lies in the program's mapped, readable text.
            let code = unsafe { std::slice::from_raw_parts(addr as *const u8, *size as usize) };
            plan(code, addr)
        };
        match planned {
            Ok(moved) => plans.push((addr, name, moved)),
            Err(r) => report.refused.push((name.clone(), r)),
        }
    }
    if plans.is_empty() {
        return report;
    }
    let lo = plans.iter().map(|p| p.0).min().unwrap_or(base);
    let hi = plans.iter().map(|p| p.0).max().unwrap_or(base);
    let size = (plans.len() * SLOT).next_multiple_of(4096);
    let Some(area) = alloc_near(lo, hi, size) else {
        for (_, name, _) in &plans {
            report.refused.push((name.to_string(), Refusal::TooLong));
        }
        return report;
    };
    let mut patches = Vec::new();
    for (k, (addr, name, moved)) in plans.iter().enumerate() {
        let tramp = area + (k * SLOT) as u64;
        let (plain, call) = match moved.split_last() {
            Some((last, rest)) if last.is_call_near() || last.code() == Code::Call_rm64 => (rest, Some(*last)),
            _ => (&moved[..], None),
        };
        let block = InstructionBlock::new(plain, tramp + HEAD as u64);
        let Ok(enc) = BlockEncoder::encode(64, block, BlockEncoderOptions::NONE) else {
            report.refused.push(((*name).clone(), Refusal::Undecodable));
            continue;
        };
        let mut code = enc.code_buffer;
        if let Some(c) = call {
            let ret = c.next_ip();
            code.extend_from_slice(&[0x48, 0x8d, 0x64, 0x24, 0xf8]); // lea rsp, [rsp - 8]
            code.extend_from_slice(&[0xc7, 0x04, 0x24]); // mov dword ptr [rsp], lo
            code.extend_from_slice(&(ret as u32).to_le_bytes());
            code.extend_from_slice(&[0xc7, 0x44, 0x24, 0x04]); // mov dword ptr [rsp + 4], hi
            code.extend_from_slice(&((ret >> 32) as u32).to_le_bytes());
            if c.is_call_near() {
                let at = tramp + (HEAD + code.len() + JMP_LEN) as u64;
                code.push(0xe9); // jmp target
                code.extend_from_slice(&((c.near_branch_target() as i64 - at as i64) as i32).to_le_bytes());
            } else {
                // `call r/m64` becomes `jmp r/m64`, same operand.
                let mut j = c;
                j.set_code(Code::Jmp_rm64);
                let jmp = [j];
                let block = InstructionBlock::new(&jmp, tramp + (HEAD + code.len()) as u64);
                let Ok(enc) = BlockEncoder::encode(64, block, BlockEncoderOptions::NONE) else {
                    report.refused.push((name.to_string(), Refusal::Undecodable));
                    continue;
                };
                code.extend_from_slice(&enc.code_buffer);
            }
        }
        if HEAD + code.len() + JMP_LEN > SLOT {
            report.refused.push(((*name).clone(), Refusal::TooLong));
            continue;
        }
        let moved_len: usize = moved.iter().map(|i| i.len()).sum();
        report.moved.push((*addr, addr + moved_len as u64));
        let mut t = Vec::with_capacity(SLOT);
        t.extend_from_slice(&addr.to_le_bytes());
        t.extend_from_slice(&(slt_patch_stub as *const () as u64).to_le_bytes());
        t.extend_from_slice(&[0xff, 0x15]);
        t.extend_from_slice(&(-14i32).to_le_bytes());
        t.extend_from_slice(&code);
        let back = addr + moved_len as u64;
        let here = tramp + t.len() as u64 + JMP_LEN as u64;
        t.push(0xe9);
        t.extend_from_slice(&((back as i64 - here as i64) as i32).to_le_bytes());
        // SAFETY: the slot lies in the area just mapped writable, SLOT bytes each.
        unsafe { std::ptr::copy_nonoverlapping(t.as_ptr(), tramp as *mut u8, t.len()) };
        // The entry jumps to the trampoline's `call` (after its two addresses).
        let rel = (tramp + 16) as i64 - (addr + JMP_LEN as u64) as i64;
        let mut jmp = [0xe9u8, 0, 0, 0, 0];
        jmp[1..].copy_from_slice(&(rel as i32).to_le_bytes());
        patches.push((*addr, jmp, (*name).clone()));
    }
    // SAFETY: the area was mapped by alloc_near with `size` bytes.
    if unsafe { libc::mprotect(area as *mut libc::c_void, size, libc::PROT_READ | libc::PROT_EXEC) } != 0 {
        // Trampolines that cannot run: no entry may jump to them.
        report.refused.extend(patches.into_iter().map(|p| (p.2, Refusal::Protection)));
        // SAFETY: unmapping the area mapped above, which nothing refers to.
        unsafe { libc::munmap(area as *mut libc::c_void, size) };
        return report;
    }
    frames::set_cfa_offsets(&patches.iter().map(|p| p.0).collect::<Vec<_>>(), 8);
    patches.sort_unstable_by_key(|p| p.0);
    for run in page_runs(&patches) {
        let (page, end) = (run[0].0 & !4095, (run[run.len() - 1].0 + JMP_LEN as u64).next_multiple_of(4096));
        // SAFETY: every page of [page, end) holds the entry of a function patched here (runs
        // join only pages that touch), so all are the object's text, readable and executable;
        // they are made writable only while the entries are replaced, then executable again.
        // No other thread runs this object's code yet (see above), except one its own
        // constructors started before `dlopen` returned: that one could run an entry while
        // its 5 bytes are replaced (not guarded against).
        unsafe {
            if libc::mprotect(page as *mut libc::c_void, (end - page) as usize, libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) != 0 {
                report.refused.extend(run.iter().map(|p| (p.2.clone(), Refusal::Protection)));
                continue;
            }
            for (addr, jmp, _) in run {
                std::ptr::copy_nonoverlapping(jmp.as_ptr(), *addr as *mut u8, JMP_LEN);
            }
            libc::mprotect(page as *mut libc::c_void, (end - page) as usize, libc::PROT_READ | libc::PROT_EXEC);
        }
        report.patched += run.len();
    }
    report
}

/// `patches` (sorted by address) cut into runs whose entries' pages touch: a run's pages all
/// hold a patched entry, so one `mprotect` each way covers it (one pair per run instead of per
/// function: 14,463 functions of the `slice` binary took 28,926 calls).
fn page_runs<T>(patches: &[(u64, [u8; JMP_LEN], T)]) -> impl Iterator<Item = &[(u64, [u8; JMP_LEN], T)]> {
    let last_page = |p: &(u64, [u8; JMP_LEN], T)| (p.0 + JMP_LEN as u64 - 1) & !4095;
    patches.chunk_by(move |a, b| b.0 & !4095 <= last_page(a) + 4096)
}

/// Map `size` bytes, readable and writable, within ±2 GiB of every address in `[lo, hi]`.
pub(crate) fn alloc_near(lo: u64, hi: u64, size: usize) -> Option<u64> {
    const RANGE: u64 = (1 << 31) - (1 << 24);
    let fits = |a: u64| a.abs_diff(lo) < RANGE && (a + size as u64).abs_diff(hi) < RANGE;
    let mut hint = (hi + (1 << 20)) & !0xffff;
    for _ in 0..64 {
        // SAFETY: an anonymous private mapping at a hint (not MAP_FIXED: nothing is replaced).
        let p = unsafe {
            libc::mmap(hint as *mut libc::c_void, size, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        if p != libc::MAP_FAILED {
            if fits(p as u64) {
                return Some(p as u64);
            }
            // SAFETY: unmapping what we just mapped.
            unsafe { libc::munmap(p, size) };
        }
        hint += 16 << 20;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries whose pages touch share one `mprotect` pair; a page with no entry between two
    /// entries splits them (it could be another segment's).
    #[test]
    fn entries_on_touching_pages_are_written_in_one_run() {
        let p = |a: u64| (a, [0u8; JMP_LEN], ());
        // 0x1ffe's jump ends on page 0x2000, which 0x2100 shares; 0x3000 touches 0x2000;
        // 0x5000 is two pages on.
        let patches = [p(0x1000), p(0x1ffe), p(0x2100), p(0x3000), p(0x5000), p(0x5010)];
        let runs: Vec<Vec<u64>> = page_runs(&patches).map(|r| r.iter().map(|x| x.0).collect()).collect();
        assert_eq!(runs, vec![vec![0x1000, 0x1ffe, 0x2100, 0x3000], vec![0x5000, 0x5010]]);
        let far = [p(0x1000), p(0x3000)];
        assert_eq!(page_runs(&far).count(), 2, "page 0x2000 holds no entry");
    }

    #[test]
    fn prologues_are_moved_or_refused_for_a_reason() {
        // push rbp; mov rbp,rsp; sub rsp,0x10; ... ret
        let f = [0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10, 0xc9, 0xc3];
        let moved = plan(&f, 0x1000).unwrap();
        assert_eq!(moved.iter().map(|i| i.len()).sum::<usize>(), 8);
        // A loop back to the second instruction: a jump target in the moved bytes.
        let f = [0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10, 0xeb, 0xf7];
        assert_eq!(plan(&f, 0x1000).unwrap_err(), Refusal::JumpTarget);
        // A tail jump, a call: moved (the call as push + jmp).
        assert_eq!(plan(&[0xe9, 0, 0, 0, 0, 0xc3], 0x1000).unwrap().len(), 1);
        assert_eq!(plan(&[0x48, 0x83, 0xec, 0x08, 0xe8, 0, 0, 0, 0, 0xc3], 0x1000).unwrap().len(), 2);
        // An indirect call is not.
        assert_eq!(plan(&[0xff, 0xd0, 0x90, 0x90, 0x90, 0xc3], 0x1000).unwrap_err(), Refusal::NotPlainPrologue);
        assert_eq!(plan(&[0xc3, 0x90], 0x1000).unwrap_err(), Refusal::TooShort);
        // Shorter than the jump: moved whole when padding follows it and it leaves by a
        // return or a jump.
        let ret_int3 = [0xc3, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc];
        assert_eq!(plan_short(&ret_int3, 1, 0x1000).unwrap().len(), 1);
        // xor eax, eax; ret; then a 10-byte nop (data16 cs nopw 0x0(%rax,%rax,1)).
        let xor_ret = [0x31, 0xc0, 0xc3, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0];
        assert_eq!(plan_short(&xor_ret, 3, 0x1000).unwrap().len(), 2);
        // jmp with an 8-bit displacement (a tail call), then nops.
        assert_eq!(plan_short(&[0xeb, 0x0e, 0x90, 0x90, 0x90, 0x90], 2, 0x1000).unwrap().len(), 1);
        // Not padding after it (another function's code), too little room, code that runs on
        // into the padding, a jump back into the first 5 bytes: refused.
        assert_eq!(plan_short(&[0xc3, 0x55, 0x48, 0x89, 0xe5], 1, 0x1000).unwrap_err(), Refusal::TooShort);
        assert_eq!(plan_short(&[0xc3, 0xcc, 0xcc, 0xcc], 1, 0x1000).unwrap_err(), Refusal::TooShort);
        assert_eq!(plan_short(&[0x31, 0xc0, 0x90, 0x90, 0x90, 0x90], 2, 0x1000).unwrap_err(), Refusal::TooShort);
        assert_eq!(plan_short(&[0xeb, 0xfe, 0x90, 0x90, 0x90], 2, 0x1000).unwrap_err(), Refusal::JumpTarget);
        assert_eq!(plan_short(&[0x75, 0x02, 0xc3, 0x90, 0x90], 3, 0x1000).unwrap_err(), Refusal::JumpTarget);
        // An indirect tail jump is moved; an indirect call only as the last moved
        // instruction and not through rsp.
        assert_eq!(plan(&[0x48, 0x8b, 0x07, 0xff, 0x60, 0x08], 0x1000).unwrap().len(), 2);
        assert_eq!(plan(&[0x48, 0x83, 0xec, 0x08, 0xff, 0x15, 0, 0, 0, 0, 0xc3], 0x1000).unwrap().len(), 2);
        assert_eq!(plan(&[0x48, 0x83, 0xec, 0x08, 0xff, 0x54, 0x24, 0x08, 0xc3], 0x1000).unwrap_err(), Refusal::NotPlainPrologue);
        // A RIP-relative load is moved (and re-targeted by the encoder).
        let f = [0x48, 0x8b, 0x05, 0x10, 0, 0, 0, 0xc3];
        assert_eq!(plan(&f, 0x1000).unwrap().len(), 1);
    }
}
