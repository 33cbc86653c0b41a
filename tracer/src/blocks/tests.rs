use super::*;

/// One function at 0x1000 (and a second at 0x1020), hand-assembled:
///
/// ```text
/// 1000 mov eax, 1      row A: the function's first row, a leader
/// 1005 add eax, 2      row B: falls through from A: covered
/// 1008 cmp eax, 3
/// 100b je 1012
/// 100d add eax, 4      row C: after a conditional branch: a leader
/// 1010 nop             row D: falls through from C: covered
/// 1011 nop
/// 1012 add eax, 5      row E: a branch target: a leader
/// 1015 call 1020
/// 101a add eax, 6      row F: after a call (which may not return): a leader
/// 101d ret
/// 101e nop; nop
/// 1020 ret             the second function
/// ```
const STRAIGHT: &[u8] = &[
    0xb8, 1, 0, 0, 0, // mov eax, 1
    0x83, 0xc0, 2, // add eax, 2
    0x83, 0xf8, 3, // cmp eax, 3
    0x74, 0x05, // je 0x1012
    0x83, 0xc0, 4, // add eax, 4
    0x90, 0x90, // nop; nop
    0x83, 0xc0, 5, // add eax, 5
    0xe8, 0x06, 0, 0, 0, // call 0x1020
    0x83, 0xc0, 6,    // add eax, 6
    0xc3, // ret
    0x90, 0x90, // padding
    0xc3, // 0x1020: ret
];

