//! `trace info`: what a trace holds: from the totals in the headers of streams closed
//! normally, by reading the others once.

use anyhow::Result;
use serde::Serialize;
use std::fmt::Write as _;
use trace_format::escape::line;
use trace_format::TraceDir;

#[derive(Debug, Serialize)]
pub struct ThreadSummary {
    pub tid: u64,
    pub name: Option<String>,
    pub file: String,
    pub events: u64,
    pub calls: u64,
    /// The stream was not closed (its process was killed, called `_exit`, or exec'd).
    pub unclosed: bool,
    /// For an unclosed stream: where its written part ends (see `StreamSummary::unclosed_end`).
    #[serde(skip)]
    pub unclosed_end: Option<u64>,
    pub duration_ns: u64,
    /// A damaged tail: the events before it were counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct ProcSummary {
    pub dir: String,
    pub pid: u32,
    pub ppid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<u32>,
    pub argv: Vec<String>,
    pub kind: String,
    pub runtime: String,
    /// Python: the hook that recorded the process's calls (`proc.json`'s `hook`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook: Option<String>,
    pub functions: usize,
    pub events: u64,
    pub threads: Vec<ThreadSummary>,
    /// Entry patching of this process image (`patch.json`), if it was patched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<trace_format::meta::PatchReport>,
}

#[derive(Debug, Serialize)]
pub struct Summary {
    pub processes: usize,
    pub threads: usize,
    pub events: u64,
    pub functions: usize,
    pub procs: Vec<ProcSummary>,
    /// Messages about damaged streams.
    pub damaged: Vec<String>,
}

pub fn summarize(trace: &TraceDir) -> Result<Summary> {
    let mut procs = Vec::new();
    let mut damaged = Vec::new();
    for p in &trace.processes {
        let mut threads = Vec::new();
        for t in &p.threads {
            let sum = t.summary()?;
            let error = sum.error.as_ref().map(|e| e.to_string());
            damaged.extend(error.clone());
            threads.push(ThreadSummary {
                tid: t.header.tid,
                name: sum.name.clone(),
                file: t.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                events: sum.events(),
                calls: sum.calls,
                unclosed: sum.unclosed,
                unclosed_end: sum.unclosed_end,
                duration_ns: sum.end_ns.saturating_sub(t.header.start_ns),
                error,
            });
        }
        procs.push(ProcSummary {
            dir: p.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            pid: p.meta.pid,
            ppid: p.meta.ppid,
            forked_from: p.meta.forked_from,
            argv: p.meta.argv.clone(),
            kind: p.meta.kind.clone(),
            runtime: p.meta.runtime.clone(),
            hook: p.meta.hook.clone(),
            functions: p.func_count,
            events: threads.iter().map(|t| t.events).sum(),
            threads,
            patch: read_patch_report(p, &mut damaged),
        });
    }
    Ok(Summary {
        processes: procs.len(),
        threads: procs.iter().map(|p| p.threads.len()).sum(),
        events: procs.iter().map(|p| p.events).sum(),
        functions: procs.iter().map(|p| p.functions).sum(),
        procs,
        damaged,
    })
}

impl Summary {
    /// Why a run recorded no event, as `trace run` says it (`trace_format::meta::why_nothing`,
    /// which `slice` says too): `meta` is the run's.
    pub fn why_nothing(&self, meta: &trace_format::meta::TraceMeta) -> String {
        let reports: Vec<&trace_format::meta::PatchReport> = self.procs.iter().filter_map(|p| p.patch.as_ref()).collect();
        trace_format::meta::why_nothing(Some(meta), &reports, &trace_format::TraceRun)
    }
}

/// `patch.json` of a process directory (untrusted: a damaged file is reported and ignored).
fn read_patch_report(p: &trace_format::reader::Process, damaged: &mut Vec<String>) -> Option<trace_format::meta::PatchReport> {
    p.patch_report().unwrap_or_else(|e| {
        damaged.push(format!("{e}, ignored"));
        None
    })
}

