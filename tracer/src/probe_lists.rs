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
/// native and recorded by entry patching.
pub fn write(plan: &Plan, out: &Path) {
    if !patched_native(plan) {
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

/// Whether the program is native and recorded by entry patching.
fn patched_native(plan: &Plan) -> bool {
    let patching = plan.env.iter().any(|(n, c)| *n == plan::ENV_NATIVE_PATCH && *c != plan::EnvChange::Set("0".into()))
        || std::env::var_os(plan::ENV_NATIVE_PATCH).is_some_and(|v| v != "0");
    patching && plan.meta.target_kind == TargetKind::Native.as_str()
}

/// Whether the run gets inline probes: a native program recorded by entry patching, unless
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
