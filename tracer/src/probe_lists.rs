//! The probe lists `trace run` writes into the trace directory before a native program recorded
//! by entry patching starts, for the native shim (docs/trace-format.md, `trace_format::probes`):
//! inline probes (inline_probes.rs; unless `SLICE_TRACE_INLINE=0`) and, with `--lines`, line
//! probes (line_probes.rs), each for the program and for the shared libraries of its own that the
//! shim patches at start-up (libraries.rs), found once for both. The libraries loaded by `dlopen`
//! get theirs during the run, when the shim asks (dlopened.rs). Without a list nothing of that
//! kind is probed in that object: `slice` says it cannot tell which inlined functions ran, or
//! shows the object's functions whole.

use crate::detect::TargetKind;
use crate::plan::{self, Plan};
use std::cell::OnceCell;
use std::path::{Path, PathBuf};
use trace_format::meta::InlineProbeList;
use trace_format::probes::ProbeKind;

/// `SLICE_TRACE_INLINE=0` turns inline probes off.
pub const ENV_INLINE: &str = "SLICE_TRACE_INLINE";

/// One kind of list: how an object's is made, and what is lost when it cannot be written.
struct Kind {
    kind: ProbeKind,
    list: fn(&Path) -> Option<InlineProbeList>,
    /// The program's list as JSON, written as it is (no parse, no new serialization).
    json: fn(&Path) -> Option<Vec<u8>>,
    what: &'static str,
    lost: &'static str,
}

const INLINE: Kind = Kind {
    kind: ProbeKind::Inline,
    list: crate::inline_probes::cached_probe_list,
    json: crate::inline_probes::cached_probe_list_json,
    what: "inline-probe",
    lost: "inlined functions will not be shown",
};
const LINES: Kind = Kind {
    kind: ProbeKind::Lines,
    list: crate::line_probes::cached_line_list,
    json: crate::line_probes::cached_line_list_json,
    what: "line-probe",
    lost: "functions will be shown whole",
};

/// Write the lists `plan` asks for into the trace directory `out`: nothing unless the program is
/// native and recorded by entry patching (a script's or a system launcher's children are
/// listed when they start: dlopened.rs).
pub fn write(plan: &Plan, out: &Path) {
    if !patched_native(plan) || plan.meta.target_kind != TargetKind::Native.as_str() {
        return;
    }
    let libraries = OnceCell::new();
    if inline_wanted(plan) {
        write_kind(&INLINE, plan, out, &libraries);
    }
    if lines_wanted(plan) {
        write_kind(&LINES, plan, out, &libraries);
    }
}

/// Whether the run gets line probes (`--lines`, a native program recorded by entry patching).
pub fn lines_wanted(plan: &Plan) -> bool {
    patched_native(plan) && plan.meta.options["lines"] == "on"
}

/// Whether the run's native programs are recorded by entry patching: the program, native, or
/// those a script or a system launcher starts (`sh -c ./prog`, `make run`).
fn patched_native(plan: &Plan) -> bool {
    // The last value the plan sets wins (`--native-ext` sets `ext`, which patches only a
    // Python process's extension modules: no list is asked for then).
    let patching = match plan.env.iter().rev().find(|(n, _)| *n == plan::ENV_NATIVE_PATCH) {
        Some((_, c)) => ![plan::EnvChange::Set("0".into()), plan::EnvChange::Set("ext".into())].contains(c),
        None => std::env::var_os(plan::ENV_NATIVE_PATCH).is_some_and(|v| v != "0" && v != "ext"),
    };
    patching && [TargetKind::Native.as_str(), TargetKind::Other.as_str()].contains(&plan.meta.target_kind.as_str())
}

/// Whether the run gets inline probes: native programs recorded by entry patching, unless
/// `SLICE_TRACE_INLINE=0`.
pub fn inline_wanted(plan: &Plan) -> bool {
    patched_native(plan) && std::env::var_os(ENV_INLINE).is_none_or(|v| v != "0")
}

/// The program's list of `k` and its libraries' (one file, none when no library has a list);
/// the libraries are found at the first kind that needs them.
fn write_kind(k: &Kind, plan: &Plan, out: &Path, libraries: &OnceCell<Vec<PathBuf>>) {
    if let Some(mut list) = (k.json)(&plan.program) {
        list.push(b'\n');
        if let Err(e) = crate::run::write_bytes_atomic(&out.join(k.kind.program_file()), &list) {
            eprintln!("trace: cannot write the {} list ({e:#}); {}", k.what, k.lost);
        }
    }
    let lists: Vec<InlineProbeList> =
        libraries.get_or_init(|| crate::libraries::patched_libraries(&plan.program)).iter().filter_map(|l| (k.list)(l)).collect();
    if !lists.is_empty() {
        if let Err(e) = crate::run::write_json_compact_atomic(&out.join(k.kind.libraries_file()), &lists) {
            eprintln!("trace: cannot write the libraries' {} lists ({e:#}); their {}", k.what, k.lost);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{check_usage, Detected};
    use crate::run::{NativeFilter, RunOptions};

    fn plan(kind: TargetKind, patch: bool, native_ext: bool) -> Plan {
        let o = RunOptions {
            output: PathBuf::from("trace.d"),
            c_calls: false,
            lines: Some(true),
            lines_per_test: false,
            native_ext,
            python_hook: None,
            quiet: false,
            native_filter: NativeFilter::default(),
            command: vec!["prog".into()],
        };
        let d = Detected { patch, ..crate::plan::tests::detected("/work/prog", kind) };
        Plan::build(&o, &check_usage(&o).unwrap(), &d).unwrap()
    }

    /// Lists are asked for during the run wherever native programs are patched: a native
    /// program's run, and a script's or a system launcher's (`sh -c ./prog`), whose children
    /// are patched; not with `--native-ext` alone (extension modules only), nor for Python. The
    /// lists written before the run are a native program's only.
    #[test]
    fn lists_are_served_wherever_native_programs_are_patched_and_written_for_a_native_program() {
        if std::env::var_os(plan::ENV_NATIVE_PATCH).is_some() || std::env::var_os(ENV_INLINE).is_some() {
            return; // the environment decides instead
        }
        for (kind, patch, native_ext, wanted) in [
            (TargetKind::Native, true, false, true),
            (TargetKind::Other, true, false, true),
            (TargetKind::Other, true, true, false),
            (TargetKind::Other, false, false, false),
            (TargetKind::Python, false, true, false),
        ] {
            let p = plan(kind.clone(), patch, native_ext);
            assert_eq!((inline_wanted(&p), lines_wanted(&p)), (wanted, wanted), "{kind:?} patch={patch} native_ext={native_ext}");
        }
        // A script's plan writes no list before the run (its program, `sh`, has none to give).
        let d = tempfile::tempdir().unwrap();
        write(&plan(TargetKind::Other, true, false), d.path());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }
}
