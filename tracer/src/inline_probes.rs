//! The inline-probe list of a native program (docs/native-recording.md, "Inlined functions"):
//! where the code the compiler inlined starts, from the program's DWARF
//! (`DW_TAG_inlined_subroutine` and its address ranges, read by `symbolize::inlined`), computed
//! once by `trace run` before the program starts, so that the shim does not read DWARF inside
//! the traced process. The shim plants a one-shot probe at each entry; a hit says that the
//! inlined code ran. Each entry has a group: entries starting the same chain of inlined
//! functions in the same function (one node of a tree) share it, and the shim disarms a
//! group's other probes when one fires.
//!
//! The standard library's inlined code is not listed: an inlined function declared in the Rust
//! standard library or a C/C++ system header (by its `DW_AT_decl_file`, or in a unit built with
//! line tables only, where no DIE declares it, by the file of its code's first row, as the
//! symbolizer names it) gets no probe, as `slice` hides those functions by default (a probe
//! costs one trap when it fires). Code from cargo's registry is listed: a program installed
//! with `cargo install` is itself there.

use std::collections::HashMap;
use std::path::Path;
use trace_format::meta::InlineProbeList;

/// At most this many entries (a bound on a damaged or huge object).
const MAX_PROBES: usize = 1_000_000;

/// The rules by which a list is made, part of a cached list's key: changed with them (5: a
/// declaration file's path is normalized before [`own_code`] sees it, as the analyzer's are).
/// 6: groups have parents, [`InlineProbeList::group_parents`]. 7: an object with debug
/// information that inlines none of its own code gets an empty list, not none. 8: an inlined
/// instance's entry outside its ranges gets no probe. 9: an inlined function no DIE declares
/// (line tables only) is judged by the file of its own code's first row, so the standard
/// library's code inlined into such a unit gets none; and `/rust/deps/`, the crates `std`
/// vendors, is the standard library's. 10: a later range's start that another instance's code
/// jumps to, and its own code reaches too, gets no probe, `blocks::cross_jumped`.)
const LIST_RULES: u32 = 11;

/// Lists kept in the cache (the most recently used).
const CACHE_KEEP: usize = 64;

/// [`probe_list`], from a per-user cache (`<cache>/slice-trace/inline-probes/`, the shims'
/// private directory) keyed by the object's path, size and modification time and this
/// version of `trace`: reading a large program's DWARF costs tens of milliseconds (hexyl: about
/// 45 ms) on every run otherwise.
pub fn cached_probe_list(path: &Path) -> Option<InlineProbeList> {
    cached_list(path, "inline-probes", LIST_RULES, probe_list)
}

/// [`cached_probe_list`] as JSON ([`cached_list_json`]).
pub fn cached_probe_list_json(path: &Path) -> Option<Vec<u8>> {
    cached_list_json(path, "inline-probes", LIST_RULES, probe_list)
}

/// A list computed by `compute` for the object at `path`, from the cache directory `sub` of
/// `trace`'s private cache (one per kind of list, `rules` its [`LIST_RULES`]), as
/// [`cached_probe_list`] does it (the line-probe list uses it too).
pub(crate) fn cached_list(
    path: &Path,
    sub: &str,
    rules: u32,
    compute: impl FnOnce(&Path) -> Option<InlineProbeList>,
) -> Option<InlineProbeList> {
    cached_list_json(path, sub, rules, compute).and_then(|bytes| serde_json::from_slice(&bytes).ok())
}

/// [`cached_list`]'s list as its compact JSON, the cache's bytes as they are when the list is
/// cached: the trace directory gets them without a parse and a new serialization (hexyl's two
/// lists: about 1 ms of `trace run` per run; docs/performance.md, "Fingerprints of large
/// objects from a cache"). A cached list is taken when it starts with the object's path, size
/// and modification time as the list serializes them (its key's hash says so too; the shim
/// checks them again, and parses the rest).
pub(crate) fn cached_list_json(
    path: &Path,
    sub: &str,
    rules: u32,
    compute: impl FnOnce(&Path) -> Option<InlineProbeList>,
) -> Option<Vec<u8>> {
    let dir = crate::shims::cache_dir().ok().map(|d| d.join(sub));
    let dir = dir.filter(|d| crate::shims::private_dir(d.parent().unwrap_or(d)).is_ok() && crate::shims::private_dir(d).is_ok());
    list_json_cached_in(dir, path, rules, compute)
}