/// Entry patching of one process: totals, then each object's counts (objects left alone as a
/// whole, such as system libraries, counted in one line unless `verbose`); `verbose` names
/// every function not patched.
fn render_patch(o: &mut String, r: &trace_format::meta::PatchReport, verbose: bool) {
    let more = if verbose || r.refused.is_empty() { "" } else { " (--verbose names them)" };
    let no_entry = r.refused.iter().filter(|f| f.not_an_entry()).count();
    let split = if no_entry == 0 {
        String::new()
    } else {
        format!(": {} refused, {no_entry} not entries (.cold fragments, C start-up code)", r.refused.len() - no_entry)
    };
    let _ = writeln!(o, "  patched:   {} functions, {} not patched{split}{more}", r.patched, r.refused.len());
    let mut left = 0;
    for ob in &r.objects {
        let how = if ob.dlopened { " (dlopen)" } else { "" };
        match &ob.skipped {
            Some(why) if verbose => {
                let _ = writeln!(o, "    {}{how}: not patched: {}", line(&ob.path), line(why));
            }
            Some(_) => left += 1,
            None => {
                let _ = writeln!(o, "    {}{how}: {} patched, {} not patched", line(&ob.path), ob.patched, ob.refused);
            }
        }
        if verbose {
            for f in r.refused.iter().filter(|f| f.object.as_deref() == Some(ob.path.as_str())) {
                let _ = writeln!(o, "      not patched: {}: {}", line(&f.function), line(&f.reason));
            }
        }
    }
    if left > 0 {
        let _ = writeln!(o, "    {left} system or instrumented libraries left alone (--verbose names them)");
    }
    if verbose {
        // Traces written before objects were reported.
        for f in r.refused.iter().filter(|f| f.object.as_ref().is_none_or(|ob| !r.objects.iter().any(|x| &x.path == ob))) {
            let _ = writeln!(o, "    not patched: {}: {}", line(&f.function), line(&f.reason));
        }
    }
}

fn secs(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

/// The human-readable report of `trace info` (`verbose`: name the functions that could not be
/// patched). Every text from the trace is shown on one line with control characters escaped
/// ([`trace_format::escape::line`]).
pub fn render(trace: &TraceDir, s: &Summary, verbose: bool) -> String {
    let m = &trace.meta;
    let mut o = String::new();
    let _ = writeln!(o, "trace:      {}", line(&trace.root.display().to_string()));
    let _ = writeln!(o, "command:    {}", trace_format::escape::command(&m.argv));
    let _ = writeln!(o, "cwd:        {}", line(&m.cwd));
    let _ = writeln!(o, "target:     {}", line(&m.target_kind));
    let exit = match m.exit {
        Some(e) => match (e.code, e.signal) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(sig)) => format!("killed by {}{}", crate::run::signal_name(sig), if e.core_dumped { ", core dumped" } else { "" }),
            _ => "unknown".into(),
        },
        None => "unknown (the run did not finish: `trace` itself was stopped)".into(),
    };
    let _ = writeln!(o, "exit:       {exit}");
    if let Some(st) = m.stopped {
        let how = if st.killed { ", its process group killed (SIGKILL) after the grace period" } else { "" };
        let _ = writeln!(o, "stopped:    by {} to `trace`, forwarded{how}: the trace is partial", crate::run::signal_name(st.signal));
    }
    let _ = writeln!(o, "duration:   {}", m.duration_ns.map(secs).unwrap_or_else(|| "unknown".into()));
    let _ = writeln!(o, "options:    {}", line(&m.options.to_string()));
    let _ = writeln!(o, "processes:  {}", s.processes);
    let _ = writeln!(o, "threads:    {}", s.threads);
    let _ = writeln!(o, "events:     {}", s.events);
    let _ = writeln!(o, "functions:  {}", s.functions);
    for p in &s.procs {
        let _ = writeln!(o);
        let forked = p.forked_from.map(|f| format!(", forked from {f}")).unwrap_or_default();
        let hook = p.hook.as_ref().map(|h| format!(", {} hook", line(h))).unwrap_or_default();
        let _ = writeln!(o, "{}: pid {} (parent {}{forked}), {} {}{hook}", line(&p.dir), p.pid, p.ppid, line(&p.kind), line(&p.runtime));
        let _ = writeln!(o, "  argv:      {}", trace_format::escape::command(&p.argv));
        let _ = writeln!(o, "  functions: {}, events: {}", p.functions, p.events);
        if let Some(r) = &p.patch {
            render_patch(&mut o, r, verbose);
        }
        let main_closed = p.threads.iter().any(|t| t.tid == p.pid as u64 && !t.unclosed);
        for t in &p.threads {
            // An unnamed thread: the main thread is `main` (as `slice` calls it), another `-`.
            let name = match &t.name {
                Some(n) => line(n),
                None if t.tid == p.pid as u64 => "main".into(),
                None => "-".into(),
            };
            let state = match (&t.error, t.unclosed) {
                (Some(e), _) => format!(" [damaged: {}]", line(e)),
                (None, true) => format!(" [not closed: {}]", unclosed_reason(t.tid == p.pid as u64, main_closed)),
                _ => String::new(),
            };
            let _ =
                writeln!(o, "  thread {} {:<16} {:>10} events {:>9} calls  {}{state}", t.tid, name, t.events, t.calls, secs(t.duration_ns));
        }
    }
    o
}

