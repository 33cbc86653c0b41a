//! What a prompt says about inlined native code (docs/native-recording.md, "Inlined
//! functions"): where inline probes were planted, a function the compiler inlined is in the
//! tree when its code ran, and only then; where none were, whether inlined code ran cannot be
//! told, and the note says so, per object.

use std::collections::BTreeMap;
use std::path::Path;
use trace_format::meta::{DlopenedList, PatchReport, Unlisted, DLOPENED_INLINE_PROBES_FILE};

/// The note of a trace with entry-patched processes, from their `patch.json` and what `trace
/// run` found about the libraries loaded by `dlopen` (`inline-probes-dlopened.json`).
pub fn note(dir: &Path) -> String {
    let reports: Vec<PatchReport> = trace_format::reader::TraceDir::open_with(dir, trace_format::reader::FuncTables::Count)
        .map(|td| td.processes.iter().filter_map(|p| p.patch_report().ok().flatten()).collect())
        .unwrap_or_default();
    let dlopened: Vec<DlopenedList> = std::fs::File::open(dir.join(DLOPENED_INLINE_PROBES_FILE))
        .ok()
        .and_then(|f| serde_json::from_reader(std::io::BufReader::new(std::io::Read::take(f, 16 << 20))).ok())
        .unwrap_or_default();
    note_with(&reports, &dlopened)
}

/// Most folded functions a note names.
const FOLDED_NAMED: usize = 8;

/// The note on the program's own functions the compiler inlined leaving no code of their own in
/// the debug information ([`trace_format::meta::InlineProbeList::folded`]), whose running no
/// probe sees, among those declared in `shown_files` (the files of the prompt's functions):
/// without it a model reads the note above as "not in the tree, so it did not run". `None`
/// when there are none (or the trace's lists predate them).
pub fn folded_note(dir: &Path, shown_files: &std::collections::HashSet<&Path>) -> Option<String> {
    use trace_format::probes::{read_list, read_lists, ProbeKind};
    let kind = ProbeKind::Inline;
    let lists = read_list(&dir.join(kind.program_file()))
        .into_iter()
        .chain(read_lists(&dir.join(kind.libraries_file())).unwrap_or_default())
        .collect::<Vec<_>>();
    let mut named: Vec<String> = Vec::new();
    let mut total = 0usize;
    for f in lists.iter().flat_map(|l| &l.folded) {
        if !shown_files.contains(Path::new(&f.file)) {
            continue;
        }
        total += 1;
        if named.len() < FOLDED_NAMED {
            let file = f.file.rsplit('/').next().unwrap_or(&f.file);
            named.push(format!("`{}` ({file}:{})", trace_format::escape::line(&f.name), f.line));
        }
    }
    if total == 0 {
        return None;
    }
    let more = if total > named.len() { format!(" and {} more", total - named.len()) } else { String::new() };
    Some(format!(
        "The compiler inlined {}{more} into {} callers leaving no code of {} own in the debug information, so no probe can \
         see {} run: whether {} ran cannot be told, and {} never in the tree; the callers' source shows where {} called.",
        named.join(", "),
        if total == 1 { "its" } else { "their" },
        if total == 1 { "its" } else { "their" },
        if total == 1 { "it" } else { "them" },
        if total == 1 { "it" } else { "they" },
        if total == 1 { "it is" } else { "they are" },
        if total == 1 { "it is" } else { "they are" },
    ))
}

/// Why a library loaded by `dlopen` got no inline probe, from what `trace run` found after the
/// run (`None`: it said nothing of it, as before it did; or it had no list because it has no
/// inlined code of its own, which [`note_with`] says otherwise).
fn dlopened_reason(d: &DlopenedList) -> Option<&'static str> {
    match (d.listed, d.unlisted) {
        _ if d.had_list => Some(
            "its list was there, but it was patched only after dlopen returned (with text relocations, or a loader whose hook \
             the shim does not know), when its code may already run, so no probe was planted",
        ),
        (Some(0), _) => None,
        (None, _) => Some("it was loaded by dlopen and has no debug information to list its inlined code from"),
        (Some(_), Some(Unlisted::Late)) => Some(
            "it was patched only after dlopen returned (with text relocations, or a loader whose hook the shim does not know), \
             when its code may already run, so no probe was planted",
        ),
        (Some(_), Some(Unlisted::TimedOut)) => Some(
            "trace run did not list it within the time the program waits, SLICE_TRACE_LISTS_TIMEOUT_MS (5000 ms by default); \
             the list is cached now, a second run probes it",
        ),
        (Some(_), Some(Unlisted::Unreachable)) => {
            Some("trace run could not be reached to list it: the process outlived the run, or its socket was not visible there")
        }
        (Some(_), _) => Some(
            "it was loaded by dlopen and no list was asked for during the run (an older recorder, or a process whose environment \
             left out SLICE_TRACE_LISTS_SOCKET)",
        ),
    }
}

