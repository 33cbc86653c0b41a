//! Inline probes for the libraries a program loads by `dlopen` (a plugin, a module a C program
//! opens at run time; docs/native-recording.md, "Inlined functions"). Their inline-probe lists
//! cannot be known before the program's first run, and reading DWARF inside every traced
//! process is not an option (a shell or `make` loads the shim too). So `trace run` learns them
//! from the run itself:
//!
//! - **After the run** ([`after_run`]), from each process's `patch.json`: the non-system
//!   objects loaded by `dlopen` and patched. Those that got no inline probes get their list
//!   computed now and cached (`inline_probes::cached_probe_list`, keyed by path, size and
//!   time: a changed object never uses a stale list), and are said in
//!   `inline-probes-dlopened.json`, so that the prompt's note gives the reason for each. Every
//!   such object is remembered as one the program loads (per program, in the per-user cache:
//!   `<cache>/slice-trace/dlopened/<sha256 of the program's path>.json`).
//! - **Before the next run** ([`earlier_inline_lists`]): the lists of the objects remembered for the
//!   program (cache hits; computed again for one that changed) go into
//!   `inline-probes-libs.json` beside those of its `DT_NEEDED` libraries, and the shim plants
//!   them when the loader's hook inside `dlopen` patches the object (shims/native/src/objects.rs).
//!
//! Line probes (`--lines`) the same way: after a run with `--lines`, each object loaded by
//! `dlopen` gets its line list computed and cached too; before the next run with `--lines`,
//! the remembered objects' line lists ([`earlier_line_lists`]) go into `line-probes-libs.json`,
//! planted at the same point as their inline probes.
//!
//! A run that loads nothing by `dlopen` costs one failed `open` of the program's record before
//! it (one per kind of list), and a read of each process's `patch.json` after it.

use std::path::{Path, PathBuf};
use trace_format::meta::{DlopenedList, InlineProbeList, PatchReport, PATCH_FILE};

/// At most this many objects are remembered per program (the most recently loaded).
const REMEMBERED: usize = 64;

/// A record, or a `patch.json`, is read only up to this size.
const MAX_DOC: u64 = 16 << 20;

/// The file remembering which objects runs of `program` loaded by `dlopen`, in the per-user
/// cache (its directories made private, as the lists' are), if there is a cache.
fn record_file(program: &Path) -> Option<PathBuf> {
    record_file_in(&crate::shims::cache_dir().ok()?, program)
}

