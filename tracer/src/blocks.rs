//! Basic blocks of an object's code, for the line list (tracer/src/line_probes.rs,
//! docs/native-recording.md, "Lines that ran"): which line-table rows need a probe of their own.
//!
//! A row is reached either from the row before it, by falling through straight-line code, or
//! from somewhere else. When nothing between the two can leave the straight line (no branch, no
//! call, no return, no trap) and nothing can enter it from elsewhere (no branch target, no
//! jump-table entry, no address the code or the data takes, no function entry), the earlier
//! row running means the later one runs: its probe stands for both ([`covers`]), and the later
//! row gets none. Such a row is not a *leader*; every other row is.
//!
//! **A call ends a block.** The callee may never come back: a Rust panic unwinds to a landing
//! pad (or aborts), C's `longjmp` and `exit`, `abort`, any `noreturn` function, a thread's
//! `pthread_exit`. The rows after a call are known to run only once the call returned, which
//! the probe before the call cannot tell; so the instruction after a call is a leader, as the
//! instruction after every other control transfer (jumps, returns, `int3`, `ud2`, `syscall`,
//! `hlt`, an undecodable byte) is. (A call returning twice, `setjmp`'s, lands there too.)
//!
//! Leaders: the start of each function symbol, every direct branch or call target, the
//! instruction after each instruction that does not simply go on to the next, the entries of
//! jump tables (for each memory operand of a function's code that points into data: the
//! 32-bit entries relative to the table, gcc's and LLVM's position-independent tables, while
//! each lands inside that function; in a non-PIE executable also 64-bit absolute ones), every
//! code address an instruction takes (`lea` of a label, a landing pad, a function) and every
//! code address the object's dynamic relocations store (`R_X86_64_RELATIVE`: function
//! pointers, computed `goto` labels). Over-counting leaders only costs probes; under-counting
//! could make a row look run that did not, so every rule errs towards a leader: a row outside
//! any function symbol, or not at an instruction start of the linear decoding of its
//! function, is a leader, and so is the first row of a function.
//!
//! Landing pads (where unwinding enters a function: C++ `catch` blocks and cleanups, Rust's
//! drops during a panic) are reached by no instruction: they are read from each function's
//! LSDA (`.eh_frame`'s FDEs point at their call-site tables in `.gcc_except_table`,
//! [`landing_pads`]) and are leaders too. Not handled: code reached by an indirect jump through a table this
//! reading does not recognise (hand-written assembly computing its targets). x86-64 only:
//! another architecture has no line probes (its shim has no trap).

use std::path::Path;

/// The parts of an object that say where its blocks start (link-time addresses).
pub(crate) struct Image<'a> {
    /// Executable sections: (address, bytes).
    pub(crate) code: Vec<(u64, &'a [u8])>,
    /// Other allocated sections with contents: (address, bytes).
    pub(crate) data: Vec<(u64, &'a [u8])>,
    /// Function symbols: (start, end), sorted by start.
    pub(crate) funcs: Vec<(u64, u64)>,
    /// Code addresses known to be reachable from elsewhere than the code's own branches (the
    /// dynamic relocations' targets).
    pub(crate) taken: Vec<u64>,
    /// A non-PIE executable: addresses in code and data are absolute, so 64-bit jump tables
    /// may hold them.
    pub(crate) absolute: bool,
}

/// What [`analyze`] found: every instruction start of the functions' linear decoding and every
/// leader, sorted.
pub(crate) struct Blocks {
    starts: Vec<u64>,
    leaders: Vec<u64>,
}

/// At most this many entries of one jump table are read.
const MAX_TABLE: usize = 1 << 16;

impl Image<'_> {
    fn bytes_at<'s>(sections: &[(u64, &'s [u8])], addr: u64, len: usize) -> Option<&'s [u8]> {
        sections.iter().find_map(|&(a, b)| {
            let off = addr.checked_sub(a)? as usize;
            b.get(off..off.checked_add(len)?)
        })
    }

    fn in_code(&self, addr: u64) -> bool {
        self.code.iter().any(|&(a, b)| addr >= a && addr - a < b.len() as u64)
    }
}