/// Why an object patched at start-up (the executable or a library of a program the recorded one
/// started, asked for by its shim then) got no inline probe, when its `patch.json` says
/// (`unlisted`); `None`: it said nothing (it was answered with no list: no debug information).
fn started_reason(unlisted: Option<Unlisted>) -> Option<&'static str> {
    match unlisted? {
        Unlisted::TimedOut => Some(
            "trace run did not list it within the time the program waits at its start, SLICE_TRACE_LISTS_TIMEOUT_MS (5000 ms by \
             default); the list is cached now, a second run probes it",
        ),
        Unlisted::Unreachable => {
            Some("trace run could not be reached to list it: the process outlived the run, or its socket was not visible there")
        }
        Unlisted::Late | Unlisted::Other => None,
    }
}

/// [`note_with`] without anything known of the libraries loaded by `dlopen`.
pub fn note_from(reports: &[PatchReport]) -> String {
    note_with(reports, &[])
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Why an object that is not the program's own code got no inline probe: only the program's
/// code and its own libraries get them.
fn system_reason(path: &str, program: Option<&str>) -> &'static str {
    match trace_format::objects::not_the_programs(path, program) {
        Some("the C runtime") => "it is the C runtime, whose inlined code is never probed, with debug information or without",
        Some("the Rust toolchain") => "it is the Rust toolchain's, whose inlined code is never probed",
        Some("a system program") => "it is a system program, whose inlined code is never probed",
        _ => "it is a system library, whose inlined code is never probed, with debug information or without",
    }
}

