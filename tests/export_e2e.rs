//! End-to-end tests of `slice export` (Chrome Trace Event Format and speedscope) on a real
//! recording of `examples/python/shop_app.py` (threads and a subprocess).

use serde_json::Value;
use slice_trace_e2e::{cmd, python, root, run_ok, scratch};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn shop() -> &'static (tempfile::TempDir, PathBuf) {
    static SHOP: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    SHOP.get_or_init(|| {
        let dir = scratch();
        let d = dir.path().join("shop.d");
        let app = root().join("examples/python/shop_app.py");
        run_ok(cmd("trace").current_dir(dir.path()).arg("run").arg("-o").arg(&d).arg("--").arg(python()).arg(&app));
        (dir, d)
    })
}

fn export(trace: &Path, format: &str) -> Value {
    let out = trace.with_extension(format!("{format}.json"));
    run_ok(cmd("slice").arg("export").arg(trace).args(["--format", format, "-o"]).arg(&out));
    let text = std::fs::read_to_string(&out).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{format} export is not JSON: {e}\n{text}"))
}

#[test]
fn chrome_export_has_named_threads_and_nested_complete_events() {
    let (_dir, trace) = shop();
    let v = export(trace, "chrome");
    let events = v["traceEvents"].as_array().expect("traceEvents array");
    let thread_names: Vec<&str> =
        events.iter().filter(|e| e["ph"] == "M" && e["name"] == "thread_name").map(|e| e["args"]["name"].as_str().unwrap()).collect();
    for t in ["MainThread", "stats-stationery", "stats-kitchen", "stats-bundle"] {
        assert!(thread_names.contains(&t), "no thread_name {t} in {thread_names:?}");
    }
    let procs: Vec<&str> =
        events.iter().filter(|e| e["ph"] == "M" && e["name"] == "process_name").map(|e| e["args"]["name"].as_str().unwrap()).collect();
    assert!(procs.iter().any(|p| p.ends_with("checksum.py")) && procs.iter().any(|p| p.ends_with("shop_app.py")), "{procs:?}");

    let xs: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    for e in &xs {
        assert!(e["ts"].as_f64().unwrap() >= 0.0 && e["dur"].as_f64().unwrap() >= 0.0, "{e}");
        assert!(e["pid"].is_u64() && e["tid"].is_u64() && e["args"]["calls"].as_u64().unwrap() >= 1, "{e}");
    }
    let find = |name: &str| -> &Value {
        xs.iter()
            .copied()
            .find(|e| e["name"].as_str().unwrap().split(' ').next() == Some(name))
            .unwrap_or_else(|| panic!("no event {name}"))
    };
    let span = |e: &Value| (e["ts"].as_f64().unwrap(), e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap());
    let inside = |inner: &Value, outer: &Value| {
        let ((a, b), (c, d)) = (span(inner), span(outer));
        inner["tid"] == outer["tid"] && c <= a + 1e-6 && b <= d + 1e-6
    };
    let (main, load, parse_row) = (find("main"), find("load_catalogue"), find("parse_row"));
    assert!(inside(load, main) && inside(parse_row, load), "main {main}\nload_catalogue {load}\nparse_row {parse_row}");
    assert!(span(main).1 - span(main).0 > 0.0, "main has a duration: {main}");
    // parse_row is called once per catalogue row: merged into one bar with its count.
    assert!(parse_row["args"]["calls"].as_u64().unwrap() > 1, "{parse_row}");
    assert!(parse_row["args"]["location"].as_str().unwrap().contains("shop/models.py:"), "{parse_row}");

    // On each thread, two bars either nest or do not overlap (a well-formed flame chart).
    let mut per_tid: HashMap<(u64, u64), Vec<(f64, f64)>> = HashMap::new();
    for e in &xs {
        per_tid.entry((e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap())).or_default().push(span(e));
    }
    for spans in per_tid.values() {
        for (i, &(a, b)) in spans.iter().enumerate() {
            for &(c, d) in &spans[i + 1..] {
                let nested = (a <= c + 1e-6 && d <= b + 1e-6) || (c <= a + 1e-6 && b <= d + 1e-6);
                let apart = b <= c + 1e-6 || d <= a + 1e-6;
                assert!(nested || apart, "bars ({a}, {b}) and ({c}, {d}) overlap");
            }
        }
    }
}

#[test]
fn speedscope_export_has_shared_frames_and_balanced_evented_profiles() {
    let (_dir, trace) = shop();
    let v = export(trace, "speedscope");
    assert_eq!(v["$schema"], "https://www.speedscope.app/file-format-schema.json");
    let frames = v["shared"]["frames"].as_array().expect("shared.frames");
    let idx = |name: &str| frames.iter().position(|f| f["name"].as_str().unwrap().split(' ').next() == Some(name));
    let main = idx("main").expect("frame main");
    assert!(frames[main]["file"].as_str().unwrap().ends_with("examples/python/shop_app.py"), "{}", frames[main]);
    assert!(frames[main]["line"].as_u64().unwrap() > 1, "{}", frames[main]);
    let parse_row = idx("parse_row").expect("frame parse_row");
    let profiles = v["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 5, "4 threads of shop_app.py and the checksum subprocess");
    let mut saw_nested = false;
    for p in profiles {
        assert_eq!(p["type"], "evented");
        assert_eq!(p["unit"], "nanoseconds");
        let end = p["endValue"].as_u64().unwrap();
        let mut stack: Vec<u64> = Vec::new();
        let mut last = 0;
        for e in p["events"].as_array().unwrap() {
            let (frame, at) = (e["frame"].as_u64().unwrap(), e["at"].as_u64().unwrap());
            assert!((frame as usize) < frames.len() && at >= last && at <= end, "{e} after {last}, end {end}");
            last = at;
            match e["type"].as_str().unwrap() {
                "O" => {
                    if frame == parse_row as u64 {
                        saw_nested |= stack.contains(&(main as u64));
                    }
                    stack.push(frame)
                }
                "C" => assert_eq!(stack.pop(), Some(frame), "close without a matching open: {e}"),
                t => panic!("event type {t}"),
            }
        }
        assert!(stack.is_empty(), "unclosed frames {stack:?} in {}", p["name"]);
    }
    assert!(saw_nested, "parse_row opens while main is open");
}