fn image<'a>(code: &'a [u8], at: u64, data: Vec<(u64, &'a [u8])>, funcs: Vec<(u64, u64)>, taken: Vec<u64>) -> Image<'a> {
    Image { code: vec![(at, code)], data, funcs, taken, absolute: false }
}

fn covers_of(img: &Image, rows: &[u64]) -> Vec<u32> {
    covers(img, &analyze(img), rows)
}

/// Rows reached by falling through from the row before are covered by it; a row after a
/// conditional branch, at a branch target, or after a call is a leader.
#[test]
fn a_row_is_covered_only_by_straight_line_code_from_the_row_before() {
    let img = image(STRAIGHT, 0x1000, Vec::new(), vec![(0x1000, 0x1020), (0x1020, 0x1021)], Vec::new());
    let rows = [0x1000, 0x1005, 0x100d, 0x1010, 0x1012, 0x101a];
    assert_eq!(covers_of(&img, &rows), [1, 0, 1, 0, 0, 0]);
    // Three rows in one block: the first stands for the two others.
    assert_eq!(covers_of(&img, &[0x1000, 0x1005, 0x1008]), [2, 0, 0]);
    // The row after the call falls through from nothing before it: F and the `ret` after it.
    assert_eq!(covers_of(&img, &[0x1015, 0x101a, 0x101d]), [0, 1, 0]);
}

/// A row that is not at an instruction start of the decoding, or outside any function, or in
/// another function than the row before, is a leader; so is a code address the object's data
/// takes (a relocation's target).
#[test]
fn rows_not_known_to_fall_through_are_leaders() {
    let funcs = vec![(0x1000, 0x1020), (0x1020, 0x1021)];
    let img = image(STRAIGHT, 0x1000, Vec::new(), funcs.clone(), Vec::new());
    // 0x1006 is inside `add eax, 2`.
    assert_eq!(covers_of(&img, &[0x1000, 0x1006]), [0, 0]);
    // The second function's first row, after the first's padding.
    assert_eq!(covers_of(&img, &[0x101e, 0x1020]), [0, 0]);
    // No function symbol holds the rows.
    let bare = image(STRAIGHT, 0x1000, Vec::new(), Vec::new(), Vec::new());
    assert_eq!(covers_of(&bare, &[0x1000, 0x1005]), [0, 0]);
    // A dynamic relocation stores 0x1005: it may be reached from elsewhere.
    let taken = image(STRAIGHT, 0x1000, Vec::new(), funcs, vec![0x1005]);
    assert_eq!(covers_of(&taken, &[0x1000, 0x1005, 0x1008]), [0, 1, 0]);
}

/// A function that jumps through a position-independent jump table (32-bit entries relative to
/// the table, as gcc and LLVM write them):
///
/// ```text
/// 2000 lea rcx, [rip + 0x3000 - 0x2007]
/// 2007 jmp rcx
/// 2009 mov eax, 1      row P: after an indirect jump: a leader
/// 200e add eax, 2      row Q: the table's second entry: a leader though P falls through to it
/// 2011 add eax, 3      row R: covered by Q
/// 2014 ret
/// ```
#[test]
fn a_jump_table_entry_in_straight_line_code_is_a_leader() {
    let code: &[u8] = &[
        0x48, 0x8d, 0x0d, 0xf9, 0x0f, 0, 0, // lea rcx, [rip + 0xff9]
        0xff, 0xe1, // jmp rcx
        0xb8, 1, 0, 0, 0, // mov eax, 1
        0x83, 0xc0, 2, // add eax, 2
        0x83, 0xc0, 3,    // add eax, 3
        0xc3, // ret
    ];
    let mut table = Vec::new();
    for target in [0x2009i64, 0x200e] {
        table.extend_from_slice(&((target - 0x3000) as i32).to_le_bytes());
    }
    // Then an entry outside the function: the table ends there.
    table.extend_from_slice(&0i32.to_le_bytes());
    let funcs = vec![(0x2000, 0x2015)];
    let img = image(code, 0x2000, vec![(0x3000, &table)], funcs.clone(), Vec::new());
    let rows = [0x2009, 0x200e, 0x2011];
    assert_eq!(covers_of(&img, &rows), [0, 1, 0]);
    // Without the table, P would stand for both.
    let no_table = image(code, 0x2000, Vec::new(), funcs, Vec::new());
    assert_eq!(covers_of(&no_table, &rows), [2, 0, 0]);
}

/// A program built by the C compiler: every covered row follows a row of the same function
/// with no control transfer between them, checked against objdump's disassembly (no `call`,
/// `j*`, `ret` from the earlier row up to the covered one, and no branch target in between).
#[test]
fn covered_rows_of_a_compiled_program_follow_straight_line_code() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("prog.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <stdlib.h>\n\
__attribute__((noinline)) static int pick(int x, int y) {\n\
  int r = x;\n\
  r = r * 3 + y;\n\
  r ^= y << 2;\n\
  switch (x) {\n\
  case 0: r += 11; r *= 5; break;\n\
  case 1: r -= 3;\n\
  case 2: r += 17; r *= 7; break;\n\
  case 3: r = -r; r += y; break;\n\
  case 4: r *= r; r -= x; break;\n\
  default: r = 1;\n\
  }\n\
  if (r > 100) {\n\
    r = r / 3;\n\
    r = r + y;\n\
  }\n\
  printf(\"%d\\n\", r);\n\
  r += 1;\n\
  return r;\n\
}\n\
int main(int argc, char **argv) { return pick(argc, atoi(argc > 1 ? argv[1] : \"0\")) & 1; }\n",
    )
    .unwrap();
    let exe = d.path().join("prog");
    let st = std::process::Command::new("cc").args(["-g", "-O1", "-o"]).arg(&exe).arg(&src).status().expect("run cc");
    assert!(st.success());
    let list = crate::line_probes::line_list(&exe).expect("a list");
    assert_eq!(list.covers.len(), list.offsets.len(), "some rows are covered");
    let out = std::process::Command::new("objdump").args(["-d", "--no-show-raw-insn"]).arg(&exe).output().expect("run objdump");
    // (address, mnemonic, branch target) of each instruction.
    let mut insns: Vec<(u64, String, Option<u64>)> = Vec::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((addr, rest)) = l.trim_start().split_once(":\t") else { continue };
        let Ok(addr) = u64::from_str_radix(addr, 16) else { continue };
        let mut f = rest.split_whitespace();
        let m = f.next().unwrap_or("").to_string();
        let target = f.next().and_then(|t| u64::from_str_radix(t, 16).ok());
        insns.push((addr, m, target));
    }
    let targets: Vec<u64> = insns.iter().filter(|i| i.1.starts_with('j') || i.1.starts_with("call")).filter_map(|i| i.2).collect();
    let mut covered = 0;
    let mut k = 0;
    while k < list.offsets.len() {
        let n = list.covers[k] as usize;
        for c in k + 1..=k + n {
            let (a, b) = (list.offsets[c - 1], list.offsets[c]);
            for i in insns.iter().filter(|i| i.0 >= a && i.0 < b) {
                assert!(
                    !(i.1.starts_with('j') || i.1.starts_with("call") || i.1.starts_with("ret")),
                    "{:#x} {} between rows {a:#x} and {b:#x}",
                    i.0,
                    i.1
                );
            }
            assert!(!targets.iter().any(|&t| t > a && t <= b), "a branch target in ({a:#x}, {b:#x}]");
            covered += 1;
        }
        k += n + 1;
    }
    assert!(covered > 0, "some rows are covered");
}

