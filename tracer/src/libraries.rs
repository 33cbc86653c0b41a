//! The shared libraries of a native program that the native shim patches at start-up and that
//! get inline probes (docs/native-recording.md, "Inlined functions"): its `DT_NEEDED`
//! libraries, and theirs, found as the loader finds them (`DT_RPATH` when there is no
//! `DT_RUNPATH`, `LD_LIBRARY_PATH`, `DT_RUNPATH`, then the default directories; `$ORIGIN`
//! expanded), kept when they are not the system's (`trace_format::objects::not_the_programs`,
//! the rule by which the shim patches an object by default): a project's own `.so` beside its
//! program, Debian's `libjq.so.1` under `jq`. A library found nowhere, or found elsewhere by
//! the loader than here, gets no list (the shim checks the list's path, size and time).

use object::read::elf::{Dyn, FileHeader};
use std::path::{Path, PathBuf};

/// At most this many libraries are looked at (a bound on a damaged or huge dependency graph).
const MAX_LIBRARIES: usize = 256;

/// Where the loader looks last (glibc's defaults and Debian's multiarch directories, which
/// `/etc/ld.so.conf` names).
const DEFAULT_DIRS: [&str; 8] = [
    "/usr/local/lib/x86_64-linux-gnu",
    "/usr/local/lib",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];

/// The dynamic entries of an ELF file that say where its libraries are.
#[derive(Debug, Default, PartialEq, Eq)]
struct Dynamic {
    needed: Vec<String>,
    rpath: Vec<String>,
    runpath: Vec<String>,
}

fn dynamic(data: &[u8]) -> Option<Dynamic> {
    let header = object::elf::FileHeader64::<object::Endianness>::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.sections(endian, data).ok()?;
    let (entries, link) = sections.dynamic(endian, data).ok()??;
    let strings = sections.strings(endian, data, link).ok()?;
    let mut out = Dynamic::default();
    for d in entries {
        let Some(tag) = d.tag32(endian) else { continue };
        let text = || d.string(endian, strings).ok().and_then(|s| std::str::from_utf8(s).ok()).map(str::to_string);
        match tag {
            object::elf::DT_NEEDED => out.needed.extend(text()),
            object::elf::DT_RPATH => out.rpath.extend(text().iter().flat_map(|t| t.split(':').map(str::to_string))),
            object::elf::DT_RUNPATH => out.runpath.extend(text().iter().flat_map(|t| t.split(':').map(str::to_string))),
            _ => {}
        }
    }
    Some(out)
}

/// The libraries of the program at `program` (absolute) that the shim patches by default, in
/// load order (breadth first, as the loader lists them), links resolved.
pub fn patched_libraries(program: &Path) -> Vec<PathBuf> {
    let ld_library_path = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    let program = program.canonicalize().unwrap_or_else(|_| program.to_path_buf());
    let program_text = program.to_string_lossy().into_owned();
    // Only the program and the libraries kept are read: a system library's own libraries are
    // the system's (a program without libraries of its own costs one read of its own file).
    let mut seen: Vec<PathBuf> = vec![program.clone()];
    let mut queue: Vec<PathBuf> = vec![program.clone()];
    let mut out = Vec::new();
    while let Some(object) = (!queue.is_empty() && seen.len() < MAX_LIBRARIES).then(|| queue.remove(0)) {
        let Ok(data) = crate::detect::map_file(&object) else { continue };
        let Some(dy) = dynamic(&data) else { continue };
        let origin = object.parent().map(Path::to_path_buf).unwrap_or_default();
        for name in &dy.needed {
            let Some(found) = find(name, &dy, &origin, &ld_library_path) else { continue };
            let found = found.canonicalize().unwrap_or(found);
            if seen.contains(&found) {
                continue;
            }
            seen.push(found.clone());
            if trace_format::objects::not_the_programs(&found.to_string_lossy(), Some(&program_text)).is_none() {
                queue.push(found.clone());
                out.push(found);
            }
        }
    }
    out
}

/// Where the loader finds library `name` needed by an object whose dynamic entries are `dy`
/// and whose directory is `origin`.
fn find(name: &str, dy: &Dynamic, origin: &Path, ld_library_path: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(expand(name, origin));
        return p.is_file().then_some(p);
    }
    let rpath = if dy.runpath.is_empty() { dy.rpath.as_slice() } else { &[] };
    let dirs = rpath
        .iter()
        .map(|d| expand(d, origin))
        .chain(ld_library_path.split([':', ';']).map(str::to_string))
        .chain(dy.runpath.iter().map(|d| expand(d, origin)))
        .chain(DEFAULT_DIRS.iter().map(|d| d.to_string()));
    dirs.filter(|d| !d.is_empty()).map(|d| Path::new(&d).join(name)).find(|p| p.is_file())
}

/// `$ORIGIN` (and `${ORIGIN}`) in a path of the dynamic section, expanded to `origin`.
fn expand(path: &str, origin: &Path) -> String {
    let o = origin.to_string_lossy();
    path.replace("${ORIGIN}", &o).replace("$ORIGIN", &o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_is_expanded_and_runpath_hides_rpath() {
        assert_eq!(expand("$ORIGIN/../lib:${ORIGIN}", Path::new("/opt/app/bin")), "/opt/app/bin/../lib:/opt/app/bin");
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("libx.so"), b"").unwrap();
        std::fs::write(b.join("libx.so"), b"").unwrap();
        let dy = |rpath: &Path, runpath: Option<&Path>| Dynamic {
            needed: vec![],
            rpath: vec![rpath.to_string_lossy().into_owned()],
            runpath: runpath.iter().map(|p| p.to_string_lossy().into_owned()).collect(),
        };
        assert_eq!(find("libx.so", &dy(&a, None), Path::new("/"), ""), Some(a.join("libx.so")));
        assert_eq!(find("libx.so", &dy(&a, Some(&b)), Path::new("/"), ""), Some(b.join("libx.so")));
        // LD_LIBRARY_PATH comes before DT_RUNPATH, after DT_RPATH.
        assert_eq!(find("libx.so", &dy(&a, Some(&b)), Path::new("/"), &a.to_string_lossy()), Some(a.join("libx.so")));
        assert_eq!(find("libnone.so.9", &dy(&a, None), Path::new("/"), ""), None);
    }

    #[test]
    fn a_system_program_has_no_library_of_its_own_to_probe() {
        // /bin/sh's libraries are the C runtime's.
        assert_eq!(patched_libraries(Path::new("/bin/sh")), Vec::<PathBuf>::new());
    }
}
