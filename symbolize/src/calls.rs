//! The direct calls a function's machine code makes, with the address of each call: what lets
//! the analyzer place a recorded call under the inlined function whose code made it
//! (docs/native-recording.md, "Calls made by inlined code").
//!
//! A recorded call says which function called which, not from where in the caller: a call
//! made by code the compiler inlined into the caller (`hexyl::run` inlined into `main`) is
//! recorded as the caller's. The call instruction's address says more: it lies in the address
//! ranges of the inlined instances it belongs to (`DW_TAG_inlined_subroutine`), which
//! [`crate::functions::ObjectFile::functions_at`] gives for any address. This module reads the
//! code: every `call` with a target in the instruction (`call rel32`), and every jump with such
//! a target outside the function (a tail call: the callee is recorded as the function's
//! callee too). Calls through a register or memory (function pointers, virtual methods, the
//! PLT's `jmp *got`) name no target here and are not listed as calls; but an instruction that
//! takes an address in its code (`lea` of a RIP-relative operand, an immediate: `lea rcx,
//! [rip+cmp_len]` before `qsort`, a pointer called later) is listed as `taken`, since a call
//! through that pointer is recorded as the function's call too and may come from any of its
//! code.
//!
//! Only x86-64 code is read (the decoder is iced-x86's); elsewhere no call is listed and the
//! tree keeps such calls beside the inlined functions, as without this module.

use crate::functions::{ObjectFile, SymbolTable};
use object::{Object, ObjectSection, SectionKind};

/// One direct call in a function's code (link-time addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectCall {
    /// The call instruction's (or tail jump's) own address.
    pub site: u64,
    /// The address it transfers to (for `taken`, the address it takes).
    pub target: u64,
    /// The instruction does not transfer to `target`, it takes its address (a RIP-relative
    /// operand or an immediate): a call through that pointer may come from anywhere.
    pub taken: bool,
}

/// A function (or a `.cold` part of one) longer than this is not read, nor any other part of
/// it (no real function is; a crafted symbol size could claim gigabytes).
pub const MAX_FUNCTION_BYTES: u64 = 1 << 20;

/// At most this many bytes of code are read per call of [`ObjectFile::direct_calls`] (ripgrep's
/// 2,000 recorded functions are about 1 MB; a crafted trace could list one large function
/// thousands of times): the functions past it list none.
pub const MAX_TOTAL_BYTES: u64 = 64 << 20;

impl ObjectFile {
    /// For each link-time function entry of `entries`, in order: the direct calls its code
    /// makes, and its direct jumps out of it (tail calls). Its code is the symbol table's
    /// extent of the function symbol at the entry, and of the `.cold` parts GCC split off it
    /// (`main.cold`: a call from a handler there is recorded as `main`'s, and must be seen as
    /// made by `main`'s code, not only its inlined code's); a function the symbol table gives no size
    /// (a stripped object's), code outside every section with contents, an object not built
    /// for x86-64, a function over [`MAX_FUNCTION_BYTES`], or one past [`MAX_TOTAL_BYTES`] of
    /// code read, lists none; an entry listed twice is read once.
    pub fn direct_calls(&self, entries: &[u64]) -> Vec<Vec<DirectCall>> {
        let none = || vec![Vec::new(); entries.len()];
        let Ok(obj) = object::File::parse(&*self.map) else { return none() };
        if obj.architecture() != object::Architecture::X86_64 {
            return none();
        }
        let symbols = SymbolTable::new(&obj);
        let cold = symbols.cold_parts();
        let texts: Vec<(u64, &[u8])> = obj
            .sections()
            .filter(|s| s.kind() == SectionKind::Text)
            .filter_map(|s| s.data().ok().filter(|d| !d.is_empty()).map(|d| (s.address(), d)))
            .collect();
        let mut read = 0u64;
        let mut seen = std::collections::HashSet::new();
        let calls_of = |(start, end): (u64, u64)| -> Vec<DirectCall> {
            let code = texts.iter().find_map(|&(addr, data)| {
                let from = usize::try_from(start.checked_sub(addr)?).ok()?;
                let to = usize::try_from(end - addr).ok()?;
                data.get(from..to)
            });
            code.map(|c| calls_in(c, start)).unwrap_or_default()
        };
        entries
            .iter()
            .map(|&entry| {
                let Some(own) = symbols.range_at(entry).filter(|r| r.0 == entry) else {
                    return Vec::new();
                };
                let parts = symbols.exact(entry).and_then(|name| cold.get(name)).map_or(&[][..], |p| p.as_slice());
                // All of the function's code or none: a part left unread could hold a call.
                if std::iter::once(&own).chain(parts).any(|&(start, end)| end - start > MAX_FUNCTION_BYTES) {
                    return Vec::new();
                }
                let size: u64 = std::iter::once(&own).chain(parts).map(|&(start, end)| end - start).sum();
                if !seen.insert(entry) || read + size > MAX_TOTAL_BYTES {
                    return Vec::new();
                }
                read += size;
                std::iter::once(own).chain(parts.iter().copied()).flat_map(calls_of).collect()
            })
            .collect()
    }
}

