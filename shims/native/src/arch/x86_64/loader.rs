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
    // The usual shapes are told without the decoder, whose tables cost a process about a
    // millisecond and a megabyte to set up: every process of a run installs the hook, most of
    // them (a shell's `ls`, `true`) patching nothing else.
    if known_shape(code) {
        return true;
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

/// The padding assemblers write after a function (`nop`, `int3`, the multi-byte `nop`s of
/// GNU as, with their `66` and `cs` prefixes): its length at the start of `code`, if it is one.
fn padding_len(code: &[u8]) -> Option<usize> {
    // The multi-byte nops `0f 1f /0`, by their ModRM (with a SIB byte where it needs one).
    const NOPS: [&[u8]; 6] = [
        &[0x0f, 0x1f, 0x00],
        &[0x0f, 0x1f, 0x40, 0x00],
        &[0x0f, 0x1f, 0x44, 0x00, 0x00],
        &[0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00],
        &[0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
        &[0x0f, 0x1f, 0x04, 0x00],
    ];
    match code.first()? {
        0x90 | 0xcc => return Some(1),
        _ => {}
    }
    // Prefixes: operand size (any number, at most 14 bytes in all), then at most one `cs`.
    let mut at = code.iter().take_while(|b| **b == 0x66).count();
    if code.get(at) == Some(&0x2e) {
        at += 1;
    }
    let rest = &code[at..];
    let n = NOPS.iter().find(|n| rest.starts_with(n))?.len();
    (at + n <= 15).then_some(at + n)
}

/// [`replaceable`]'s usual shapes, told without a decoder: `ret` or `endbr64; ret`, then
/// padding ([`padding_len`]) up to the 5th byte at least. `false`: not one of them (the
/// decoder decides).
fn known_shape(code: &[u8]) -> bool {
    let mut at = if code.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa, 0xc3]) {
        5
    } else if code.first() == Some(&0xc3) {
        1
    } else {
        return false;
    };
    while at < 5 {
        match code.get(at..).and_then(padding_len) {
            Some(n) if at + n <= code.len() => at += n,
            _ => return false,
        }
    }
    true
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

    /// The shapes told without the decoder are the ones it accepts: each agrees with it.
    #[test]
    fn the_shapes_told_without_the_decoder_agree_with_it() {
        let decoded = |code: &[u8]| {
            use iced_x86::{Decoder, DecoderOptions, Mnemonic};
            let mut d = Decoder::with_ip(64, code, 0x1000, DecoderOptions::NONE);
            let (mut len, mut returned) = (0usize, false);
            while len < 5 && d.can_decode() {
                let i = d.decode();
                let ok = match i.mnemonic() {
                    Mnemonic::Endbr64 => !returned && len == 0,
                    Mnemonic::Ret => !returned && i.op_count() == 0,
                    Mnemonic::Nop | Mnemonic::Int3 => returned,
                    _ => false,
                };
                if i.is_invalid() || !ok {
                    return false;
                }
                returned |= i.mnemonic() == Mnemonic::Ret;
                len += i.len();
            }
            returned && len >= 5
        };
        let shapes: [&[u8]; 12] = [
            &[0xc3, 0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0, 0x0f, 0x1f, 0x40, 0],
            &[0xc3, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0],
            &[0xc3, 0x0f, 0x1f, 0x44, 0, 0],
            &[0xc3, 0x0f, 0x1f, 0x40, 0],
            &[0xc3, 0x0f, 0x1f, 0x00, 0x90],
            &[0xc3, 0x90, 0x90, 0x90, 0x90],
            &[0xc3, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc],
            &[0xc3, 0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0],
            &[0xc3, 0x0f, 0x1f, 0x80, 0, 0, 0, 0],
            &[0xc3, 0x0f, 0x1f, 0x04, 0x00],
            &[0xf3, 0x0f, 0x1e, 0xfa, 0xc3, 0x55],
            &[0xf3, 0x0f, 0x1e, 0xfa, 0xc3],
        ];
        for code in shapes {
            assert!(known_shape(code) && decoded(code), "{code:x?}");
        }
        // Not told (the decoder decides): too short, another function's code, no ret first.
        let others: [&[u8]; 5] = [
            &[0xc3, 0x90],
            &[0xc3, 0x55, 0x48, 0x89, 0xe5],
            &[0xc3, 0x0f, 0x1f],
            &[0x90, 0xc3, 0x90, 0x90, 0x90],
            &[0xc3, 0x0f, 0x1f, 0x44],
        ];
        for code in others {
            assert!(!known_shape(code), "{code:x?}");
        }
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
