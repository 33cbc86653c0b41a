//! Timeline export for the viewers profiler users already know: the Chrome Trace Event Format
//! (Perfetto UI, `chrome://tracing`) and speedscope's own file format.
//!
//! What the timeline shows: the analyzer keeps, per node of the folded call tree, the call count
//! and the inclusive time of all the calls merged into it, not each call's timestamps. So each
//! thread's timeline is the folded tree laid out in call order: one bar per tree node, as wide as
//! its inclusive time (the sum over its merged calls), its callees side by side inside it in the
//! order they were first called, and its self time spread as equal gaps between them. Every
//! thread's timeline starts at 0. The bars are not the real start times of individual calls.
//! A node whose callees add up to more than its own time (clock granularity) is widened to hold
//! them, so bars always nest.

use super::{location, FrameNames};
use crate::calltree::{CallTree, NodeId, NO_FUNC, ROOT};
use crate::symbols::{FuncId, Function};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;

/// The output format of `slice export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Chrome Trace Event Format JSON (complete "X" events, thread and process names), which
    /// Perfetto UI (ui.perfetto.dev) and chrome://tracing open.
    Chrome,
    /// speedscope's file format (www.speedscope.app): one "evented" profile per thread over
    /// shared frames with file and line.
    Speedscope,
    /// Per-test coverage rows of a test run as Parquet (test, outcome, function, file, lines,
    /// calls, origin, counted by the spectrum), for DuckDB, Spark or pandas; not a timeline
    /// ([`super::test_rows`]; the selection options do not apply).
    Parquet,
}

/// One thread's timeline to export.
#[derive(Debug)]
pub struct Lane<'a> {
    pub pid: u32,
    pub tid: u64,
    /// The process's command line.
    pub process: String,
    /// The thread's name (`MainThread`, `main`, `tid 123`).
    pub thread: String,
    pub tree: &'a CallTree,
}

/// A laid-out node: where its bar starts and how long it is, in nanoseconds from the start of
/// its thread's timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bar {
    pub node: NodeId,
    pub start: u64,
    pub dur: u64,
}

/// Lay out a tree: the bars in preorder (a caller before its callees, callees in call order).
pub fn layout(tree: &CallTree) -> Vec<Bar> {
    let order = tree.preorder();
    // Widths bottom-up: a node is at least as wide as its callees together.
    let mut dur = vec![0u64; tree.nodes.len()];
    for &n in order.iter().rev() {
        let node = tree.node(n);
        let kids: u64 = node.children.iter().map(|&c| dur[c as usize]).fold(0, u64::saturating_add);
        dur[n as usize] = node.time_ns.max(kids);
    }
    let mut start = vec![0u64; tree.nodes.len()];
    let place = |parent_start: u64, parent_dur: u64, children: &[NodeId], start: &mut [u64]| {
        let kids: u64 = children.iter().map(|&c| dur[c as usize]).fold(0, u64::saturating_add);
        let gap = parent_dur.saturating_sub(kids) / (children.len() as u64 + 1);
        let mut at = parent_start;
        for &c in children {
            at = at.saturating_add(gap);
            start[c as usize] = at;
            at = at.saturating_add(dur[c as usize]);
        }
    };
    // Top-level calls one after another, no gaps (the root has no time of its own).
    let mut at = 0u64;
    for &c in &tree.node(ROOT).children {
        start[c as usize] = at;
        at = at.saturating_add(dur[c as usize]);
    }
    for &n in &order {
        place(start[n as usize], dur[n as usize], &tree.node(n).children, &mut start);
    }
    order.into_iter().map(|n| Bar { node: n, start: start[n as usize], dur: dur[n as usize] }).collect()
}

fn func(tree: &CallTree, n: NodeId) -> Function {
    let id = tree.node(n).func;
    match tree.function(id) {
        Some(f) if id != NO_FUNC => f.clone(),
        _ => Function::unknown(id),
    }
}

