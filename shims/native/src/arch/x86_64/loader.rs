//! The shape of glibc's debugger hook on x86-64 (`_dl_debug_state`, which the shim replaces:
//! loaderhook.rs), and the jumps that send it to the shim's handler.
//!
//! What is overwritten: the function's `ret` (or `endbr64; ret`) and the alignment padding
//! after it, 5 bytes, only when the function starts on a 16-byte boundary and those bytes
//! are that instruction and padding (`nop`s or `int3`s), so that no other function's bytes
//! are touched. The jump goes to a trampoline within ±2 GiB that jumps on to the handler.

use super::relocate::{jmp_rel32, JMP_LEN};

/// Bytes read at the hook: 16 from a 16-byte boundary stay in its page.
pub(super) const HOOK_READ: usize = 16;

/// Whether the code at `brk` is an empty function the hook may replace: it starts on a
/// 16-byte boundary with `ret` or `endbr64; ret`, and the bytes up to the 5th after it are
/// that and padding.
pub(super) fn replaceable(code: &[u8], brk: u64) -> bool {
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

/// The trampoline at `area` (`jmp [rip + 0]; .quad handler`) and the `jmp rel32` at `brk`
/// to it, or `None` when `area` is beyond a `rel32`'s reach.
pub(super) fn hook_jump(brk: u64, area: u64, handler: u64) -> Option<(Vec<u8>, [u8; JMP_LEN])> {
    let mut t = vec![0xff, 0x25, 0, 0, 0, 0];
    t.extend_from_slice(&handler.to_le_bytes());
    i32::try_from(area as i64 - (brk as i64 + JMP_LEN as i64)).ok()?;
    Some((t, jmp_rel32(brk, area)))
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

    #[test]
    fn the_hook_jumps_to_a_trampoline_that_jumps_on_to_the_handler() {
        let (t, jmp) = hook_jump(0x1000, 0x2000, 0xdead_beef).unwrap();
        assert_eq!(t[..6], [0xff, 0x25, 0, 0, 0, 0], "jmp [rip + 0]");
        assert_eq!(t[6..], 0xdead_beefu64.to_le_bytes());
        assert_eq!(jmp, [0xe9, 0xfb, 0x0f, 0, 0], "jmp 0x2000 from 0x1005");
        assert_eq!(hook_jump(0x1000, 1 << 40, 0), None, "beyond rel32's reach");
    }
}
