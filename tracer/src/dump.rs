//! `trace dump`: every event as one JSON line, for inspection and debugging.

use anyhow::Result;
use serde::Serialize;
use std::io::Write;
use trace_format::{Event, FuncKind, TraceDir};

pub struct DumpOptions {
    pub pid: Option<u32>,
    pub tid: Option<u64>,
    pub limit: Option<u64>,
    pub funcs: bool,
}

/// One line of the dump (field order as written).
#[derive(Serialize)]
struct Line {
    pid: u32,
    tid: u64,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    func: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    depth: Option<u64>,
}

/// Short name and file of a function record, for the dump.
fn describe(kind: &FuncKind) -> (String, Option<String>) {
    match kind {
        FuncKind::Python { file, qualname, first_line, .. } => (qualname.clone(), Some(format!("{file}:{first_line}"))),
        FuncKind::Builtin { module, qualname } => (qualname.clone(), module.clone()),
        FuncKind::Native { symbol, addr, module, .. } => (symbol.clone().unwrap_or_else(|| format!("{addr:#x}")), Some(module.clone())),
    }
}

/// Write the dump to `out`. Returns the messages of damaged streams (their events before
/// the damage were written).
pub fn dump(trace: &TraceDir, opts: &DumpOptions, out: &mut impl Write) -> Result<Vec<String>> {
    let mut damaged = Vec::new();
    let mut written = 0u64;
    for p in &trace.processes {
        if opts.pid.is_some_and(|pid| pid != p.meta.pid) {
            continue;
        }
        if opts.funcs {
            for f in p.funcs.iter() {
                let mut v = serde_json::to_value(f)?;
                v["pid"] = serde_json::json!(p.meta.pid);
                writeln!(out, "{}", trace_format::escape::json_line(&v)?)?;
            }
            continue;
        }
        for t in &p.threads {
            if opts.tid.is_some_and(|tid| tid != t.header.tid) {
                continue;
            }
            let mut depth: u64 = 0;
            let base = |kind| Line { pid: p.meta.pid, tid: t.header.tid, kind, func: None, name: None, at: None, ts: None, depth: None };
            for ev in t.events()? {
                if opts.limit.is_some_and(|l| written >= l) {
                    return Ok(damaged);
                }
                let line = match ev {
                    Ok(ev @ (Event::Call { func, ts } | Event::Resume { func, ts })) => {
                        let (name, loc) = p.func(func).map(|f| describe(&f.kind)).unwrap_or_else(|| ("?".into(), None));
                        depth += 1;
                        let kind = if matches!(ev, Event::Resume { .. }) { "resume" } else { "call" };
                        Line { func: Some(func), name: Some(name), at: loc, ts: Some(ts), depth: Some(depth), ..base(kind) }
                    }
                    Ok(Event::Return { ts }) => {
                        let v = Line { ts: Some(ts), depth: Some(depth), ..base("return") };
                        depth = depth.saturating_sub(1);
                        v
                    }
                    Ok(Event::ThreadName(name)) => Line { name: Some(name), ..base("thread_name") },
                    Ok(Event::Line { func, line }) => {
                        let rec = p.func(func);
                        let name = rec.map(|f| describe(&f.kind).0).unwrap_or_else(|| "?".into());
                        let at = match rec.map(|f| &f.kind) {
                            Some(FuncKind::Python { file, .. }) => format!("{file}:{line}"),
                            _ => format!("line {line}"),
                        };
                        Line { func: Some(func), name: Some(name), at: Some(at), ..base("line") }
                    }
                    Err(e) => {
                        damaged.push(e.to_string());
                        break;
                    }
                };
                writeln!(out, "{}", trace_format::escape::json_line(&line)?)?;
                written += 1;
            }
        }
    }
    Ok(damaged)
}
