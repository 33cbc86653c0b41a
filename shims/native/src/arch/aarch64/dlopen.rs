//! The shim's `dlopen` and `dlmopen` on AArch64: each passes its caller's return address
//! (x30, the link register, at entry) on as one more argument to the wrapper in objects.rs
//! (the real `dlopen` searches a bare name with its caller's paths, and the caller it sees is
//! the shim).

// `dlopen(filename, flags)`: the caller's return address goes into x2, the third argument.
std::arch::global_asm!(
    ".pushsection .text.slt_dlopen_entry,\"ax\",@progbits",
    ".globl dlopen",
    ".type dlopen,@function",
    "dlopen:",
    "mov x2, x30",
    "b {wrapper}",
    ".size dlopen, . - dlopen",
    ".popsection",
    wrapper = sym crate::objects::slt_dlopen,
);

// `dlmopen(lmid, filename, flags)`: into x3, the fourth.
std::arch::global_asm!(
    ".pushsection .text.slt_dlmopen_entry,\"ax\",@progbits",
    ".globl dlmopen",
    ".type dlmopen,@function",
    "dlmopen:",
    "mov x3, x30",
    "b {wrapper}",
    ".size dlmopen, . - dlmopen",
    ".popsection",
    wrapper = sym crate::objects::slt_dlmopen,
);