/// [`record_file`] in the cache directory `cache` (its directories are made only by
/// [`remember`], when there is something to write).
fn record_file_in(cache: &Path, program: &Path) -> Option<PathBuf> {
    use sha2::{Digest, Sha256};
    let dir = cache.join("dlopened");
    let program = program.canonicalize().unwrap_or_else(|_| program.to_path_buf());
    let key: String = Sha256::digest(program.as_os_str().as_encoded_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    Some(dir.join(format!("{key}.json")))
}

fn read_json<T: serde::de::DeserializeOwned>(file: &Path) -> Option<T> {
    use std::io::Read;
    let f = std::fs::File::open(file).ok()?;
    let mut bytes = Vec::new();
    f.take(MAX_DOC).read_to_end(&mut bytes).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The objects remembered in `record` (a [`record_file`]), most recently loaded first.
fn remembered(record: Option<PathBuf>) -> Vec<String> {
    record.and_then(|f| read_json(&f)).unwrap_or_default()
}

/// The inline-probe lists of the objects that earlier runs of `program` loaded by `dlopen`
/// (see the module's description), but those whose object is among `have`'s.
pub fn earlier_inline_lists(program: &Path, have: &[InlineProbeList]) -> Vec<InlineProbeList> {
    earlier_lists(program, have, crate::inline_probes::cached_probe_list)
}

/// The line-probe lists of the objects that earlier runs of `program` loaded by `dlopen`, but
/// those whose object is among `have`'s.
pub fn earlier_line_lists(program: &Path, have: &[InlineProbeList]) -> Vec<InlineProbeList> {
    earlier_lists(program, have, crate::line_probes::cached_line_list)
}

/// The lists (`list`) of the objects remembered for `program`, but those among `have`'s.
fn earlier_lists(program: &Path, have: &[InlineProbeList], list: fn(&Path) -> Option<InlineProbeList>) -> Vec<InlineProbeList> {
    remembered(record_file(program)).iter().filter(|o| !have.iter().any(|l| l.object == **o)).filter_map(|o| list(Path::new(o))).collect()
}

/// After the run whose trace directory is `out` (see the module's description): the objects
/// its processes loaded by `dlopen` are remembered for `program`; with inline probes
/// (`inline`), those without them get their lists cached and are said in
/// `inline-probes-dlopened.json`; with line probes (`lines`), each gets its line list cached.
/// `listed` are the libraries' inline lists `trace run` gave the run.
pub fn after_run(out: &Path, program: &Path, listed: &[InlineProbeList], inline: bool, lines: bool) {
    let mut loaded: Vec<String> = Vec::new();
    let mut unprobed: Vec<DlopenedList> = Vec::new();
    let Ok(entries) = std::fs::read_dir(out) else { return };
    for e in entries.filter_map(Result::ok) {
        if !e.file_name().to_str().is_some_and(|n| n.starts_with('p')) {
            continue;
        }
        let Some(report) = read_json::<PatchReport>(&e.path().join(PATCH_FILE)) else { continue };
        for o in report.objects.iter().filter(|o| o.dlopened && o.patched > 0 && o.skipped.is_none()) {
            if !loaded.contains(&o.path) {
                loaded.push(o.path.clone());
                if lines && o.line_probes.is_none() {
                    // Cached for the next run (its result is not needed now).
                    let _ = crate::line_probes::cached_line_list(Path::new(&o.path));
                }
            }
            if !inline || o.inline_probes.is_some() || unprobed.iter().any(|u| u.object == o.path) {
                continue;
            }
            let list = crate::inline_probes::cached_probe_list(Path::new(&o.path));
            let had_list = list.as_ref().is_some_and(|l| listed.contains(l));
            unprobed.push(DlopenedList { object: o.path.clone(), listed: list.map(|l| l.offsets.len() as u64), had_list });
        }
    }
    if let Some(file) = record_file(program).filter(|_| !loaded.is_empty()) {
        remember(&file, loaded);
    }
    if !unprobed.is_empty() {
        unprobed.sort_by(|a, b| a.object.cmp(&b.object));
        if let Err(e) = super::run::write_json_atomic(&out.join(trace_format::meta::DLOPENED_INLINE_PROBES_FILE), &unprobed) {
            eprintln!("trace: cannot write what became of the dlopen'd libraries' inline probes ({e:#})");
        }
    }
}

/// Remember `loaded` in `file` (a program's [`record_file`]) as objects the program loads by
/// `dlopen`, before those remembered already (the files gone are forgotten; at most
/// [`REMEMBERED`]).
fn remember(file: &Path, loaded: Vec<String>) {
    let before: Vec<String> = read_json(file).unwrap_or_default();
    let mut all = loaded;
    for o in before {
        if !all.contains(&o) {
            all.push(o);
        }
    }
    all.retain(|o| Path::new(o).is_file());
    all.truncate(REMEMBERED);
    let Some(dir) = file.parent() else { return };
    let Some(cache) = dir.parent() else { return };
    if crate::shims::private_dir(cache).is_err() || crate::shims::private_dir(dir).is_err() {
        return;
    }
    if let Ok(mut tmp) = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir) {
        use std::io::Write;
        if serde_json::to_vec(&all).is_ok_and(|b| tmp.write_all(&b).is_ok()) {
            let _ = tmp.persist(file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_loaded_are_remembered_first_and_gone_files_forgotten() {
        let d = tempfile::tempdir().unwrap();
        let cache = d.path().join("cache");
        let (a, b, gone) = (d.path().join("a.so"), d.path().join("b.so"), d.path().join("gone.so"));
        std::fs::write(&a, b"").unwrap();
        std::fs::write(&b, b"").unwrap();
        let record = |p: &str| record_file_in(&cache, &d.path().join(p)).unwrap();
        let s = |p: &Path| p.to_string_lossy().into_owned();
        // Looking for a record makes no directory; remembering makes them.
        assert_eq!(remembered(Some(record("prog"))), Vec::<String>::new());
        assert!(!cache.exists());
        remember(&record("prog"), vec![s(&a), s(&gone)]);
        assert_eq!(remembered(Some(record("prog"))), vec![s(&a)]);
        remember(&record("prog"), vec![s(&b)]);
        assert_eq!(remembered(Some(record("prog"))), vec![s(&b), s(&a)]);
        assert_eq!(remembered(Some(record("other"))), Vec::<String>::new());
    }
}
