//! The source files a native object was built from, as its DWARF line tables name them, so
//! `trace run` can fingerprint them when the run ends (`slice` shows no file without one).

use crate::functions::{find_debug_file, map_file, DebugSource};
use crate::units::{entry_path, Sections};
use std::path::{Path, PathBuf};

/// At most this many files are taken from one object (a bound on a damaged or huge one).
const MAX_FILES: usize = 50_000;

/// The absolute, lexically normalized paths of the files in the line tables of `module`'s
/// DWARF, as [`crate::functions`] names them (compilation directory, include directory, file
/// name). The DWARF is the object's, or that of its separate debug file (a stripped library
/// with its debug information installed: `trace_format::objects::debug_file_candidates`, where
/// `slice` finds it too). Empty for an object without debug information or one that cannot be
/// read.
pub fn dwarf_files(module: &Path) -> Vec<PathBuf> {
    let Ok(data) = map_file(module) else { return Vec::new() };
    let Ok(obj) = object::File::parse(&*data) else { return Vec::new() };
    match find_debug_file(module, &obj) {
        DebugSource::Itself => files_of(&obj).unwrap_or_default(),
        DebugSource::File(debug) => {
            let Ok(data) = map_file(&debug) else { return Vec::new() };
            object::File::parse(&*data).ok().and_then(|d| files_of(&d).ok()).unwrap_or_default()
        }
        DebugSource::None(_) => Vec::new(),
    }
}

fn files_of(obj: &object::File) -> Result<Vec<PathBuf>, gimli::Error> {
    let sections = Sections::of(obj);
    let dwarf = sections.dwarf();
    let mut out = Vec::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let Ok(unit) = dwarf.unit(header) else { continue };
        let unit = unit.unit_ref(&dwarf);
        let Some(program) = unit.line_program.as_ref() else { continue };
        let lh = program.header();
        for fe in lh.file_names() {
            let Some(p) = entry_path(&unit, lh, fe) else { continue };
            out.push(p);
            if out.len() >= MAX_FILES {
                return Ok(out);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_of_a_program_built_with_debug_info_are_listed() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("prog.c");
        std::fs::write(&src, "#include <stdio.h>\nint main(void) { puts(\"x\"); return 0; }\n").unwrap();
        let exe = d.path().join("prog");
        let st = std::process::Command::new("cc").arg("-g").arg("-o").arg(&exe).arg(&src).status().expect("run cc");
        assert!(st.success());
        let files = dwarf_files(&exe);
        assert!(files.contains(&src), "{files:?}");
        assert!(files.iter().any(|f| f.ends_with("stdio.h")), "{files:?}");
        assert!(dwarf_files(&src).is_empty(), "not an object");
    }
}