/// [`note`] from the processes' reports and what `trace run` found about the libraries loaded
/// by `dlopen` that got no probe (`dlopened`).
pub fn note_with(reports: &[PatchReport], dlopened: &[DlopenedList]) -> String {
    // Per object (by file name): probed (entries that could not be probed), with nothing of
    // its own inlined (an empty list), not probed for a reason known (a library loaded by
    // `dlopen`), or not probed.
    let mut probed: BTreeMap<&str, u64> = BTreeMap::new();
    let mut nothing_inlined: Vec<&str> = Vec::new();
    let mut unprobed: Vec<&str> = Vec::new();
    let mut unprobed_why: BTreeMap<&str, &str> = BTreeMap::new();
    // Each object with its process's program (the first object of its report).
    for (program, o) in reports.iter().flat_map(|r| r.objects.iter().map(move |o| (r.objects.first().map(|p| p.path.as_str()), o))) {
        let name = file_name(&o.path);
        let found = dlopened.iter().find(|d| o.dlopened && d.object == o.path);
        match &o.inline_probes {
            Some(p) if p.listed == 0 && !nothing_inlined.contains(&name) => nothing_inlined.push(name),
            Some(p) if p.listed == 0 => {}
            Some(p) => *probed.entry(name).or_default() += p.unprobed,
            None if o.patched == 0 => {}
            None => match found.map(|d| (d, dlopened_reason(d))) {
                Some((_, Some(why))) => {
                    unprobed_why.insert(name, why);
                }
                Some((d, None)) if d.listed == Some(0) && !nothing_inlined.contains(&name) => nothing_inlined.push(name),
                None if !o.dlopened && started_reason(o.unlisted).is_some() => {
                    unprobed_why.insert(name, started_reason(o.unlisted).unwrap_or_default());
                }
                // libc patched under SLICE_TRACE_PATCH=all: never probed, debug information or
                // not (libc6-dbg installed, its lines read, the note said "no debug information").
                None if trace_format::objects::not_the_programs(&o.path, program).is_some() => {
                    unprobed_why.insert(name, system_reason(&o.path, program));
                }
                _ if !unprobed.contains(&name) => unprobed.push(name),
                _ => {}
            },
        }
    }
    nothing_inlined.retain(|n| !probed.contains_key(n));
    unprobed_why.retain(|n, _| !probed.contains_key(n) && !nothing_inlined.contains(n));
    unprobed.retain(|n| !probed.contains_key(n) && !nothing_inlined.contains(n) && !unprobed_why.contains_key(n));
    // One part per kind of object, joined by spaces.
    let mut parts: Vec<String> = Vec::new();
    if !probed.is_empty() {
        let names: Vec<&str> = probed.keys().copied().collect();
        parts.push(format!(
            "in {}, a function the compiler inlined into its caller is shown under that caller, marked [inlined], when a one-shot \
             probe at the start of its inlined code fired (the first time it ran in the process, under the function running \
             then); inlined code whose probe did not fire did not run and is not shown. Inlined code of the standard library \
             and of system headers has no probe and is never shown (a dependency's, from cargo's registry or a \
             vendored directory, a Rust program's, has probes like the program's); the caller's source shows where it is \
             called.",
            names.join(", ")
        ));
        let lost: u64 = probed.values().sum();
        if lost > 0 {
            parts.push(format!("{lost} inlined entries could not be probed: whether their code ran is not known."));
        }
    }
    if !nothing_inlined.is_empty() {
        parts.push(format!(
            "in {}, the debug information lists none of its own code as inlined: every one of its functions that ran with \
             code of its own is in the tree as a call.",
            nothing_inlined.join(", ")
        ));
    }
    for (name, why) in &unprobed_why {
        parts.push(format!(
            "in {name}, no inline probe was planted ({why}), so whether code the compiler inlined there ran cannot be told in \
             this run: a function inlined into its caller runs without a call and is not in the tree; the caller's source shows \
             where it is called."
        ));
    }
    if !unprobed.is_empty() {
        parts.push(format!(
            "in {}, no inline probe was planted (no debug information, a library loaded by dlopen, or SLICE_TRACE_INLINE=0), so whether code the \
             compiler inlined there ran cannot be told: a function inlined into its caller runs without a call and is never in \
             the tree, even when its code ran; the caller's source shows where it is called.",
            unprobed.join(", ")
        ));
    }
    if parts.is_empty() {
        parts.push(
            "no inline probe was planted, so whether code the compiler inlined ran cannot be told: a function inlined into its \
             caller runs without a call and is never in the tree, even when its code ran; the caller's source shows where it is \
             called."
                .to_string(),
        );
    }
    format!("Native code recorded by patching function entries (an ordinary build, not instrumented): {}", parts.join(" "))
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
        let probed = InlineProbes { listed: 3, planted: 2, at_entry: 0, unprobed: 1, deferred: 0, covered: 0 };
        let r = PatchReport {
            patched: 9,
            objects: vec![obj("/w/app", 5, Some(probed.clone())), obj("/w/libshapes.so", 4, None), obj("/usr/lib/libc.so.6", 0, None)],
            ..PatchReport::default()
        };
        let n = note_from(&[r]);
        assert!(n.contains("in app, a function the compiler inlined into its caller is shown under that caller, marked [inlined]"), "{n}");
        assert!(n.contains(" 1 inlined entries could not be probed"), "{n}");
        // What gets no probe is the standard library's and the system headers' inlined code, not
        // a dependency's: `trace run` lists those (`tracer::inline_probes::own_code`).
        assert!(n.contains("Inlined code of the standard library and of system headers has no probe"), "{n}");
        assert!(!n.contains("of dependencies has no probe"), "{n}");
        assert!(n.contains("in libshapes.so, no inline probe was planted"), "{n}");
        assert!(!n.contains("libc"), "{n}");
        let none = note_from(&[PatchReport { patched: 1, objects: vec![obj("/w/app", 1, None)], ..PatchReport::default() }]);
        assert!(none.contains("in app, no inline probe was planted") && !none.contains("marked [inlined]"), "{none}");
        assert!(note_from(&[]).contains("no inline probe was planted, so whether code the compiler inlined ran cannot be told"));
        // An -O0 program: its list is empty, nothing of it is inlined.
        let empty = InlineProbes { listed: 0, planted: 0, at_entry: 0, unprobed: 0, deferred: 0, covered: 0 };
        let o0 = note_from(&[PatchReport {
            patched: 5,
            objects: vec![obj("/w/app", 3, Some(empty)), obj("/w/libshapes.so", 2, Some(probed))],
            ..PatchReport::default()
        }]);
        assert!(o0.contains("in app, the debug information lists none of its own code as inlined"), "{o0}");
        assert!(o0.contains("in libshapes.so, a function the compiler inlined") && !o0.contains("cannot be told"), "{o0}");
        // libc patched (SLICE_TRACE_PATCH=all): never probed by rule, not for want of debug
        // information.
        let all = note_from(&[PatchReport {
            patched: 8,
            objects: vec![obj("/w/app", 3, None), obj("/usr/lib/x86_64-linux-gnu/libc.so.6", 5, None)],
            ..PatchReport::default()
        }]);
        assert!(
            all.contains("in libc.so.6, no inline probe was planted (it is the C runtime, whose inlined code is never probed"),
            "{all}"
        );
        assert!(all.contains("in app, no inline probe was planted (no debug information"), "{all}");
        // A library of the program's own installed beside the system's (jq's libjq) is not one.
        let jq = note_from(&[PatchReport {
            patched: 8,
            objects: vec![obj("/usr/bin/jq", 0, None), obj("/usr/lib/x86_64-linux-gnu/libjq.so.1.0.4", 8, None)],
            ..PatchReport::default()
        }]);
        assert!(jq.contains("in libjq.so.1.0.4, no inline probe was planted (no debug information"), "{jq}");
    }

    #[test]
    fn a_library_loaded_by_dlopen_without_probes_gets_the_reason_trace_run_found() {
        let dl = |path: &str| PatchObject { dlopened: true, ..obj(path, 2, None) };
        let r = PatchReport {
            patched: 9,
            objects: vec![
                obj("/w/host", 3, None),
                dl("/w/plugin.so"),
                dl("/w/nodebug.so"),
                dl("/w/o0.so"),
                dl("/w/textrel.so"),
                dl("/w/late.so"),
                dl("/w/slow.so"),
                dl("/w/gone.so"),
                dl("/w/old.so"),
            ],
            ..PatchReport::default()
        };
        let found =
            |object: &str, listed: Option<u64>, had_list: bool| DlopenedList { object: object.into(), listed, had_list, unlisted: None };
        let why = |object: &str, unlisted: Unlisted| DlopenedList { unlisted: Some(unlisted), ..found(object, Some(2), false) };
        let n = note_with(
            &[r],
            &[
                found("/w/plugin.so", Some(2), false),
                found("/w/nodebug.so", None, false),
                found("/w/o0.so", Some(0), false),
                found("/w/textrel.so", Some(3), true),
                why("/w/late.so", Unlisted::Late),
                why("/w/slow.so", Unlisted::TimedOut),
                why("/w/gone.so", Unlisted::Unreachable),
            ],
        );
        assert!(
            n.contains("in plugin.so, no inline probe was planted (it was loaded by dlopen and no list was asked for during the run"),
            "{n}"
        );
        assert!(n.contains("in late.so, no inline probe was planted (it was patched only after dlopen returned"), "{n}");
        assert!(n.contains("in slow.so, no inline probe was planted (trace run did not list it within the time"), "{n}");
        assert!(n.contains("in gone.so, no inline probe was planted (trace run could not be reached to list it"), "{n}");
        assert!(n.contains("in nodebug.so, no inline probe was planted (it was loaded by dlopen and has no debug information"), "{n}");
        assert!(n.contains("in o0.so, the debug information lists none of its own code as inlined"), "{n}");
        assert!(
            n.contains("in textrel.so, no inline probe was planted (its list was there, but it was patched only after dlopen returned"),
            "{n}"
        );
        // Nothing found about it (an older trace): the general note, naming it with the program.
        assert!(n.contains("in host, old.so, no inline probe was planted (no debug information, a library loaded by dlopen"), "{n}");
    }

    /// The executable of a program the recorded one started, asked for at its start: why it got
    /// no probe when its shim says (`unlisted`), the general note when it was answered with none.
    #[test]
    fn a_started_program_without_probes_gets_the_reason_its_shim_gave() {
        let started = |path: &str, unlisted: Option<Unlisted>| PatchObject { unlisted, ..obj(path, 2, None) };
        let r = PatchReport {
            patched: 6,
            objects: vec![
                started("/w/slow", Some(Unlisted::TimedOut)),
                started("/w/orphan", Some(Unlisted::Unreachable)),
                started("/w/nodebug", None),
            ],
            ..PatchReport::default()
        };
        let n = note_from(&[r]);
        assert!(
            n.contains("in slow, no inline probe was planted (trace run did not list it within the time the program waits at its start"),
            "{n}"
        );
        assert!(n.contains("in orphan, no inline probe was planted (trace run could not be reached to list it"), "{n}");
        assert!(n.contains("in nodebug, no inline probe was planted (no debug information"), "{n}");
    }
}