/// Why a thread's stream was not closed. The main thread's stream is closed at `exit`; a
/// thread still running then (a worker pool that is never joined: rayon's, a detached
/// thread) is not, and its events up to then are all there. Only when the main thread's
/// stream is not closed either was the process killed or did it end abruptly (`_exit`, exec).
fn unclosed_reason(is_main: bool, main_closed: bool) -> &'static str {
    if !is_main && main_closed {
        "still running when the process exited; its events up to then are kept"
    } else {
        "the process was killed or exited abruptly"
    }
}

#[cfg(test)]
mod tests {
    use super::unclosed_reason;

    #[test]
    fn cold_fragments_and_start_up_code_are_counted_apart() {
        use trace_format::meta::{PatchRefusal, PatchReport};
        let refusal = |f: &str, r: &str| PatchRefusal { function: f.into(), reason: r.into(), object: None };
        let r = PatchReport {
            patched: 40,
            refused: vec![
                refusal("f", "shorter than 5 bytes"),
                refusal("g.cold", "a .cold fragment, not an entry"),
                refusal("_start", "C runtime start-up"),
            ],
            objects: vec![],
        };
        let mut o = String::new();
        super::render_patch(&mut o, &r, false);
        assert_eq!(
            o.lines().next(),
            Some("  patched:   40 functions, 3 not patched: 1 refused, 2 not entries (.cold fragments, C start-up code) (--verbose names them)")
        );
        let r = PatchReport { refused: vec![refusal("f", "shorter than 5 bytes")], ..r };
        let mut o = String::new();
        super::render_patch(&mut o, &r, false);
        assert_eq!(o.lines().next(), Some("  patched:   40 functions, 1 not patched (--verbose names them)"));
    }

    #[test]
    fn a_worker_still_running_at_exit_is_not_called_killed() {
        // tokei's rayon workers: the process exited normally (its main stream is closed).
        assert!(unclosed_reason(false, true).starts_with("still running when the process exited"));
        // Killed: the main thread's stream is not closed either, whatever the thread.
        assert_eq!(unclosed_reason(false, false), "the process was killed or exited abruptly");
        assert_eq!(unclosed_reason(true, false), "the process was killed or exited abruptly");
    }
}