fn micros(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Write the Chrome Trace Event Format (JSON object form): process and thread name metadata
/// events, then one complete event per tree node (`ts`/`dur` in microseconds). The events are
/// written one by one as they are made (a document of JSON values held whole costs kilobytes a
/// node); the keys come in the order a whole `serde_json` document would have (sorted).
pub fn write_chrome(w: &mut dyn Write, lanes: &[Lane], names: &FrameNames, cwd: &Path, argv: &str) -> io::Result<usize> {
    let mut w = io::BufWriter::new(w);
    let other = json!({
        "command": argv,
        "exporter": concat!("slice ", env!("CARGO_PKG_VERSION")),
        "timeline": "folded call tree laid out in call order: bar widths are inclusive times of merged calls, not real call timestamps",
    });
    w.write_all(b"{\"displayTimeUnit\":\"ms\",\"otherData\":")?;
    trace_format::escape::json_write(&mut w, &other)?;
    w.write_all(b",\"traceEvents\":[")?;
    let mut first = true;
    let mut event = |w: &mut io::BufWriter<&mut dyn Write>, e: &Value| -> io::Result<()> {
        if !std::mem::take(&mut first) {
            w.write_all(b",")?;
        }
        trace_format::escape::json_write(&mut *w, e)?;
        Ok(())
    };
    let mut seen_pids = Vec::new();
    for lane in lanes {
        if !seen_pids.contains(&lane.pid) {
            seen_pids.push(lane.pid);
            event(&mut w, &json!({"name": "process_name", "ph": "M", "pid": lane.pid, "tid": lane.tid, "args": {"name": lane.process}}))?;
        }
        event(&mut w, &json!({"name": "thread_name", "ph": "M", "pid": lane.pid, "tid": lane.tid, "args": {"name": lane.thread}}))?;
    }
    let mut n_bars = 0;
    for lane in lanes {
        for bar in layout(lane.tree) {
            let f = func(lane.tree, bar.node);
            let node = lane.tree.node(bar.node);
            let mut args = json!({"calls": node.count, "inclusive_ns": node.time_ns, "location": location(&f, cwd)});
            if node.resumes > 0 {
                args["resumes"] = json!(node.resumes);
            }
            if node.recursive {
                args["recursive"] = json!(true);
            }
            event(
                &mut w,
                &json!({
                    "name": names.name(lane.tree, bar.node),
                    "cat": format!("{:?}", f.language).to_lowercase(),
                    "ph": "X",
                    "ts": micros(bar.start),
                    "dur": micros(bar.dur),
                    "pid": lane.pid,
                    "tid": lane.tid,
                    "args": args,
                }),
            )?;
            n_bars += 1;
        }
    }
    w.write_all(b"]}\n")?;
    w.flush()?;
    Ok(n_bars)
}

/// Write speedscope's file format: shared frames (name, file, line) and one evented profile per
/// thread, its open/close events in time order, in nanoseconds. Written as it is made, like
/// [`write_chrome`] (a whole `serde_json` document costs hundreds of bytes an event: 6.5 GB for
/// bench/wide_tree's 2 M nodes), its keys in the order a whole document would have (sorted: the
/// profiles come before the shared frames, so the frames are collected on the way).
pub fn write_speedscope(w: &mut dyn Write, lanes: &[Lane], names: &FrameNames, argv: &str) -> io::Result<usize> {
    let mut w = io::BufWriter::new(w);
    w.write_all(b"{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"activeProfileIndex\":0,\"exporter\":")?;
    trace_format::escape::json_write(&mut w, concat!("slice ", env!("CARGO_PKG_VERSION")))?;
    w.write_all(b",\"name\":")?;
    trace_format::escape::json_write(&mut w, argv)?;
    w.write_all(b",\"profiles\":[")?;
    let mut frames: Vec<Value> = Vec::new();
    let mut frame_index: HashMap<FuncId, usize> = HashMap::new();
    let mut n_bars = 0;
    for (i, lane) in lanes.iter().enumerate() {
        let tree = lane.tree;
        // Each laid-out node's bar by node id (every node but the root is laid out).
        let mut bar_of: Vec<Option<(u64, u64)>> = vec![None; tree.nodes.len()];
        let mut end = 0u64;
        for b in layout(tree) {
            bar_of[b.node as usize] = Some((b.start, b.dur));
            if tree.node(b.node).parent == ROOT {
                end = end.max(b.start.saturating_add(b.dur));
            }
        }
        if i > 0 {
            w.write_all(b",")?;
        }
        write!(w, "{{\"endValue\":{end},\"events\":[")?;
        let mut first = true;
        // Depth-first: open a node, its callees in order, close it.
        let mut stack: Vec<(NodeId, bool)> = tree.node(ROOT).children.iter().rev().map(|&c| (c, false)).collect();
        while let Some((n, closing)) = stack.pop() {
            let Some((start, dur)) = bar_of.get(n as usize).copied().flatten() else { continue };
            let idx = *frame_index.entry(tree.func_id(n)).or_insert_with(|| {
                let f = func(tree, n);
                let mut fr = json!({"name": names.name(tree, n)});
                if let Some(file) = &f.file {
                    fr["file"] = json!(file.display().to_string());
                } else if let Some(o) = &f.object {
                    fr["file"] = json!(o);
                }
                if let Some(l) = f.first_line {
                    fr["line"] = json!(l);
                }
                frames.push(fr);
                frames.len() - 1
            });
            if !std::mem::take(&mut first) {
                w.write_all(b",")?;
            }
            if closing {
                write!(w, "{{\"at\":{},\"frame\":{idx},\"type\":\"C\"}}", start.saturating_add(dur))?;
            } else {
                write!(w, "{{\"at\":{start},\"frame\":{idx},\"type\":\"O\"}}")?;
                n_bars += 1;
                stack.push((n, true));
                stack.extend(tree.node(n).children.iter().rev().map(|&c| (c, false)));
            }
        }
        w.write_all(b"],\"name\":")?;
        trace_format::escape::json_write(&mut w, &format!("{} [pid {}] {}", lane.thread, lane.pid, lane.process))?;
        w.write_all(b",\"startValue\":0,\"type\":\"evented\",\"unit\":\"nanoseconds\"}")?;
    }
    w.write_all(b"],\"shared\":{\"frames\":")?;
    trace_format::escape::json_write(&mut w, &frames)?;
    w.write_all(b"}}\n")?;
    w.flush()?;
    Ok(n_bars)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Ev::C, Ev::R};
    use crate::views::tests::tree_of;

    #[test]
    fn bars_nest_in_call_order_with_self_time_as_gaps() {
        let t = tree_of(&["main", "a", "b"], &["/p/m.py"; 3], &[C(0), C(1), R, C(2), R, C(1), R, R]);
        let bars = layout(&t);
        let order = t.preorder();
        assert_eq!(bars.iter().map(|b| b.node).collect::<Vec<_>>(), order);
        let (main, a, b) = (bars[0], bars[1], bars[2]);
        assert_eq!(main.start, 0);
        assert_eq!(main.dur, t.node(main.node).time_ns.max(a.dur + b.dur));
        // a (first called) before b, both inside main, widths their inclusive times.
        assert!(main.start <= a.start && a.start + a.dur <= b.start && b.start + b.dur <= main.start + main.dur);
        assert_eq!(a.dur, t.node(a.node).time_ns);
        assert_eq!(b.dur, t.node(b.node).time_ns);
    }

    #[test]
    fn speedscope_events_open_and_close_in_order() {
        let t = tree_of(&["main", "a"], &["/p/m.py"; 2], &[C(0), C(1), R, R]);
        let names = FrameNames::new([&t], Path::new("/p"));
        let lane = Lane { pid: 1, tid: 1, process: "python3 m.py".into(), thread: "MainThread".into(), tree: &t };
        let mut out = Vec::new();
        assert_eq!(write_speedscope(&mut out, &[lane], &names, "python3 m.py").unwrap(), 2);
        let v: Value = serde_json::from_slice(&out).unwrap();
        let evs = v["profiles"][0]["events"].as_array().unwrap();
        let kinds: Vec<(&str, u64)> = evs.iter().map(|e| (e["type"].as_str().unwrap(), e["frame"].as_u64().unwrap())).collect();
        assert_eq!(kinds, vec![("O", 0), ("O", 1), ("C", 1), ("C", 0)]);
        let ats: Vec<u64> = evs.iter().map(|e| e["at"].as_u64().unwrap()).collect();
        assert!(ats.windows(2).all(|w| w[0] <= w[1]), "{ats:?}");
        assert_eq!(v["shared"]["frames"][1]["name"], "a");
        assert_eq!(v["shared"]["frames"][1]["file"], "/p/m.py");
    }
}
