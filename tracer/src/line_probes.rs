//! The line-probe list of a native program (docs/native-recording.md, "Lines that ran"): where
//! each statement line of the program's own code starts, from its DWARF line table, computed by
//! `trace run --lines` before the program starts. The shim plants a one-shot probe at each
//! entry, as for inline probes (shims/native/src/probe.rs); a hit marks the row's line ran in
//! the process's `lines.bin`. Each entry has a group, one per source line (file and line): when
//! one row of a line fires, the shim disarms the line's other rows.
//!
//! Rows listed: the start address of every `is_stmt` row of every sequence of the line
//! table whose file is the program's own by the inline list's rule
//! ([`crate::inline_probes::own_code`]: not the Rust standard library, not a system header). At
//! an address with several rows, the last one (the row a lookup of the address finds). The
//! list says nothing about lines: the analyzer resolves each offset with its own reader, so that
//! its paths are those of the functions it names. A row that code reaches only by falling
//! through from the row before it, in one basic block, gets no probe: the earlier row's probe
//! stands for it (the list's `covers`, tracer/src/blocks.rs).

use std::collections::HashMap;
use std::path::Path;
use trace_format::meta::InlineProbeList;

/// At most this many rows (a bound on a damaged or huge object).
const MAX_ROWS: usize = 4_000_000;

/// The rules by which a list is made, part of a cached list's key: changed with them (5: rows
/// in `/rust/deps/`, the crates `std` vendors, are the standard library's, `own_code`).
const LIST_RULES: u32 = 5;

/// [`line_list`], from the per-user cache, as the inline list is cached.
pub fn cached_line_list(path: &Path) -> Option<InlineProbeList> {
    crate::inline_probes::cached_list(path, "line-probes", LIST_RULES, line_list)
}

/// [`cached_line_list`] as JSON (`inline_probes::cached_list_json`).
pub fn cached_line_list_json(path: &Path) -> Option<Vec<u8>> {
    crate::inline_probes::cached_list_json(path, "line-probes", LIST_RULES, line_list)
}