/// Decode every function of `img` and find its leaders (the module's description).
pub(crate) fn analyze(img: &Image) -> Blocks {
    use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind, Register};
    let mut starts = Vec::new();
    let mut leaders: Vec<u64> = img.taken.clone();
    let mut ins = Instruction::default();
    for &(start, end) in &img.funcs {
        leaders.push(start);
        let Some(bytes) = end.checked_sub(start).and_then(|n| Image::bytes_at(&img.code, start, n as usize)) else { continue };
        let mut dec = Decoder::with_ip(64, bytes, start, DecoderOptions::NONE);
        while dec.can_decode() {
            dec.decode_out(&mut ins);
            if ins.is_invalid() {
                // Nothing after an undecodable byte is known: every row there is a leader.
                leaders.push(ins.ip());
                leaders.push(ins.next_ip());
                break;
            }
            starts.push(ins.ip());
            let goes_on = ins.flow_control() == FlowControl::Next
                && !matches!(ins.mnemonic(), Mnemonic::Syscall | Mnemonic::Sysenter | Mnemonic::Hlt);
            if !goes_on {
                leaders.push(ins.next_ip());
            }
            for i in 0..ins.op_count() {
                match ins.op_kind(i) {
                    OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64 => leaders.push(ins.near_branch_target()),
                    OpKind::Memory => {
                        let at = if ins.is_ip_rel_memory_operand() {
                            Some(ins.ip_rel_memory_address())
                        } else if img.absolute && ins.memory_base() == Register::None {
                            Some(ins.memory_displacement64())
                        } else {
                            None
                        };
                        if let Some(at) = at {
                            table_targets(img, at, (start, end), &mut leaders);
                        }
                    }
                    OpKind::Immediate32 | OpKind::Immediate32to64 | OpKind::Immediate64 if img.absolute => {
                        let v = ins.immediate(i);
                        if img.in_code(v) {
                            leaders.push(v);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    starts.sort_unstable();
    starts.dedup();
    leaders.sort_unstable();
    leaders.dedup();
    Blocks { starts, leaders }
}

/// An address `at` that code of the function `func` refers to: a code address is a leader (a
/// label taken); a data address may be a jump table, whose entries inside `func` are leaders.
fn table_targets(img: &Image, at: u64, func: (u64, u64), leaders: &mut Vec<u64>) {
    if img.in_code(at) {
        leaders.push(at);
        return;
    }
    let inside = |t: u64| t >= func.0 && t < func.1;
    for i in 0..MAX_TABLE {
        let Some(b) = Image::bytes_at(&img.data, at + 4 * i as u64, 4) else { break };
        let rel = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let t = at.wrapping_add(rel as i64 as u64);
        if !inside(t) {
            break;
        }
        leaders.push(t);
    }
    if img.absolute {
        for i in 0..MAX_TABLE {
            let Some(b) = Image::bytes_at(&img.data, at + 8 * i as u64, 8) else { break };
            let mut w = [0; 8];
            w.copy_from_slice(b);
            let t = u64::from_le_bytes(w);
            if !inside(t) {
                break;
            }
            leaders.push(t);
        }
    }
}

impl Blocks {
    /// Whether the row at `b` runs whenever the row at `a` (`a < b`) does: both at instruction
    /// starts of one function, with no leader in `(a, b]`.
    fn falls_through(&self, funcs: &[(u64, u64)], a: u64, b: u64) -> bool {
        let i = funcs.partition_point(|f| f.0 <= a);
        let same_func = i > 0 && funcs[i - 1].1 > b;
        let first_leader_after_a = self.leaders.partition_point(|&l| l <= a);
        let no_leader = self.leaders.get(first_leader_after_a).is_none_or(|&l| l > b);
        same_func && no_leader && self.starts.binary_search(&a).is_ok() && self.starts.binary_search(&b).is_ok()
    }
}

/// For rows at the link-time addresses `rows` (ascending, unique): per row, how many of the
/// rows after it its probe stands for (0 for a row covered by an earlier one, and for a
/// leader whose next row is a leader too).
pub(crate) fn covers(img: &Image, blocks: &Blocks, rows: &[u64]) -> Vec<u32> {
    let mut out = vec![0u32; rows.len()];
    let mut leader = 0;
    for k in 1..rows.len() {
        if blocks.falls_through(&img.funcs, rows[k - 1], rows[k]) {
            out[leader] += 1;
        } else {
            leader = k;
        }
    }
    out
}

/// [`covers`] for the rows at `offsets` (from the object's first page, as the line list has
/// them, ascending) of the ELF object at `path`; `None` when it is not an x86-64 ELF object
/// that can be read (every row then has a probe of its own).
pub(crate) fn covers_in_object(path: &Path, offsets: &[u64]) -> Option<Vec<u32>> {
    use object::{Object, ObjectSegment};
    let file = std::fs::File::open(path).ok()?;
    // SAFETY: a read-only mapping of the object; `trace` reads it before the program runs.
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let obj = object::File::parse(&*map).ok()?;
    if obj.architecture() != object::Architecture::X86_64 {
        return None;
    }
    let bias = obj.segments().map(|s| s.address()).min().map_or(0, |v| v & !0xfff);
    let (code, data) = sections(&obj);
    let funcs = function_extents(&obj);
    let mut taken = Vec::new();
    if let Some(relocs) = obj.dynamic_relocations() {
        for (_, r) in relocs {
            if let object::RelocationFlags::Elf { r_type: object::elf::R_X86_64_RELATIVE } = r.flags() {
                taken.push(r.addend() as u64);
            }
        }
    }
    taken.extend(landing_pads(&obj, &data));
    let absolute = obj.kind() == object::ObjectKind::Executable;
    let img = Image { code, data, funcs, taken, absolute };
    let blocks = analyze(&img);
    let rows: Vec<u64> = offsets.iter().map(|o| o + bias).collect();
    Some(covers(&img, &blocks, &rows))
}

/// The later range starts of inlined instances (not their entries) that code of another
/// instance jumps to: the compiler merged identical code of two instances into one copy
/// (cross-jumping, tail merging) and the debug information gives it to one of them, so a probe
/// there fires when the other ran. brotli's `PrepareH58` and `PrepareH68` end in the same
/// `memset(..., 0xff, ...)`; gcc -O2 kept one copy, in `PrepareH68`'s second range, which
/// `PrepareH58`'s code jumps to, and `PrepareH68` showed as run at quality 5, which never runs
/// it. A direct jump into the start `S` of a range of instance `I` comes from foreign code
/// when its source lies outside `I`'s ranges, in an instance whose ranges do not hold `S` (not
/// one around `I`: code of the function or of an instance around it jumping to a later range
/// of `I` is code motion, as hexyl's `Unit::get_multiplier` has); the range is shared when
/// `I`'s own code reaches it too. Returns (start, instance)
/// pairs; only the functions holding a later range start are decoded. x86-64 only (empty
/// elsewhere).
pub(crate) fn cross_jumped(obj: &object::File, code: &symbolize::inlined::InlinedCode) -> std::collections::HashSet<(u64, u32)> {
    use iced_x86::{Decoder, DecoderOptions, Instruction, OpKind};
    use object::Object;
    let mut out = std::collections::HashSet::new();
    if obj.architecture() != object::Architecture::X86_64 {
        return out;
    }
    let later: Vec<&symbolize::inlined::InlinedStart> = code.starts.iter().filter(|s| !s.entry).collect();
    if later.is_empty() {
        return out;
    }
    let funcs = function_extents(obj);
    let func_of = |a: u64| {
        let i = funcs.partition_point(|f| f.0 <= a);
        (i > 0 && a < funcs[i - 1].1).then(|| funcs[i - 1])
    };
    // Every instance's ranges, by start: (begin, end, instance).
    let mut ranges: Vec<(u64, u64, u32)> =
        code.instances.iter().enumerate().flat_map(|(k, rs)| rs.iter().map(move |&(b, e)| (b, e, k as u32))).collect();
    ranges.sort_unstable();
    let holds = |k: u32, a: u64| code.instances.get(k as usize).is_some_and(|rs| rs.iter().any(|&(b, e)| b <= a && a < e));
    let targets: std::collections::HashSet<u64> = later.iter().map(|s| s.addr).collect();
    let mut by_func: std::collections::BTreeSet<(u64, u64)> = std::collections::BTreeSet::new();
    for s in &later {
        if let Some(f) = func_of(s.addr) {
            by_func.insert(f);
        }
    }
    let (sections, _) = sections(obj);
    // Sources of the jumps to each target.
    let mut sources: std::collections::HashMap<u64, Vec<u64>> = std::collections::HashMap::new();
    let mut ins = Instruction::default();
    for &(start, end) in &by_func {
        let Some(bytes) = Image::bytes_at(&sections, start, (end - start) as usize) else { continue };
        let mut dec = Decoder::with_ip(64, bytes, start, DecoderOptions::NONE);
        while dec.can_decode() {
            dec.decode_out(&mut ins);
            if ins.is_invalid() {
                break;
            }
            if matches!(ins.op0_kind(), OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64)
                && targets.contains(&ins.near_branch_target())
            {
                sources.entry(ins.near_branch_target()).or_default().push(ins.ip());
            }
        }
    }
    for s in later {
        let Some(from) = sources.get(&s.addr) else { continue };
        let Some((fs, fe)) = func_of(s.addr) else { continue };
        // The instances with a range in the function.
        let lo = ranges.partition_point(|r| r.0 < fs);
        let here = &ranges[lo..ranges.partition_point(|r| r.0 < fe)];
        let foreign = from.iter().any(|&a| !holds(s.instance, a) && here.iter().any(|&(b, e, k)| b <= a && a < e && !holds(k, s.addr)));
        // And reached from the instance's own code too (a jump, or falling through from its
        // code just before): code both reach. A range reached only from another instance is
        // the rest of the work after it (ripgrep's `Builder::from_config` jumps on to the
        // loop of `Builder::extend`, which adds the patterns).
        let own = holds(s.instance, s.addr.wrapping_sub(1)) || from.iter().any(|&a| holds(s.instance, a));
        if foreign && own {
            out.insert((s.addr, s.instance));
        }
    }
    out
}

/// The object's function symbols (both tables) as (start, end) link-time addresses, sorted,
/// without empty ones.
fn function_extents(obj: &object::File) -> Vec<(u64, u64)> {
    use object::{Object, ObjectSymbol};
    let mut funcs: Vec<(u64, u64)> = obj
        .symbols()
        .chain(obj.dynamic_symbols())
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
        .map(|s| (s.address(), s.address() + s.size()))
        .collect();
    funcs.sort_unstable();
    funcs.dedup();
    funcs
}

/// The object's allocated sections with contents: (executable ones, the others), each as
/// (address, bytes).
pub(crate) type Sections<'a> = (Vec<(u64, &'a [u8])>, Vec<(u64, &'a [u8])>);

/// [`Sections`] of `obj`.
pub(crate) fn sections<'a>(obj: &object::File<'a>) -> Sections<'a> {
    use object::{Object, ObjectSection, SectionFlags, SectionKind};
    let mut code = Vec::new();
    let mut data = Vec::new();
    for s in obj.sections() {
        let SectionFlags::Elf { sh_flags } = s.flags() else { continue };
        if sh_flags & u64::from(object::elf::SHF_ALLOC) == 0 || s.kind() == SectionKind::UninitializedData {
            continue;
        }
        let Ok(bytes) = s.data() else { continue };
        if sh_flags & u64::from(object::elf::SHF_EXECINSTR) != 0 {
            code.push((s.address(), bytes));
        } else {
            data.push((s.address(), bytes));
        }
    }
    (code, data)
}

/// The landing pads of the object's functions (where unwinding enters them: C++ `catch` and
/// cleanups, Rust's drops during a panic), from each `.eh_frame` FDE's LSDA in
/// `.gcc_except_table` (the call-site table of gcc's and LLVM's personality routines). Empty
/// when there is no `.eh_frame` or it cannot be read.
pub(crate) fn landing_pads(obj: &object::File, data: &[(u64, &[u8])]) -> Vec<u64> {
    use gimli::UnwindSection;
    use object::{Object, ObjectSection};
    let mut out = Vec::new();
    let Some(eh) = obj.section_by_name(".eh_frame") else { return out };
    let Ok(bytes) = eh.data() else { return out };
    let mut frame = gimli::EhFrame::new(bytes, gimli::LittleEndian);
    frame.set_address_size(8);
    let mut bases = gimli::BaseAddresses::default().set_eh_frame(eh.address());
    if let Some(t) = obj.section_by_name(".text") {
        bases = bases.set_text(t.address());
    }
    if let Some(g) = obj.section_by_name(".got") {
        bases = bases.set_got(g.address());
    }
    let mut entries = frame.entries(&bases);
    while let Ok(Some(entry)) = entries.next() {
        let gimli::CieOrFde::Fde(partial) = entry else { continue };
        let Ok(fde) = partial.parse(gimli::EhFrame::cie_from_offset) else { continue };
        let Some(gimli::Pointer::Direct(lsda)) = fde.lsda() else { continue };
        lsda_pads(data, lsda, fde.initial_address(), &mut out);
    }
    out
}

/// The landing pads of the LSDA at `at` of the function starting at `func` (its call-site
/// table: start, length, landing pad relative to the LSDA's base, action).
fn lsda_pads(data: &[(u64, &[u8])], at: u64, func: u64, out: &mut Vec<u64>) {
    let Some(b) = data.iter().find_map(|&(a, b)| b.get(usize::try_from(at.checked_sub(a)?).ok()?..)) else { return };
    let mut r = Reader(b);
    let Some(lp_enc) = r.u8() else { return };
    let base = if lp_enc == OMIT { Some(func) } else { r.encoded(lp_enc) };
    let Some(base) = base else { return };
    let Some(tt_enc) = r.u8() else { return };
    if tt_enc != OMIT && r.uleb().is_none() {
        return;
    }
    let (Some(cs_enc), Some(cs_len)) = (r.u8(), r.uleb()) else { return };
    let Some(table) = usize::try_from(cs_len).ok().and_then(|n| r.0.get(..n)) else { return };
    let mut t = Reader(table);
    while !t.0.is_empty() {
        let (Some(_start), Some(_len), Some(pad), Some(_action)) = (t.encoded(cs_enc), t.encoded(cs_enc), t.encoded(cs_enc), t.uleb())
        else {
            return;
        };
        if pad != 0 {
            out.push(base.wrapping_add(pad));
        }
    }
}

/// `DW_EH_PE_omit`.
const OMIT: u8 = 0xff;

/// Little-endian reads of an LSDA.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.0;
        let (h, t) = (s.get(..n)?, s.get(n..)?);
        self.0 = t;
        Some(h)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn uleb(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    /// A value in the `DW_EH_PE_*` format `enc` (its low nibble; the call-site table's values
    /// are offsets, never relative to their own place in the compilers' output).
    fn encoded(&mut self, enc: u8) -> Option<u64> {
        let n = |r: &mut Self, k: usize| {
            r.take(k).map(|b| {
                let mut w = [0u8; 8];
                w[..k].copy_from_slice(b);
                u64::from_le_bytes(w)
            })
        };
        match enc & 0x0f {
            0x01 => self.uleb(),
            0x02 => n(self, 2),
            0x03 => n(self, 4),
            0x0b => n(self, 4).map(|v| v as u32 as i32 as i64 as u64),
            0x04 | 0x0c | 0x00 => n(self, 8),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