/// [`cached_list_json`] with the cache's directory `dir` (none: computed every time).
fn list_json_cached_in(
    dir: Option<std::path::PathBuf>,
    path: &Path,
    rules: u32,
    compute: impl FnOnce(&Path) -> Option<InlineProbeList>,
) -> Option<Vec<u8>> {
    use sha2::{Digest, Sha256};
    let meta = std::fs::metadata(path).ok()?;
    let mtime_ns = meta.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos() as i128;
    let object = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()).to_string_lossy().into_owned();
    let key: String = Sha256::digest(format!("{}\0{rules}\0{object}\0{}\0{mtime_ns}", env!("CARGO_PKG_VERSION"), meta.len()).as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let file = dir.as_ref().map(|d| d.join(format!("{key}.json")));
    if let Some(f) = &file {
        let cached = std::fs::File::open(f).ok().filter(|h| h.metadata().is_ok_and(|m| m.len() <= CACHE_MAX)).and_then(|mut h| {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut std::io::Read::take(&mut h, CACHE_MAX), &mut bytes).ok()?;
            Some(bytes)
        });
        let head =
            serde_json::to_string(&object).ok().map(|o| format!("{{\"object\":{o},\"size\":{},\"mtime_ns\":{mtime_ns},", meta.len()));
        let found = cached.and_then(|bytes| match &bytes[..] {
            b"null" => Some(None),
            b if head.as_ref().is_some_and(|h| b.starts_with(h.as_bytes())) && b.ends_with(b"}") => Some(Some(bytes)),
            _ => None,
        });
        if let Some(list) = found {
            let _ = std::fs::File::open(f).and_then(|h| h.set_modified(std::time::SystemTime::now()));
            return list;
        }
    }
    let list = compute(path);
    let bytes = serde_json::to_vec(&list).ok()?;
    if let (Some(d), Some(f)) = (&dir, &file) {
        if let Ok(mut tmp) = tempfile::Builder::new().prefix(".tmp-").tempfile_in(d) {
            use std::io::Write;
            if tmp.write_all(&bytes).is_ok() && tmp.persist(f).is_ok() {
                prune(d);
            }
        }
    }
    list.is_some().then_some(bytes)
}

/// A cached list is read only up to this size.
const CACHE_MAX: u64 = 64 << 20;

/// Keep the [`CACHE_KEEP`] most recently used lists.
fn prune(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut files: Vec<(std::time::SystemTime, std::path::PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.ends_with(".json")))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    for (_, f) in files.into_iter().skip(CACHE_KEEP) {
        let _ = std::fs::remove_file(f);
    }
}

/// The list for the ELF object at `path`: `None` when it cannot be read or has no DWARF;
/// empty when its DWARF lists none of its own code as inlined (an `-O0` build), so that the
/// prompt can say that, not that whether inlined code ran cannot be told.
pub fn probe_list(path: &Path) -> Option<InlineProbeList> {
    use object::{Object, ObjectSection, ObjectSegment};
    let meta = std::fs::metadata(path).ok()?;
    let mtime_ns = meta.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos() as i128;
    let data = crate::detect::map_file(path).ok()?;
    let obj = object::File::parse(&*data).ok()?;
    let bias = obj.segments().map(|s| s.address()).min().map(|v| v & !0xfff)?;
    let code = symbolize::inlined::inlined_code(&obj, |f| own_code(&f.to_string_lossy()), MAX_PROBES).ok()?;
    // Code two instances share gets no probe: its hit would not tell which of them ran.
    let shared = crate::blocks::cross_jumped(&obj, &code);
    let symbolize::inlined::InlinedCode { mut starts, folded, .. } = code;
    starts.retain(|s| !shared.contains(&(s.addr, s.instance)));
    let folded: Vec<trace_format::meta::FoldedFunction> = folded
        .into_iter()
        .take(trace_format::meta::MAX_FOLDED)
        .map(|f| trace_format::meta::FoldedFunction { name: f.name, file: f.file.to_string_lossy().into_owned(), line: f.line })
        .collect();
    // Every listed chain's parent (the nearest kept instance around it), before the addresses
    // are made unique (a chain whose every start is also a deeper one's still has a parent).
    let parent_of: HashMap<u64, u64> = starts.iter().map(|s| (s.chain, s.parent)).collect();
    // One entry per address: the deepest instance starting there (its chain is the one the
    // analyzer finds at the address).
    starts.sort_unstable_by_key(|s| (s.addr, std::cmp::Reverse(s.depth)));
    starts.dedup_by_key(|s| s.addr);
    starts.retain(|s| s.addr >= bias);
    if starts.is_empty() && obj.section_by_name(".debug_info").is_none_or(|d| d.size() == 0) {
        return None;
    }
    let mut dense: HashMap<u64, u32> = HashMap::new();
    let groups = starts.iter().map(|s| {
        let n = dense.len() as u32;
        *dense.entry(s.chain).or_insert(n)
    });
    let groups: Vec<u32> = groups.collect();
    let group_parents = parents_of_groups(&dense, &parent_of);
    let offsets: Vec<u64> = starts.iter().map(|s| s.addr - bias).collect();
    let object = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()).to_string_lossy().into_owned();
    Some(InlineProbeList { object, size: meta.len(), mtime_ns, offsets, groups, group_parents, covers: Vec::new(), folded })
}