/// A C++ program built by g++ -O1: `main` catches what `risky` throws, so its LSDA names a
/// landing pad, which is an instruction of `main` as objdump decodes it; and the line list
/// makes that pad a leader (no row there is covered by the row before it).
#[test]
fn the_landing_pads_of_a_cpp_program_are_found_and_are_leaders() {
    use object::{Object, ObjectSymbol};
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("prog.cc");
    std::fs::write(
        &src,
        "#include <stdexcept>\n#include <cstdio>\n\
__attribute__((noinline)) int risky(int x) {\n  if (x > 3) throw std::runtime_error(\"big\");\n  return x * 2;\n}\n\
int main(int argc, char **) {\n  int r = 0;\n  try {\n    r = risky(argc);\n    r += 5;\n  } catch (const std::exception &e) {\n    std::puts(e.what());\n    r = -1;\n  }\n  return r;\n}\n",
    )
    .unwrap();
    let exe = d.path().join("prog");
    let st = std::process::Command::new("g++").args(["-g", "-O1", "-o"]).arg(&exe).arg(&src).status().expect("run g++");
    assert!(st.success());
    let bytes = std::fs::read(&exe).unwrap();
    let obj = object::File::parse(&*bytes).unwrap();
    let main = obj.symbols().find(|s| s.name() == Ok("main")).map(|s| (s.address(), s.address() + s.size())).expect("main");
    let (_, data) = sections(&obj);
    let pads = landing_pads(&obj, &data);
    let in_main: Vec<u64> = pads.iter().copied().filter(|&p| p >= main.0 && p < main.1).collect();
    assert!(!in_main.is_empty(), "main has a landing pad: {pads:x?}, main {main:x?}");
    let out = std::process::Command::new("objdump").args(["-d", "--no-show-raw-insn"]).arg(&exe).output().expect("run objdump");
    let starts: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| u64::from_str_radix(l.trim_start().split_once(":\t")?.0, 16).ok())
        .collect();
    for p in &in_main {
        assert!(starts.contains(p), "the pad {p:#x} is an instruction start");
    }
    // No row of the list at a pad is covered by the row before it.
    let list = crate::line_probes::line_list(&exe).expect("a list");
    for (k, off) in list.offsets.iter().enumerate() {
        if in_main.contains(off) && k > 0 {
            let leader = (0..k).rev().find(|&j| j + list.covers.get(j).copied().unwrap_or(0) as usize >= k);
            assert_eq!(leader, None, "the row at the pad {off:#x} keeps its probe");
        }
    }
}
