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
//! What is overwritten is the architecture's to say ([`Isa::hook_site`]: on x86-64 the
//! function's `ret` and the alignment padding after it, so that no other function's bytes are
//! touched); the jump goes to a trampoline within the jump's reach that goes on to the
//! handler ([`Isa::hook_jump`]).

use crate::arch::{Isa, Native};
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
    // SAFETY: r_brk is the address of a function of the loader's mapped text; the
    // architecture reads only bytes that stay in its page (`Isa::HOOK_READ`).
    let code = unsafe { std::slice::from_raw_parts(brk as *const u8, Native::HOOK_READ) };
    if !Native::hook_site(code, brk) {
        return false;
    }
    let Some(area) = crate::patch::alloc_near(brk, brk, 4096, Native::REACH) else { return false };
    let Some((t, jmp)) = Native::hook_jump(brk, area, slt_loader_state as *const () as u64) else { return false };
    let jmp = jmp.as_ref();
    R_DEBUG.store(r as u64, Ordering::Release);
    // SAFETY: the area was just mapped writable, 4096 bytes (the trampoline is a few bytes);
    // then made executable. The loader's page holding r_brk is made writable only while the
    // jump's bytes are replaced (no other thread exists; the loader is not running: we are in
    // a constructor it called, not between its calls of r_brk), then executable again.
    unsafe {
        std::ptr::copy_nonoverlapping(t.as_ptr(), area as *mut u8, t.len().min(4096));
        if libc::mprotect(area as *mut libc::c_void, 4096, libc::PROT_READ | libc::PROT_EXEC) != 0 {
            R_DEBUG.store(0, Ordering::Release);
            return false;
        }
        Native::code_written(area, 4096);
        let page = brk & !4095;
        let len = (brk + jmp.len() as u64 - page).next_multiple_of(4096) as usize;
        if libc::mprotect(page as *mut libc::c_void, len, libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) != 0 {
            R_DEBUG.store(0, Ordering::Release);
            return false;
        }
        std::ptr::copy_nonoverlapping(jmp.as_ptr(), brk as *mut u8, jmp.len());
        libc::mprotect(page as *mut libc::c_void, len, libc::PROT_READ | libc::PROT_EXEC);
        Native::code_written(brk, jmp.len());
    }
    true
}
