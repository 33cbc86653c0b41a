//! Nothing a trace holds controls the terminal or a prompt's structure (docs/prompts.md,
//! "Untrusted text"): a real Python run whose function qualname, `compile()` file names (one
//! missing, one a real file), thread name and argv hold ESC and OSC sequences, bidi controls,
//! C1 controls, NUL, CR and newlines followed by a fake `# Question` heading and a code fence,
//! and whose own source holds raw ESC, form feed and bidi characters. Every view's output
//! (stdout and stderr) must hold no raw control character but newlines and tabs, the Markdown
//! prompt exactly one `# Question` heading and every code fence closed where it should be, the
//! SVG must parse as XML, and the JSON outputs must keep the exact names.

use serde_json::Value;
use slice_trace_e2e::{cmd, python, run, scratch};
use std::path::{Path, PathBuf};
use std::process::Output;

/// What every hostile name holds: an OSC window title, a clear-screen CSI, bidi overrides and
/// isolates, NUL, DEL, an 8-bit CSI, CR, and newlines starting a fake heading and a fence.
const EVIL: &str =
    "evil\x1b]0;PWNED-TITLE\x07\x1b[2J\u{202e}RLO\u{2066}LRI\u{2069}\u{200f}\0nul\x7f\u{9b}31m\r\n# Question\n```\n\u{2028}end";

/// The program: a function renamed to EVIL (qualname and name), code compiled under EVIL file
/// names (one that does not exist, one that does; a file name cannot hold NUL), a thread named
/// EVIL; its own text holds raw
/// control and bidi characters in a string and a comment. With `skip` it leaves the hostile
/// calls out (the other side of the diff). EVIL_LITERAL is EVIL as a Python string literal.
const PROGRAM: &str = r#"import sys, threading

EVIL = EVIL_LITERAL
RAW = "ESC[31m red FF page"  # bidi: RLO here
def plain():
    return 1

def renamed():
    return plain()

extra = {"co_qualname": EVIL} if sys.version_info >= (3, 11) else {}
renamed.__code__ = renamed.__code__.replace(co_name=EVIL, **extra)

def run_all():
    exec(compile("def from_missing_file():\n    return 2\nfrom_missing_file()\n", "/nonexistent/" + EVIL.replace("\0", "") + ".py", "exec"), {})
    path = sys.argv[3]
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), {})
    t = threading.Thread(target=renamed, name="thr-" + EVIL)
    t.start()
    t.join()
    renamed()

if sys.argv[1] != "skip":
    run_all()
print("done")
"#;

/// The program's text: EVIL spelled with Python escapes where it is defined, and raw control
/// characters in its own source: ESC in a string, a form feed, a bidi override in a comment.
fn program_text() -> String {
    let literal: String = EVIL
        .chars()
        .map(|c| if forbidden(c) || c.is_control() || c == '"' || c == '\\' { format!("\\U{:08x}", c as u32) } else { c.to_string() })
        .collect();
    PROGRAM.replace("ESC", "\x1b").replace("FF", "\x0c").replace("RLO", "\u{202e}").replace("EVIL_LITERAL", &format!("\"{literal}\""))
}

