//! The statement rows of an object's line table: where each `is_stmt` row starts, in which
//! file and on which line. The recorder lists them for `trace run --lines`' line probes
//! (tracer/src/line_probes.rs), and the analyzer turns the rows whose probes fired back into
//! lines (analyzer/src/native/lines.rs): one walk, so that both see the same rows and the
//! same file paths (those of [`crate::units::file_path`], as functions' files are named).

use crate::functions::{map_file, ObjectError};
use crate::units::{file_path, Sections};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One `is_stmt` row: its address as an offset from the object's first loaded page, its file
/// (absolute, lexically normalized) and line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub offset: u64,
    pub file: Arc<Path>,
    pub line: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum LinesError {
    #[error(transparent)]
    Object(#[from] ObjectError),
    #[error("cannot read its line table ({0})")]
    Dwarf(#[from] gimli::Error),
}

/// The `is_stmt` rows of the object at `path` (ends of sequences and rows without a line
/// left out), in the line table's order, of the files `keep_file` accepts and at the offsets
/// `keep_offset` accepts; at most `max`.
pub fn statement_rows(
    path: &Path,
    keep_file: impl Fn(&Path) -> bool,
    keep_offset: impl Fn(u64) -> bool,
    max: usize,
) -> Result<Vec<Row>, LinesError> {
    use object::{Object, ObjectSegment};
    let map = map_file(path).map_err(ObjectError::from)?;
    let obj = object::File::parse(&*map).map_err(ObjectError::from)?;
    let bias = obj.segments().map(|s| s.address()).min().map_or(0, |v| v & !0xfff);
    let sections = Sections::of(&obj);
    let dwarf = sections.dwarf();
    // Files by path, each once (kept or not).
    let mut paths: HashMap<PathBuf, Option<Arc<Path>>> = HashMap::new();
    let mut out = Vec::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next()? {
        let Ok(unit) = dwarf.unit(header) else { continue };
        let unit = unit.unit_ref(&dwarf);
        let Some(program) = unit.line_program.clone() else { continue };
        // This unit's file indices, resolved once each.
        let mut here: HashMap<u64, Option<Arc<Path>>> = HashMap::new();
        let mut rows = program.rows();
        while let Some((_, row)) = rows.next_row()? {
            if row.end_sequence() || !row.is_stmt() || row.address() < bias || !keep_offset(row.address() - bias) {
                continue;
            }
            let Some(line) = row.line() else { continue };
            let fi = row.file_index();
            let file = here.entry(fi).or_insert_with(|| {
                let p = file_path(&unit, fi)?;
                paths.entry(p).or_insert_with_key(|p| keep_file(p).then(|| Arc::from(p.as_path()))).clone()
            });
            let Some(file) = file else { continue };
            out.push(Row { offset: row.address() - bias, file: file.clone(), line: line.get().min(u32::MAX as u64) as u32 });
            if out.len() >= max {
                return Ok(out);
            }
        }
    }
    Ok(out)
}
