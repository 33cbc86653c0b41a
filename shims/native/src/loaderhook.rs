//! Patching a `dlopen`ed object before its constructors run: the dynamic loader tells
//! debuggers about new objects by calling an empty function whose address it publishes in
//! `_r_debug.r_brk` (glibc's `_dl_debug_state`). It does so with `r_state == RT_CONSISTENT`
//! once a `dlopen`'s objects are mapped, before they are relocated and before their
//! constructors run (`elf/dl-open.c`), and again after a `dlclose` or a failed `dlopen` has
//! unmapped them. gdb puts a breakpoint there to set its own in a library before its
//! constructors run; the shim puts a jump to [`slt_loader_state`] there instead, and patches
//! the new objects from it ([`crate::objects::patch_from_loader`]). Without it (an `r_brk`
//! whose code is not the empty function the shim knows), the objects are patched when
//! `dlopen` returns, as before, and their constructors are not recorded.
//!
//! What is overwritten: the function's `ret` (or `endbr64; ret`) and the alignment padding
//! after it, 5 bytes, only when the function starts on a 16-byte boundary and those bytes
//! are that instruction and padding (`nop`s or `int3`s), so that no other function's bytes
//! are touched. The jump goes to a trampoline within ±2 GiB that jumps on to the handler.

use crate::loaded::{RDebug, RT_CONSISTENT};
use std::sync::atomic::{AtomicU64, Ordering};

/// Address of `_r_debug`, once the hook is in place (0 before).
static R_DEBUG: AtomicU64 = AtomicU64::new(0);

/// The loader's debugger hook: patch the objects just mapped. Reached by a jump from the
/// loader's `_dl_debug_state`, so it is that function for the loader: no arguments, no
/// result, the C ABI.
extern "C" fn slt_loader_state() {
    let r = R_DEBUG.load(Ordering::Acquire);
    if r == 0 {
        return;
    }
    // SAFETY: R_DEBUG is `_r_debug`, the loader's static struct, for the life of the process.
    let state = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*(r as *const RDebug)).r_state)) };
    if state == RT_CONSISTENT {
        crate::objects::patch_from_loader();
    }
}

/// Whether the code at `brk` is an empty function the hook may replace: it starts on a
/// 16-byte boundary with `ret` or `endbr64; ret`, and the bytes up to the 5th after it are
/// that and padding.
fn replaceable(code: &[u8], brk: u64) -> bool {
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};
    if brk % 16 != 0 {
        return false;
    }
    let mut d = Decoder::with_ip(64, code, brk, DecoderOptions::NONE);
    let mut len = 0usize;
    let mut returned = false;
    while len < 5 && d.can_decode() {
        let i = d.decode();
        if i.is_invalid() {
            return false;
        }
        let ok = match i.mnemonic() {
            Mnemonic::Endbr64 => !returned && len == 0,
            Mnemonic::Ret => !returned && i.op_count() == 0,
            Mnemonic::Nop | Mnemonic::Int3 => returned,
            _ => false,
        };
        if !ok {
            return false;
        }
        returned |= i.mnemonic() == Mnemonic::Ret;
        len += i.len();
    }
    returned && len >= 5
}

/// Put the jump in place. Called by the shim's constructor (no other thread exists yet) when
/// it patches; false when the loader's hook is not one it knows (then nothing is written).
pub(crate) fn install() -> bool {
    let r = crate::loaded::r_debug();
    if r.is_null() {
        return false;
    }
    // SAFETY: `_r_debug` is the loader's static struct; r_brk is set before any constructor.
    let brk = unsafe { (*r).r_brk };
    if brk == 0 {
        return false;
    }
    // SAFETY: r_brk is the address of a function of the loader's mapped text; 16 bytes from
    // a 16-byte boundary stay in its page.
    let code = unsafe { std::slice::from_raw_parts(brk as *const u8, 16) };
    if !replaceable(code, brk) {
        return false;
    }
    let Some(area) = crate::patch::alloc_near(brk, brk, 4096) else { return false };
    // jmp [rip + 0]; .quad slt_loader_state
    let mut t = vec![0xff, 0x25, 0, 0, 0, 0];
    t.extend_from_slice(&(slt_loader_state as *const () as u64).to_le_bytes());
    let rel = area as i64 - (brk as i64 + 5);
    let Ok(rel) = i32::try_from(rel) else { return false };
    let mut jmp = [0xe9u8, 0, 0, 0, 0];
    jmp[1..].copy_from_slice(&rel.to_le_bytes());
    R_DEBUG.store(r as u64, Ordering::Release);
    // SAFETY: the area was just mapped writable, 4096 bytes; then made executable. The
    // loader's page holding r_brk is made writable only while its 5 bytes are replaced (no
    // other thread exists; the loader is not running: we are in a constructor it called, not
    // between its calls of r_brk), then executable again.
    unsafe {
        std::ptr::copy_nonoverlapping(t.as_ptr(), area as *mut u8, t.len());
        if libc::mprotect(area as *mut libc::c_void, 4096, libc::PROT_READ | libc::PROT_EXEC) != 0 {
            R_DEBUG.store(0, Ordering::Release);
            return false;
        }
        let page = brk & !4095;
        let len = (brk + 5 - page).next_multiple_of(4096) as usize;
        if libc::mprotect(page as *mut libc::c_void, len, libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) != 0 {
            R_DEBUG.store(0, Ordering::Release);
            return false;
        }
        std::ptr::copy_nonoverlapping(jmp.as_ptr(), brk as *mut u8, 5);
        libc::mprotect(page as *mut libc::c_void, len, libc::PROT_READ | libc::PROT_EXEC);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_empty_function_and_its_padding_are_replaced() {
        // glibc 2.36's _dl_debug_state: ret, then a 15-byte nop run to the next function.
        let glibc = [0xc3, 0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0, 0x0f, 0x1f, 0x40, 0];
        assert!(replaceable(&glibc, 0x2060));
        // With CET: endbr64; ret (exactly 5 bytes).
        assert!(replaceable(&[0xf3, 0x0f, 0x1e, 0xfa, 0xc3, 0x55, 0x48, 0x89, 0xe5], 0x1000));
        // ret then int3 padding.
        assert!(replaceable(&[0xc3, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc], 0x1000));
        // Not on a 16-byte boundary: the padding could be short.
        assert!(!replaceable(&glibc, 0x2061));
        // ret followed by another function's code within 5 bytes.
        assert!(!replaceable(&[0xc3, 0x55, 0x48, 0x89, 0xe5], 0x1000));
        // Not an empty function.
        assert!(!replaceable(&[0x55, 0x48, 0x89, 0xe5, 0xc3, 0x90], 0x1000));
        // ret imm16, and too few bytes to decode.
        assert!(!replaceable(&[0xc2, 0x08, 0x00, 0x90, 0x90, 0x90], 0x1000));
        assert!(!replaceable(&[0xc3, 0x90], 0x1000));
    }
}
