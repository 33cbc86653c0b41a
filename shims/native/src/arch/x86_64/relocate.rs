//! x86-64 entry relocation: which first instructions of a function move into its trampoline
//! ([`plan`], [`plan_short`]), and the trampoline they move into ([`trampoline`]).
//!
//! The first whole instructions covering 5 bytes (the `jmp rel32` written over the entry)
//! are decoded with iced-x86 and moved into a trampoline allocated within ±2 GiB (iced-x86's
//! `BlockEncoder` re-targets RIP-relative operands); the entry becomes `jmp trampoline`. The
//! trampoline calls `slt_patch_stub` (stub.rs), runs the moved instructions and jumps back.
//!
//! A function shorter than the jump is patched when alignment padding (`nop`s, `int3`s) after
//! it gives room, and it leaves by a return or a jump ([`plan_short`]).
//!
//! Refused: other functions shorter than 5 bytes, a first instruction that is not plain
//! (an indirect branch or call in the moved bytes), a moved byte that is the target of a jump
//! inside the function, bytes that do not decode.

use crate::patch::Refusal;
use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code, Decoder, DecoderOptions, FlowControl, Instruction, InstructionBlock, Mnemonic, OpKind,
    Register,
};

/// Trampoline layout: function address, stub address, `call [rip-14]`, moved code, `jmp`.
const HEAD: usize = 22;
/// Bytes of one trampoline slot.
pub(super) const SLOT: usize = 96;
/// `jmp rel32`: the bytes written over an entry.
pub(super) const JMP_LEN: usize = 5;

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

/// Whether an instruction's operands read rsp (a register or a memory address).
fn reads_rsp(i: &Instruction) -> bool {
    let rsp = |r: Register| matches!(r, Register::RSP | Register::ESP);
    rsp(i.memory_base()) || rsp(i.memory_index()) || (0..i.op_count()).any(|k| i.op_kind(k) == OpKind::Register && rsp(i.op_register(k)))
}

/// The trampoline of the function at `addr` for the slot at `tramp`, and the `jmp` to write
/// over its entry. The slot: the function's address, `stub`'s address, `call [rip - 14]`
/// (the stub finds the function's address 22 bytes before its return address), the moved
/// instructions relocated, `jmp` back to the first byte not moved. A moved call (always the
/// last moved instruction) becomes `push <its return address>; jmp <target>`, so the callee
/// returns to the original code and unwinding never sees the trampoline.
pub(super) fn trampoline(addr: u64, moved: &[Instruction], tramp: u64, stub: u64) -> Result<(Vec<u8>, [u8; JMP_LEN]), Refusal> {
    let (plain, call) = match moved.split_last() {
        Some((last, rest)) if last.is_call_near() || last.code() == Code::Call_rm64 => (rest, Some(*last)),
        _ => (moved, None),
    };
    let block = InstructionBlock::new(plain, tramp + HEAD as u64);
    let enc = BlockEncoder::encode(64, block, BlockEncoderOptions::NONE).map_err(|_| Refusal::Undecodable)?;
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
            let enc = BlockEncoder::encode(64, block, BlockEncoderOptions::NONE).map_err(|_| Refusal::Undecodable)?;
            code.extend_from_slice(&enc.code_buffer);
        }
    }
    if HEAD + code.len() + JMP_LEN > SLOT {
        return Err(Refusal::TooLong);
    }
    let moved_len: usize = moved.iter().map(|i| i.len()).sum();
    let mut t = Vec::with_capacity(SLOT);
    t.extend_from_slice(&addr.to_le_bytes());
    t.extend_from_slice(&stub.to_le_bytes());
    t.extend_from_slice(&[0xff, 0x15]);
    t.extend_from_slice(&(-14i32).to_le_bytes());
    t.extend_from_slice(&code);
    let back = addr + moved_len as u64;
    let here = tramp + t.len() as u64 + JMP_LEN as u64;
    t.push(0xe9);
    t.extend_from_slice(&((back as i64 - here as i64) as i32).to_le_bytes());
    // The entry jumps to the trampoline's `call` (after its two addresses).
    Ok((t, jmp_rel32(addr, tramp + 16)))
}

/// `jmp rel32` at `from` to `to` (within ±2 GiB: the caller mapped `to` so).
pub(super) fn jmp_rel32(from: u64, to: u64) -> [u8; JMP_LEN] {
    let rel = to as i64 - (from + JMP_LEN as u64) as i64;
    let mut jmp = [0xe9u8, 0, 0, 0, 0];
    jmp[1..].copy_from_slice(&(rel as i32).to_le_bytes());
    jmp
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_trampoline_enters_the_stub_runs_the_moved_code_and_jumps_back() {
        // push rbp; mov rbp, rsp; sub rsp, 0x10 (8 bytes moved), at 0x1000; slot at 0x2000.
        let f = [0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10, 0xc9, 0xc3];
        let moved = plan(&f, 0x1000).unwrap();
        let (t, jmp) = trampoline(0x1000, &moved, 0x2000, 0x7777_0000_1234).unwrap();
        assert_eq!(t[..8], 0x1000u64.to_le_bytes());
        assert_eq!(t[8..16], 0x7777_0000_1234u64.to_le_bytes());
        assert_eq!(t[16..22], [0xff, 0x15, 0xf2, 0xff, 0xff, 0xff], "call [rip - 14]: the stub's address");
        assert_eq!(t[22..30], f[..8], "the moved instructions, unchanged (nothing RIP-relative)");
        // jmp back to 0x1008 from the end of the slot's code (0x2023).
        assert_eq!(t[30..], [0xe9, 0xe5, 0xef, 0xff, 0xff]);
        // The entry: jmp 0x2010 (the `call`), from 0x1005.
        assert_eq!(jmp, [0xe9, 0x0b, 0x10, 0, 0]);
        // A moved call returns to the original code: push 0x100f (its next instruction); jmp.
        let f = [0x48, 0x83, 0xec, 0x08, 0xe8, 0x10, 0, 0, 0, 0xc3];
        let moved = plan(&f, 0x1000).unwrap();
        let (t, _) = trampoline(0x1000, &moved, 0x2000, 0).unwrap();
        assert_eq!(t[26..34], [0x48, 0x8d, 0x64, 0x24, 0xf8, 0xc7, 0x04, 0x24], "lea rsp, [rsp - 8]; mov dword ptr [rsp], ...");
        assert_eq!(t[34..38], 0x1009u32.to_le_bytes());
    }
}
