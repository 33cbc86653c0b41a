//! The source files a native object was built from, as its DWARF line tables name them, so
//! `trace run` can fingerprint them when the run ends (`slice` shows no file without one).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

pub(crate) type R<'a> = gimli::EndianSlice<'a, gimli::RunTimeEndian>;

/// At most this many files are taken from one object (a bound on a damaged or huge one).
const MAX_FILES: usize = 50_000;

/// The absolute, lexically normalized paths of the files in the line tables of `module`'s
/// DWARF, as the analyzer's symbolizer names them (compilation directory, include directory,
/// file name). The DWARF is the object's, or that of its separate debug file (a stripped
/// library with its debug information installed: `trace_format::objects::debug_file_candidates`,
/// where `slice` finds it too). Empty for an object without debug information or one that
/// cannot be read.
pub fn dwarf_files(module: &Path) -> Vec<PathBuf> {
    use object::{Object, ObjectSection};
    let Ok(data) = crate::detect::map_file(module) else { return Vec::new() };
    let Ok(obj) = object::File::parse(&*data) else { return Vec::new() };
    if obj.section_by_name(".debug_info").is_some_and(|s| s.size() > 0) {
        return files_of(&obj).unwrap_or_default();
    }
    let build_id = obj.build_id().ok().flatten();
    let debuglink = obj.gnu_debuglink().ok().flatten().map(|(name, _crc)| name);
    for c in trace_format::objects::debug_file_candidates(module, build_id, debuglink) {
        let Ok(data) = crate::detect::map_file(&c) else { continue };
        let Ok(debug) = object::File::parse(&*data) else { continue };
        if debug.section_by_name(".debug_info").is_some_and(|s| s.size() > 0) {
            return files_of(&debug).unwrap_or_default();
        }
    }
    Vec::new()
}

/// The DWARF sections of an object that gimli reads, uncompressed (an absent one is empty):
/// one loader for the readers of `trace` (the source files here, the inline probes' list).
pub(crate) struct Sections<'d> {
    data: Vec<(gimli::SectionId, Cow<'d, [u8]>)>,
    endian: gimli::RunTimeEndian,
}

impl<'d> Sections<'d> {
    pub(crate) fn of(obj: &object::File<'d>) -> Sections<'d> {
        use object::{Object, ObjectSection};
        let ids = [
            gimli::SectionId::DebugAbbrev,
            gimli::SectionId::DebugAddr,
            gimli::SectionId::DebugInfo,
            gimli::SectionId::DebugLine,
            gimli::SectionId::DebugLineStr,
            gimli::SectionId::DebugRanges,
            gimli::SectionId::DebugRngLists,
            gimli::SectionId::DebugStr,
            gimli::SectionId::DebugStrOffsets,
        ];
        let data = ids
            .iter()
            .map(|&id| (id, obj.section_by_name(id.name()).and_then(|s| s.uncompressed_data().ok()).unwrap_or(Cow::Borrowed(&[][..]))))
            .collect();
        let endian = if obj.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
        Sections { data, endian }
    }

    pub(crate) fn dwarf(&self) -> Result<gimli::Dwarf<R<'_>>, gimli::Error> {
        gimli::Dwarf::load(|id: gimli::SectionId| -> Result<R<'_>, gimli::Error> {
            let data: &[u8] = self.data.iter().find(|(s, _)| *s == id).map(|(_, d)| d.as_ref()).unwrap_or(&[]);
            Ok(gimli::EndianSlice::new(data, self.endian))
        })
    }
}

fn files_of(obj: &object::File) -> Result<Vec<PathBuf>, gimli::Error> {
    let sections = Sections::of(obj);
    let dwarf = sections.dwarf()?;
    let mut out = Vec::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let Ok(unit) = dwarf.unit(header) else { continue };
        let unit = unit.unit_ref(&dwarf);
        let Some(program) = unit.line_program.as_ref() else { continue };
        let lh = program.header();
        for fe in lh.file_names() {
            let mut p = PathBuf::new();
            if let Some(cd) = &unit.comp_dir {
                p.push(cd.to_string_lossy().as_ref());
            }
            if let Some(dir) = fe.directory(lh) {
                if let Ok(d) = unit.attr_string(dir) {
                    p.push(d.to_string_lossy().as_ref());
                }
            }
            let Ok(name) = unit.attr_string(fe.path_name()) else { continue };
            p.push(name.to_string_lossy().as_ref());
            out.push(trace_format::normalize_path(&p));
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

    #[test]
    fn paths_are_normalized_lexically() {
        assert_eq!(trace_format::normalize_path(Path::new("/a/./b/../c.c")), PathBuf::from("/a/c.c"));
    }
}
