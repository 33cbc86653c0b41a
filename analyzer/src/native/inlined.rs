//! What a prompt says about inlined native code (docs/native-recording.md, "Inlined
//! functions"): where inline probes were planted, a function the compiler inlined is in the
//! tree when its code ran, and only then; where none were, whether inlined code ran cannot be
//! told, and the note says so, per object.

use std::collections::BTreeMap;
use std::path::Path;
use trace_format::meta::PatchReport;

/// The note of a trace with entry-patched processes, from their `patch.json`.
pub fn note(dir: &Path) -> String {
    let reports: Vec<PatchReport> = trace_format::reader::TraceDir::open_with(dir, trace_format::reader::FuncTables::Count)
        .map(|td| td.processes.iter().filter_map(|p| p.patch_report().ok().flatten()).collect())
        .unwrap_or_default();
    note_from(&reports)
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// [`note`] from the processes' reports.
pub fn note_from(reports: &[PatchReport]) -> String {
    // Per object (by file name): probed (entries that could not be probed), or not.
    let mut probed: BTreeMap<&str, u64> = BTreeMap::new();
    let mut unprobed: Vec<&str> = Vec::new();
    for o in reports.iter().flat_map(|r| &r.objects) {
        let name = file_name(&o.path);
        match &o.inline_probes {
            Some(p) => *probed.entry(name).or_default() += p.unprobed,
            None if o.patched > 0 && !unprobed.contains(&name) => unprobed.push(name),
            None => {}
        }
    }
    unprobed.retain(|n| !probed.contains_key(n));
    let mut s = String::from("Native code recorded by patching function entries (an ordinary build, not instrumented): ");
    if !probed.is_empty() {
        let names: Vec<&str> = probed.keys().copied().collect();
        s.push_str(&format!(
            "in {}, a function the compiler inlined into its caller is shown under that caller, marked [inlined], when a one-shot \
             probe at the start of its inlined code fired (the first time it ran in the process, under the function running \
             then); inlined code whose probe did not fire did not run and is not shown. Inlined code of the standard library \
             and of dependencies has no probe and is never shown; the caller's source shows where it is called.",
            names.join(", ")
        ));
        let lost: u64 = probed.values().sum();
        if lost > 0 {
            s.push_str(&format!(" {lost} inlined entries could not be probed: whether their code ran is not known."));
        }
        if !unprobed.is_empty() {
            s.push(' ');
        }
    }
    if !unprobed.is_empty() {
        s.push_str(&format!(
            "in {}, no inline probe was planted (no debug information, a library loaded by dlopen, or SLICE_TRACE_INLINE=0), so whether code the \
             compiler inlined there ran cannot be told: a function inlined into its caller runs without a call and is never in \
             the tree, even when its code ran; the caller's source shows where it is called.",
            unprobed.join(", ")
        ));
    }
    if probed.is_empty() && unprobed.is_empty() {
        s.push_str(
            "no inline probe was planted, so whether code the compiler inlined ran cannot be told: a function inlined into its \
             caller runs without a call and is never in the tree, even when its code ran; the caller's source shows where it is \
             called.",
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_format::meta::{InlineProbes, PatchObject};

    fn obj(path: &str, patched: u64, probes: Option<InlineProbes>) -> PatchObject {
        PatchObject { path: path.into(), patched, inline_probes: probes, ..PatchObject::default() }
    }

    #[test]
    fn the_note_says_per_object_whether_inlined_code_can_be_told() {
        let probed = InlineProbes { listed: 3, planted: 2, at_entry: 0, unprobed: 1, deferred: 0 };
        let r = PatchReport {
            patched: 9,
            objects: vec![obj("/w/app", 5, Some(probed)), obj("/w/libshapes.so", 4, None), obj("/usr/lib/libc.so.6", 0, None)],
            ..PatchReport::default()
        };
        let n = note_from(&[r]);
        assert!(n.contains("in app, a function the compiler inlined into its caller is shown under that caller, marked [inlined]"), "{n}");
        assert!(n.contains(" 1 inlined entries could not be probed"), "{n}");
        assert!(n.contains("in libshapes.so, no inline probe was planted"), "{n}");
        assert!(!n.contains("libc"), "{n}");
        let none = note_from(&[PatchReport { patched: 1, objects: vec![obj("/w/app", 1, None)], ..PatchReport::default() }]);
        assert!(none.contains("in app, no inline probe was planted") && !none.contains("marked [inlined]"), "{none}");
        assert!(note_from(&[]).contains("no inline probe was planted, so whether code the compiler inlined ran cannot be told"));
    }
}