/// The direct calls, and the direct jumps out of `code`, of x86-64 `code` that starts at
/// `start`; and the addresses out of `code` that its other instructions take (`taken`).
pub fn calls_in(code: &[u8], start: u64) -> Vec<DirectCall> {
    use iced_x86::{Decoder, DecoderOptions, FlowControl, OpKind};
    let end = start.saturating_add(code.len() as u64);
    let mut out = Vec::new();
    let mut decoder = Decoder::with_ip(64, code, start, DecoderOptions::NONE);
    for ins in &mut decoder {
        if ins.is_invalid() {
            continue;
        }
        if !matches!(ins.op0_kind(), OpKind::NearBranch64) {
            let rip_relative = ins.is_ip_rel_memory_operand().then(|| ins.ip_rel_memory_address());
            let immediates = (0..ins.op_count()).filter_map(|i| match ins.op_kind(i) {
                OpKind::Immediate32 | OpKind::Immediate32to64 | OpKind::Immediate64 => Some(ins.immediate(i)),
                _ => None,
            });
            for target in rip_relative.into_iter().chain(immediates).filter(|t| !(start..end).contains(t)) {
                out.push(DirectCall { site: ins.ip(), target, taken: true });
            }
            continue;
        }
        let target = ins.near_branch_target();
        let outside = !(start..end).contains(&target);
        let listed = match ins.flow_control() {
            FlowControl::Call => true,
            FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch => outside,
            _ => false,
        };
        if listed {
            out.push(DirectCall { site: ins.ip(), target, taken: false });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_tail_jumps_are_listed_and_jumps_inside_and_indirect_calls_are_not() {
        // At 0x1000:
        //   call 0x2000          e8 fb 0f 00 00
        //   jmp  0x1000          eb f9            (inside: a loop)
        //   call rax             ff d0            (indirect)
        //   je   0x3000          0f 84 ..         (out of the function: a tail call)
        //   jmp  0x4000          e9 ..
        let mut code = vec![0xe8, 0xfb, 0x0f, 0x00, 0x00, 0xeb, 0xf9, 0xff, 0xd0];
        let je_at = 0x1000 + code.len() as u64;
        code.extend([0x0f, 0x84]);
        code.extend(((0x3000 - (je_at + 6)) as i32).to_le_bytes());
        let jmp_at = 0x1000 + code.len() as u64;
        code.push(0xe9);
        code.extend(((0x4000 - (jmp_at + 5)) as i32).to_le_bytes());
        //   lea  rcx, [rip+0x5000]   48 8d 0d ..   (a pointer taken, for a call through it)
        //   mov  edi, 0x6000         bf 00 60 00 00 (the same, in a non-PIE program)
        //   lea  rax, [rip+0x1000]   48 8d 05 ..   (inside: not listed)
        let lea_at = 0x1000 + code.len() as u64;
        code.extend([0x48, 0x8d, 0x0d]);
        code.extend(((0x5000 - (lea_at + 7)) as i32).to_le_bytes());
        let mov_at = 0x1000 + code.len() as u64;
        code.extend([0xbf, 0x00, 0x60, 0x00, 0x00]);
        let inside_at = 0x1000 + code.len() as u64;
        code.extend([0x48, 0x8d, 0x05]);
        code.extend(((0x1000 - (inside_at as i64 + 7)) as i32).to_le_bytes());
        let found = calls_in(&code, 0x1000);
        assert_eq!(
            found,
            vec![
                DirectCall { site: 0x1000, target: 0x2000, taken: false },
                DirectCall { site: je_at, target: 0x3000, taken: false },
                DirectCall { site: jmp_at, target: 0x4000, taken: false },
                DirectCall { site: lea_at, target: 0x5000, taken: true },
                DirectCall { site: mov_at, target: 0x6000, taken: true },
            ]
        );
    }

    #[test]
    fn garbage_is_read_without_a_panic() {
        let bytes: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        let found = calls_in(&bytes, 0x1000);
        assert!(found.iter().all(|c| (0x1000..0x2000).contains(&c.site)), "{found:?}");
        // Code at the top of the address space: no overflow.
        calls_in(&[0xe8, 0, 0, 0, 0, 0xe8, 0, 0, 0, 0], u64::MAX - 6);
    }
}