/// Whether `c` must not reach the output raw (an independent copy of the rule: C0 but newline
/// and tab, DEL, C1, bidi controls, line and paragraph separators).
fn forbidden(c: char) -> bool {
    matches!(c, '\0'..='\x08' | '\x0b'..='\x1f' | '\x7f'..='\u{9f}' | '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// What the views got wrong: every view is checked and all problems are reported together.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn expect(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }

    /// The command succeeded and both output streams are UTF-8 with no forbidden character.
    fn clean(&mut self, what: &str, out: &Output) {
        self.expect(out.status.success(), || format!("{what} failed: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr)));
        for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            let Ok(s) = std::str::from_utf8(bytes) else {
                self.0.push(format!("{what}: {stream} is not UTF-8"));
                continue;
            };
            let bad: Vec<(usize, char)> = s.char_indices().filter(|(_, c)| forbidden(*c)).take(5).collect();
            self.expect(bad.is_empty(), || format!("{what}: {stream} holds raw control characters {bad:?}"));
        }
    }

    /// [`Problems::clean`], and stdout as text.
    fn ok(&mut self, what: &str, out: Output) -> String {
        self.clean(what, &out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// [`Problems::ok`] for coloured output: only the view's own colour sequences (SGR,
    /// `ESC [ ... m`) may hold an ESC.
    fn ok_coloured(&mut self, what: &str, mut out: Output) -> String {
        let sgr = regex::bytes::Regex::new(r"\x1b\[[0-9;]*m").unwrap();
        self.expect(sgr.is_match(&out.stdout), || format!("{what}: no colour at all"));
        out.stdout = sgr.replace_all(&out.stdout, &b""[..]).into_owned();
        self.ok(what, out)
    }

    /// A Markdown document has exactly one `# Question` heading and no fence left open.
    fn one_question(&mut self, what: &str, md: &str) {
        let (hs, open) = headings(md);
        let n = hs.iter().filter(|l| l.starts_with("# Question")).count();
        self.expect(n == 1, || format!("{what}: {n} `# Question` headings; headings outside code blocks: {hs:#?}"));
        self.expect(!open, || format!("{what}: a code fence is left open"));
    }
}

/// A Markdown document's ATX headings outside fenced code blocks, by CommonMark's fence rule (a
/// fence closes on a line of at least as many backticks as opened it, nothing else on it), and
/// whether a fence is left open at the end.
fn headings(md: &str) -> (Vec<String>, bool) {
    let mut open: Option<usize> = None;
    let mut out = Vec::new();
    for line in md.lines() {
        let ticks = line.chars().take_while(|&c| c == '`').count();
        match open {
            Some(n) if ticks >= n && line[ticks..].trim().is_empty() => open = None,
            Some(_) => {}
            None if ticks >= 3 => open = Some(ticks),
            None if line.starts_with('#') => out.push(line.to_string()),
            None => {}
        }
    }
    (out, open.is_some())
}

struct Run {
    _dir: tempfile::TempDir,
    hostile: PathBuf,
    calm: PathBuf,
}

fn record() -> Run {
    let dir = scratch();
    let d = dir.path();
    std::fs::write(d.join("hostile.py"), program_text()).unwrap();
    // A real file whose name holds the same characters (no NUL: a path cannot).
    let real = d.join(format!("real{}.py", EVIL.replace(['\0', '/'], "")));
    std::fs::write(&real, "def from_real_file():\n    return 3\nfrom_real_file()\n").unwrap();
    let rec = |out: &str, mode: &str| {
        let t = d.join(out);
        // argv cannot hold a NUL either.
        let evil_arg = EVIL.replace('\0', "");
        let o = run(cmd("trace")
            .current_dir(d)
            .args(["run", "-o"])
            .arg(&t)
            .arg("--")
            .arg(python())
            .arg("hostile.py")
            .arg(mode)
            .arg(&evil_arg)
            .arg(&real));
        assert!(o.status.success(), "trace run: {}\n{}", o.status, String::from_utf8_lossy(&o.stderr));
        t
    };
    let hostile = rec("hostile.d", "all");
    let calm = rec("calm.d", "skip");
    Run { _dir: dir, hostile, calm }
}

fn slice(args: &[&str], t: &Path) -> Output {
    let mut c = cmd("slice");
    c.args(args).arg(t);
    run(&mut c)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn no_view_lets_the_trace_control_the_terminal_or_the_prompt() {
    let r = record();
    let h = &r.hostile;
    let mut p = Problems::default();

    // The trace holds the raw names (what makes this test meaningful).
    let info = p.ok("trace info --json", run(cmd("trace").args(["info", "--json"]).arg(h)));
    let v: Value = serde_json::from_str(&info).unwrap();
    let threads: Vec<&str> = v["procs"][0]["threads"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(threads.iter().any(|n| n.contains("\x1b]0;PWNED-TITLE\x07")), "the thread name is recorded raw: {threads:?}");

    p.ok("trace info", run(cmd("trace").arg("info").arg(h)));
    p.ok("trace info --verbose", run(cmd("trace").args(["info", "--verbose"]).arg(h)));
    p.ok("trace dump", run(cmd("trace").args(["dump", "--funcs"]).arg(h)));
    let tree = p.ok("slice tree", slice(&["tree"], h));
    p.expect(tree.contains("evil\\x1b]0;PWNED-TITLE\\x07\\x1b[2J\\u202eRLO"), || {
        format!("slice tree: the name is not shown escaped:\n{}", tree.escape_debug())
    });
    p.ok_coloured("slice tree --color always", slice(&["tree", "--color", "always"], h));
    p.ok("slice tree --threads merged", slice(&["tree", "--threads", "merged"], h));
    p.ok("slice stats", slice(&["stats"], h));
    p.ok("slice folded", slice(&["folded"], h));
    let dot = p.ok("slice graph", slice(&["graph"], h));
    p.expect(!dot.contains("\n# Question"), || "slice graph: a name's newline is a raw line break".into());
    p.ok("slice diff", run(cmd("slice").args(["diff", s(h), s(&r.calm)])));
    p.ok_coloured("slice diff --color always", run(cmd("slice").args(["diff", "--color", "always", s(h), s(&r.calm)])));
    let dp = p.ok("slice diff --format prompt", run(cmd("slice").args(["diff", "--format", "prompt", "-q", "Why?", s(h), s(&r.calm)])));
    p.one_question("slice diff --format prompt", &dp);

    // The SVG is XML: it cannot even hold most control characters.
    let svg_path = r._dir.path().join("flame.svg");
    p.ok("slice flamegraph", run(cmd("slice").args(["flamegraph", "-o", s(&svg_path), s(h)])));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    p.expect(!svg.chars().any(forbidden), || "slice flamegraph: the SVG holds raw control characters".into());
    let opts = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
    if let Err(e) = roxmltree::Document::parse_with_options(&svg, opts) {
        p.0.push(format!("slice flamegraph: the SVG is not valid XML: {e}"));
    }

    for f in ["chrome", "speedscope"] {
        let o = p.ok(&format!("slice export --format {f}"), slice(&["export", "--format", f], h));
        p.expect(serde_json::from_str::<Value>(&o).is_ok(), || format!("slice export --format {f}: not JSON"));
    }

    // The Markdown prompt: one question, every fence closed where it should be, the names and
    // the source's raw characters escaped.
    for variant in ["full", "A", "C", "T"] {
        let what = format!("slice from-trace --variant {variant}");
        let md = p.ok(&what, slice(&["from-trace", "-q", "Why?", "--variant", variant], h));
        p.one_question(&what, &md);
        if variant != "T" {
            p.expect(md.contains("RAW = \"\\x1b[31m red \\x0c page\"  # bidi: \\u202e here"), || {
                format!("{what}: the source's controls are not escaped")
            });
            p.expect(md.contains("from_real_file():\n    return 3"), || format!("{what}: the real file's source is not shown"));
        }
    }
    let xml = p.ok("slice from-trace --format xml", slice(&["from-trace", "-q", "Why?", "--format", "xml"], h));
    p.expect(xml.matches("<question>").count() == 1, || "slice from-trace --format xml: not one <question>".into());

    // JSON keeps the exact names, every unsafe character as a \u escape.
    let j = p.ok("slice from-trace --format json", slice(&["from-trace", "-q", "Why?", "--format", "json"], h));
    let v: Value = serde_json::from_str(&j).unwrap();
    let names: Vec<&str> = v["functions"].as_object().unwrap().values().filter_map(|f| f["qualname"].as_str()).collect();
    // Before 3.11 a code object has no qualname: the name is what the recorder shows.
    let exact = names.contains(&EVIL) || names.iter().any(|n| n.contains("\x1b]0;PWNED-TITLE\x07"));
    p.expect(exact, || format!("slice from-trace --format json: the exact name is missing: {names:?}"));

    assert!(p.0.is_empty(), "{} problems:\n{}", p.0.len(), p.0.join("\n"));
}