/// The list for the ELF object at `path`: `None` when it cannot be read, has no DWARF, or no
/// line-table row of its own code.
pub fn line_list(path: &Path) -> Option<InlineProbeList> {
    let meta = std::fs::metadata(path).ok()?;
    let mtime_ns = meta.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos() as i128;
    let own = |f: &Path| crate::inline_probes::own_code(&f.to_string_lossy());
    let mut rows = symbolize::lines::statement_rows(path, own, |_| true, MAX_ROWS).ok()?;
    // The last row at an address is the one kept (a stable sort keeps the table's order).
    rows.sort_by_key(|r| r.offset);
    let mut kept: Vec<symbolize::lines::Row> = Vec::with_capacity(rows.len());
    for row in rows {
        match kept.last_mut() {
            Some(last) if last.offset == row.offset => *last = row,
            _ => kept.push(row),
        }
    }
    if kept.is_empty() {
        return None;
    }
    // One group per (file, line), numbered densely in address order.
    let mut dense: HashMap<(&Path, u32), u32> = HashMap::new();
    let groups: Vec<u32> = kept
        .iter()
        .map(|r| {
            let n = dense.len() as u32;
            *dense.entry((&r.file, r.line)).or_insert(n)
        })
        .collect();
    let offsets: Vec<u64> = kept.iter().map(|r| r.offset).collect();
    // Rows reached only by falling through from the row before them need no probe of their own.
    let covers = crate::blocks::covers_in_object(path, &offsets).filter(|c| c.iter().any(|&n| n > 0)).unwrap_or_default();
    let object = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()).to_string_lossy().into_owned();
    Some(InlineProbeList { object, size: meta.len(), mtime_ns, offsets, groups, group_parents: Vec::new(), covers, folded: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROG: &str = "#include <stdio.h>\n\
__attribute__((noinline)) static int classify(int x) {\n\
  int r = 0;\n\
  if (x > 100) {\n\
    r = x * 2;\n\
    r += 7;\n\
  }\n\
  return r + 1;\n\
}\n\
int main(int argc, char **argv) {\n\
  (void)argv;\n\
  printf(\"%d\\n\", classify(argc));\n\
  return 0;\n\
}\n";

    /// The listed rows are the `is_stmt` rows of the program's file that objdump decodes (the
    /// last one at an address), each of their lines is the one addr2line gives at -O0 (one row
    /// per address there), rows of one line share a group and rows of two lines do not, and
    /// `classify`'s statement lines are there (at -O0 and -O1).
    #[test]
    fn the_listed_rows_are_the_lines_addr2line_gives_one_group_per_line() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("prog.c");
        std::fs::write(&src, PROG).unwrap();
        let exe = d.path().join("prog");
        // At -O1 the rows of lines 2-4 share one address: the last one (line 4) is listed.
        for (opt, expect) in [("-O0", &[3, 4, 5, 8][..]), ("-O1", &[4, 8][..])] {
            let st = std::process::Command::new("cc").args(["-g", opt, "-o"]).arg(&exe).arg(&src).status().expect("run cc");
            assert!(st.success());
            let list = line_list(&exe).expect("a list");
            assert_eq!(list.size, std::fs::metadata(&exe).unwrap().len());
            assert!(list.offsets.windows(2).all(|w| w[0] < w[1]));
            assert_eq!(list.groups.len(), list.offsets.len());
            // objdump's decoded rows of prog.c: file, line, address, [view], [x: is_stmt].
            let out = std::process::Command::new("objdump").arg("--dwarf=decodedline").arg(&exe).output().expect("run objdump");
            let mut stmt: Vec<(u64, u32)> = Vec::new();
            for l in String::from_utf8_lossy(&out.stdout).lines() {
                let f: Vec<&str> = l.split_whitespace().collect();
                if f.len() >= 3 && f[0] == "prog.c" && f.last() == Some(&"x") {
                    let (Ok(line), Ok(addr)) = (f[1].parse::<u32>(), u64::from_str_radix(f[2].trim_start_matches("0x"), 16)) else {
                        continue;
                    };
                    match stmt.last_mut() {
                        Some(last) if last.0 == addr => last.1 = line,
                        _ => stmt.push((addr, line)),
                    }
                }
            }
            stmt.sort_by_key(|r| r.0);
            // A position-independent executable: link-time addresses are the offsets.
            assert_eq!(list.offsets, stmt.iter().map(|r| r.0).collect::<Vec<_>>(), "{opt}");
            let lines: Vec<u32> = stmt.iter().map(|r| r.1).collect();
            if opt == "-O0" {
                let out = std::process::Command::new("addr2line")
                    .arg("-e")
                    .arg(&exe)
                    .args(list.offsets.iter().map(|o| format!("{o:#x}")))
                    .output()
                    .expect("run addr2line");
                let given: Vec<u32> = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .map(|l| l.rsplit(':').next().unwrap().split_whitespace().next().unwrap().parse().unwrap())
                    .collect();
                assert_eq!(given, lines, "{opt}");
            }
            let mut by_group: HashMap<u32, u32> = HashMap::new();
            for (g, l) in list.groups.iter().zip(&lines) {
                assert_eq!(*by_group.entry(*g).or_insert(*l), *l, "{opt}: a group is one line");
            }
            let mut distinct: Vec<u32> = by_group.values().copied().collect();
            distinct.sort_unstable();
            let before = distinct.len();
            distinct.dedup();
            assert_eq!(before, distinct.len(), "{opt}: a line is one group");
            for &l in expect {
                assert!(lines.contains(&l), "{opt}: line {l} of classify is listed: {lines:?}");
            }
        }
    }

    #[test]
    fn a_program_without_debug_information_has_no_list() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("prog.c");
        std::fs::write(&src, PROG).unwrap();
        let exe = d.path().join("prog");
        let st = std::process::Command::new("cc").args(["-O1", "-o"]).arg(&exe).arg(&src).status().expect("run cc");
        assert!(st.success());
        assert_eq!(line_list(&exe), None);
    }
}
