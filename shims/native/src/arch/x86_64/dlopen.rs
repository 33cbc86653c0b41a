//! The shim's `dlopen` and `dlmopen` on x86-64: each passes its caller's return address
//! (`[rsp]` at entry) on as one more argument to the wrapper in objects.rs (the real `dlopen`
//! searches a bare name with its caller's paths, and the caller it sees is the shim).

// `dlopen(filename, flags)`: the caller's return address goes into rdx, the third argument.
std::arch::global_asm!(
    ".pushsection .text.slt_dlopen_entry,\"ax\",@progbits",
    ".globl dlopen",
    ".type dlopen,@function",
    "dlopen:",
    "mov rdx, qword ptr [rsp]",
    "jmp {wrapper}",
    ".size dlopen, . - dlopen",
    ".popsection",
    wrapper = sym crate::objects::slt_dlopen,
);

// `dlmopen(lmid, filename, flags)`: into rcx, the fourth.
std::arch::global_asm!(
    ".pushsection .text.slt_dlmopen_entry,\"ax\",@progbits",
    ".globl dlmopen",
    ".type dlmopen,@function",
    "dlmopen:",
    "mov rcx, qword ptr [rsp]",
    "jmp {wrapper}",
    ".size dlmopen, . - dlmopen",
    ".popsection",
    wrapper = sym crate::objects::slt_dlmopen,
);