/// Per group of `dense` (chain to group), the group of its nearest enclosing chain that is
/// one, following `parent_of` through chains that are not (their starts all belong to deeper
/// instances); `None` when there is none. A bounded walk (a hash collision cannot loop it).
fn parents_of_groups(dense: &HashMap<u64, u32>, parent_of: &HashMap<u64, u64>) -> Vec<Option<u32>> {
    let mut out = vec![None; dense.len()];
    for (&chain, &g) in dense {
        let mut up = parent_of.get(&chain).copied().unwrap_or(0);
        for _ in 0..256 {
            if up == 0 {
                break;
            }
            if let Some(&pg) = dense.get(&up) {
                out[g as usize] = (pg != g).then_some(pg);
                break;
            }
            up = parent_of.get(&up).copied().unwrap_or(0);
        }
    }
    out
}

/// Whether a declaration file is the program's own code (see the module's rule): not the Rust
/// standard library's (the analyzer's rule, [`trace_format::objects::rust_library_end`],
/// `/rust/deps/` of the crates `std` vendors included), a toolchain's or a system header.
pub(crate) fn own_code(file: &str) -> bool {
    const NOT_OWN: [&str; 2] = ["/rustlib/", "/.rustup/"];
    !(file.starts_with("/rustc/")
        || file.starts_with("/usr/")
        || trace_format::objects::rust_library_end(file).is_some()
        || NOT_OWN.iter().any(|m| file.contains(m)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory holding `text` as `name`, and that file's path.
    fn source(name: &str, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join(name);
        std::fs::write(&src, text).unwrap();
        (d, src)
    }

    /// `compiler FLAGS -o exe src`, which must succeed.
    fn compile(compiler: &str, flags: &[&str], src: &Path, exe: &Path) {
        let st = std::process::Command::new(compiler).args(flags).arg("-o").arg(exe).arg(src).status().expect("run the compiler");
        assert!(st.success(), "{compiler} {flags:?} {}", src.display());
    }

    /// What `addr2line -f -i` says at each offset of `list` in `exe`: the inlined functions
    /// there, innermost first, each a name line and a file line.
    fn addr2line(exe: &Path, list: &InlineProbeList) -> Vec<Vec<String>> {
        let at = |o: &u64| {
            let out = std::process::Command::new("addr2line").args(["-f", "-i", "-e"]).arg(exe).arg(format!("{o:#x}")).output().unwrap();
            String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect()
        };
        list.offsets.iter().map(at).collect()
    }

    /// A list is computed once and then given from the cache as the bytes written there, equal
    /// to its serialization; an object with no list is cached as none; a cached list whose head
    /// names another object, size or time is not used (computed again).
    #[test]
    fn a_cached_list_is_given_as_its_json_and_checked_against_the_object() {
        let d = tempfile::tempdir().unwrap();
        let cache = d.path().join("cache");
        std::fs::create_dir(&cache).unwrap();
        let obj = d.path().join("prog");
        std::fs::write(&obj, "an object").unwrap();
        let made = |p: &Path| {
            let m = std::fs::metadata(p).unwrap();
            let mtime_ns = m.modified().unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i128;
            let object = std::fs::canonicalize(p).unwrap().to_string_lossy().into_owned();
            Some(InlineProbeList { object, size: m.len(), mtime_ns, offsets: vec![4, 9], groups: vec![0, 1], ..Default::default() })
        };
        let want = serde_json::to_vec(&made(&obj).unwrap()).unwrap();
        let first = list_json_cached_in(Some(cache.clone()), &obj, 1, made).unwrap();
        assert_eq!(first, want);
        let again = list_json_cached_in(Some(cache.clone()), &obj, 1, |_| panic!("computed again")).unwrap();
        assert_eq!(again, want);
        let parsed: InlineProbeList = serde_json::from_slice(&again).unwrap();
        assert_eq!(parsed, made(&obj).unwrap());
        // Another rule's version has its own entry: computed, here as none, and cached as none.
        assert!(list_json_cached_in(Some(cache.clone()), &obj, 2, |_| None).is_none());
        assert!(list_json_cached_in(Some(cache.clone()), &obj, 2, |_| panic!("computed again")).is_none());
        // An entry naming another object (a damaged or colliding entry) is not used.
        let entries: Vec<_> = std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().path()).collect();
        let listed = entries.iter().find(|e| std::fs::read(e).unwrap() == want).unwrap();
        let other = String::from_utf8(want.clone()).unwrap().replace("\"size\":9", "\"size\":10");
        std::fs::write(listed, other).unwrap();
        let mut computed = false;
        let fixed = list_json_cached_in(Some(cache.clone()), &obj, 1, |p| {
            computed = true;
            made(p)
        });
        assert!(computed);
        assert_eq!(fixed.unwrap(), want);
        // Without a cache, computed every time.
        assert_eq!(list_json_cached_in(None, &obj, 1, made).unwrap(), want);
    }

    #[test]
    fn the_standard_library_and_system_headers_are_not_the_programs_own() {
        assert!(own_code("/home/u/app/src/main.rs"));
        assert!(own_code("/work/examples/c/inlined.c"));
        assert!(!own_code("/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/iter/range.rs"));
        assert!(!own_code("/usr/include/x86_64-linux-gnu/bits/stdio2.h"));
        // The crates `std` vendors, as its prebuilt units name them.
        assert!(!own_code("/rust/deps/gimli-0.32.3/src/read/line.rs"));
        assert!(own_code("/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/hexyl-0.16.0/src/main.rs"));
    }

    #[test]
    fn a_static_helper_inlined_at_o1_is_listed_an_o0_build_has_an_empty_list_and_no_dwarf_none() {
        let (d, src) = source(
            "prog.c",
            "#include <stdio.h>\nstatic int helper(int x) {\n  int s = 0;\n  for (int i = 0; i < x; i++) s += i * x;\n  return s;\n}\nint main(int argc, char **argv) {\n  (void)argv;\n  printf(\"%d\\n\", helper(argc + 5));\n  return 0;\n}\n",
        );
        let exe = d.path().join("prog");
        // (flags, a list, probes in it)
        for (flags, listed, probes) in [(["-g", "-O1"], true, true), (["-g", "-O0"], true, false), (["-g0", "-O1"], false, false)] {
            compile("cc", &flags, &src, &exe);
            let list = probe_list(&exe);
            assert_eq!(list.is_some(), listed, "{flags:?}: {list:?}");
            if let Some(l) = list {
                assert_eq!(!l.offsets.is_empty(), probes, "{flags:?}: {l:?}");
                assert_eq!(l.size, std::fs::metadata(&exe).unwrap().len());
                assert!(l.offsets.windows(2).all(|w| w[0] < w[1]));
                assert_eq!(l.groups.len(), l.offsets.len());
            }
        }
    }

    #[test]
    fn instances_of_one_helper_in_one_function_are_one_group_and_another_helper_is_not() {
        // `twice` is inlined at two call sites of main (two instances), `other` at one.
        let (d, src) = source(
            "prog.c",
            "#include <stdio.h>\n#include <stdlib.h>\nstatic int twice(int x) {\n  int s = 0;\n  for (int i = 0; i < x; i++) s += i ^ x;\n  return s;\n}\nstatic int other(int x) {\n  int s = 1;\n  for (int i = 0; i < x; i++) s *= i | 3;\n  return s;\n}\nint main(int argc, char **argv) {\n  int a = atoi(argv[1]);\n  if (argc > 2) printf(\"%d\\n\", twice(a + 1));\n  printf(\"%d\\n\", other(a));\n  printf(\"%d\\n\", twice(a * 7));\n  return 0;\n}\n",
        );
        let exe = d.path().join("prog");
        compile("cc", &["-g", "-O1"], &src, &exe);
        let list = probe_list(&exe).expect("a list");
        // The name of the inlined function whose instance starts at each offset (addr2line).
        let names: Vec<String> = addr2line(&exe, &list).into_iter().map(|l| l.into_iter().next().unwrap_or_default()).collect();
        let group_of = |name: &str| -> Vec<u32> {
            let mut g: Vec<u32> = names.iter().zip(&list.groups).filter(|(n, _)| *n == name).map(|(_, g)| *g).collect();
            g.dedup();
            g
        };
        assert!(names.iter().filter(|n| *n == "twice").count() >= 2, "{names:?}");
        assert_eq!(group_of("twice").len(), 1, "{names:?} {:?}", list.groups);
        assert_eq!(group_of("other").len(), 1, "{names:?} {:?}", list.groups);
        assert_ne!(group_of("twice"), group_of("other"));
    }

    /// A Rust program built with line tables only (cargo's `debug = "line-tables-only"`), where
    /// no DIE says where an inlined function is declared, gets the probes of the same program
    /// built with limited debug information (`debug = 1`, whose DIEs do): its own inlined code,
    /// not the standard library's (iterators, `Vec`, formatting) inlined into it.
    #[test]
    fn line_tables_only_lists_the_programs_own_inlined_code_as_limited_debug_information_does() {
        let (d, src) = source(
            "main.rs",
            "#[inline(always)]\nfn helper(v: &[u64]) -> u64 {\n    v.iter().map(|x| x * 3).filter(|x| x % 2 == 1).sum()\n}\n\n#[inline(always)]\nfn lengths() -> Vec<u64> {\n    std::env::args().map(|a| a.len() as u64).collect()\n}\n\nfn main() {\n    let v = lengths();\n    println!(\"{} {:?}\", helper(&v), v);\n}\n",
        );
        let list = |debuginfo: &str| {
            let exe = d.path().join(format!("prog-{debuginfo}"));
            compile("rustc", &["--edition=2021", "-O", &format!("-Cdebuginfo={debuginfo}")], &src, &exe);
            probe_list(&exe).expect("a list")
        };
        let (limited, tables) = (list("1"), list("line-tables-only"));
        assert!(!limited.offsets.is_empty(), "{limited:?}");
        assert!(
            tables.offsets == limited.offsets,
            "line tables only: {} probes; limited debug information: {}",
            tables.offsets.len(),
            limited.offsets.len()
        );
        assert_eq!(tables.groups.len(), limited.groups.len());
    }

    /// The group of code inlined into inlined code has the group of the code around it as its
    /// parent (a hit inside `inner` says that `outer` ran); an instance of `inner` inlined
    /// straight into `main` is another group, without one.
    #[test]
    fn a_group_inside_another_inlined_function_has_it_as_its_parent() {
        let (d, src) = source(
            "prog.c",
            "#include <stdio.h>\n#include <stdlib.h>\n__attribute__((always_inline)) static inline int inner(int x) {\n  int s = 0;\n  for (int i = 0; i < x; i++) s += i ^ x;\n  return s;\n}\n__attribute__((always_inline)) static inline int outer(int x) {\n  int s = 1;\n  for (int i = 0; i < x; i++) s *= i | 3;\n  if (x > 5) s += inner(x * 3);\n  for (int i = 0; i < s % 7; i++) printf(\"%d\\n\", i);\n  return s;\n}\nint main(int argc, char **argv) {\n  int a = atoi(argv[1]);\n  if (argc > 2) printf(\"%d\\n\", outer(a + 1));\n  printf(\"%d\\n\", inner(a));\n  return 0;\n}\n",
        );
        let exe = d.path().join("prog");
        compile("cc", &["-g", "-O1"], &src, &exe);
        let list = probe_list(&exe).expect("a list");
        assert_eq!(list.group_parents.len(), *list.groups.iter().max().unwrap() as usize + 1);
        // Each offset's chain of inlined functions, innermost first (addr2line -i), as its
        // function names joined.
        let chains: Vec<String> =
            addr2line(&exe, &list).into_iter().map(|l| l.into_iter().step_by(2).collect::<Vec<_>>().join("<")).collect();
        let group_of = |chain: &str| -> u32 {
            let mut g: Vec<u32> = chains.iter().zip(&list.groups).filter(|(c, _)| *c == chain).map(|(_, g)| *g).collect();
            g.dedup();
            assert_eq!(g.len(), 1, "{chain}: {chains:?} {:?}", list.groups);
            g[0]
        };
        let (nested, outer, direct) = (group_of("inner<outer<main"), group_of("outer<main"), group_of("inner<main"));
        assert_eq!(list.group_parents[nested as usize], Some(outer), "{chains:?}");
        assert_eq!(list.group_parents[outer as usize], None);
        assert_eq!(list.group_parents[direct as usize], None);
    }
}
