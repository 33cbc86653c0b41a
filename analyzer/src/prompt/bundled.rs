//! The bundled templates (`prompts/markdown.md.j2`, `prompts/xml.xml.j2`) written out in code:
//! what rendering them through minijinja gives, byte for byte, without the template engine.
//!
//! A prompt of a 200,000-function chain is 22 MB; the engine spent most of `slice stats`' time
//! looking fields up block by block, five variants over. A user's own template (`--template`)
//! still goes through minijinja; so does a bundled one in the tests, which check that this
//! module writes the same text for every variant and every kind of field
//! (`the_bundled_templates_in_code_write_what_the_engine_writes`). A change to a bundled
//! template must be made here too: that test fails until it is.
//!
//! Escaping is the same as the engine's ([`super::docvalue`]): names, paths, the command,
//! labels and notes as one line ([`escape::line`]), code, values, outcomes and trees as lines
//! ([`escape::block`]), then the template's filters on top.

use super::{Doc, DocSource, Order};
use std::fmt::Write as _;
use trace_format::escape;

/// Which bundled template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bundled {
    Markdown,
    Xml,
}

/// The text of `doc` as the bundled template renders it (before [`super::render::Renderer`]
/// ends it with a newline).
pub(super) fn render(which: Bundled, doc: &Doc) -> String {
    let size: usize = doc
        .traces
        .iter()
        .map(|t| t.threads.iter().map(|th| th.tree.len() + 32).sum::<usize>() + t.sources.iter().map(source_size).sum::<usize>())
        .sum::<usize>()
        + doc.sorted_sources.iter().map(source_size).sum::<usize>()
        + doc.question.len()
        + 2048;
    let mut out = String::with_capacity(size);
    match which {
        Bundled::Markdown => markdown(doc, &mut out),
        Bundled::Xml => xml(doc, &mut out),
    }
    out
}

fn source_size(s: &DocSource) -> usize {
    s.code.as_ref().map_or(0, |c| c.len()) + s.values.as_ref().map_or(0, |v| v.len()) + s.qualname.len() + s.file.len() + 64
}

/// `{% if s.first_line %}` (an absent or zero line is false), and the `last_line` test
/// after it.
fn lines_of(s: &DocSource) -> Option<(u32, Option<u32>)> {
    let first = s.first_line.filter(|&l| l != 0)?;
    Some((first, s.last_line.filter(|&l| l != 0 && l != first)))
}

/// A string field the template tests for truth: present and not empty.
fn truthy(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

fn markdown(doc: &Doc, out: &mut String) {
    let l = &doc.layout;
    out.push_str("# Question\n\n");
    out.push_str(&doc.question);
    out.push('\n');
    if l.tree || l.sources {
        out.push_str("\n# Context\n\n");
        if l.tree {
            let m = doc.multiple_traces;
            out.push_str(if m { "The call trees below were" } else { "The call tree below was" });
            out.push_str(" recorded by running the program: each line is a function that ran, indented under its caller, ");
            out.push_str(if l.sources {
                "with the file and line where it is defined where the function first appears, unless its source follows (then the source's heading gives them)."
            } else {
                "with the file and line where it is defined (given where the function first appears)."
            });
            out.push_str(" Callees appear in the order they were first called.");
            let mk = &doc.marks;
            if mk.count {
                out.push_str(" `×N`: called N times from that caller (the calls are merged, and so are their callees).");
            }
            if mk.resumes {
                out.push_str(" `(+M resumes)`: a generator or coroutine continued M more times after `yield`/`await`.");
            }
            if mk.recursive {
                out.push_str(" `↻ recursive`: a call of a function already on the path above it (recursion, or a dispatcher re-entered); what that call did is shown under the earlier occurrence.");
            }
            if mk.same_calls {
                out.push_str(" `[same calls as above]` (or `as f`): the same calls as at an earlier line of this function (or of `f`), not repeated.");
            }
        }
        if l.sources {
            if l.tree {
                out.push_str("\n\n");
            }
            out.push_str("The source code of ");
            match l.order {
                Order::Call => {
                    out.push_str("each function follows in call-tree order (a caller before its callees");
                    out.push_str(if l.repeat {
                        "; a function that appears at several places in the tree is repeated"
                    } else {
                        "; each function once, at its first place in the tree"
                    });
                    out.push(')');
                }
                Order::Sorted => out.push_str("the functions that ran follows, sorted by qualified name"),
            }
            out.push_str(". Class bodies and the bodies of imported modules are not shown.");
        }
        out.push('\n');
    }
    for n in &doc.notes {
        out.push_str("\n> ");
        out.push_str(&escape::line(n));
    }
    for t in &doc.traces {
        out.push_str("\n\n## ");
        if doc.multiple_traces {
            let _ = write!(out, "Run {}: ", t.index);
        } else {
            out.push_str("Run: ");
        }
        out.push_str(&escape::code_span(&escape::line(&t.command)));
        if !t.outcome.is_empty() {
            out.push_str("\n\n### Outcome");
            for o in &t.outcome {
                out.push_str("\n\n");
                out.push_str(&o.fence);
                out.push_str("text\n");
                out.push_str(&escape::block(&o.text));
                out.push('\n');
                out.push_str(&o.fence);
            }
        }
        for n in &t.notes {
            out.push_str("\n\n> ");
            out.push_str(&escape::line(n));
        }
        if l.tree {
            out.push_str("\n\n### Call tree");
            for th in &t.threads {
                out.push('\n');
                let label = escape::line(&th.label);
                if !label.is_empty() {
                    out.push_str("\n#### ");
                    out.push_str(&label);
                    out.push('\n');
                }
                out.push('\n');
                out.push_str(&th.fence);
                out.push_str("text\n");
                out.push_str(&escape::block(&th.tree));
                out.push('\n');
                out.push_str(&th.fence);
            }
        }
        if l.sources && l.order == Order::Call && !t.sources.is_empty() {
            out.push_str("\n\n### Source code");
            for s in &t.sources {
                markdown_source(s, out);
            }
        }
    }
    if l.sources && l.order == Order::Sorted && !doc.sorted_sources.is_empty() {
        out.push_str("\n\n## Source code");
        for s in &doc.sorted_sources {
            markdown_source(s, out);
        }
    }
}

fn markdown_source(s: &DocSource, out: &mut String) {
    let file = escape::line(&s.file);
    let lang = escape::line(&s.lang);
    out.push_str("\n\n#### ");
    out.push_str(&escape::code_span(&escape::line(&s.qualname)));
    out.push_str(" (");
    out.push_str(&file);
    if let Some((first, last)) = lines_of(s) {
        let _ = write!(out, ":{first}");
        if let Some(last) = last {
            let _ = write!(out, "-{last}");
        }
    }
    out.push(')');
    if let Some(note) = truthy(&s.note) {
        out.push_str("\n\n_");
        out.push_str(&escape::line(note));
        out.push('_');
    }
    if let Some(values) = truthy(&s.values) {
        out.push_str("\n\nModule-level values it reads (");
        out.push_str(&file);
        out.push_str(", line ");
        out.push_str(&escape::line(&s.values_lines));
        out.push_str("):\n\n");
        fenced(out, &s.fence, &lang, values);
    }
    if let Some(code) = &s.code {
        out.push_str("\n\n");
        fenced(out, &s.fence, &lang, code);
    }
}

fn fenced(out: &mut String, fence: &str, lang: &str, text: &str) {
    out.push_str(fence);
    out.push_str(lang);
    out.push('\n');
    out.push_str(&escape::block(text));
    out.push('\n');
    out.push_str(fence);
}

fn xml(doc: &Doc, out: &mut String) {
    let l = &doc.layout;
    out.push_str("<question>\n");
    out.push_str(&escape::xml_text(&doc.question));
    out.push_str("\n</question>");
    if l.tree || l.sources {
        out.push_str("\n<instructions>");
        if l.tree {
            out.push_str(
                "\nEach <call_tree> was recorded by running the program: each line is a function that ran, indented under its caller, ",
            );
            out.push_str(if l.sources {
                "with the file and line where it is defined where the function first appears, unless its source follows (then the source's attributes give them)."
            } else {
                "with the file and line where it is defined (given where the function first appears)."
            });
            out.push_str(" Callees appear in the order they were first called.");
            let mk = &doc.marks;
            if mk.count {
                out.push_str(" \"×N\": called N times from that caller (calls merged, with their callees).");
            }
            if mk.resumes {
                out.push_str(" \"(+M resumes)\": a generator or coroutine continued M more times after yield/await.");
            }
            if mk.recursive {
                out.push_str(" \"↻ recursive\": a call of a function already on the path above it (recursion, or a dispatcher re-entered); what that call did is shown under the earlier occurrence.");
            }
            if mk.same_calls {
                out.push_str(" \"[same calls as above]\" (or \"as f\"): the same calls as at an earlier line of this function (or of f), not repeated.");
            }
        }
        if l.sources {
            out.push_str("\nEach <source> is the exact code of a function that ran");
            match l.order {
                Order::Call => {
                    out.push_str(", in call-tree order (a caller before its callees");
                    out.push_str(if l.repeat {
                        "; repeated where the function repeats in the tree"
                    } else {
                        "; each function once, at its first place in the tree"
                    });
                    out.push(')');
                }
                Order::Sorted => out.push_str(", sorted by qualified name"),
            }
            out.push_str(". Class bodies and the bodies of imported modules are not shown.");
        }
        out.push_str("\n</instructions>");
    }
    for n in &doc.notes {
        xml_note(out, n);
    }
    for t in &doc.traces {
        let _ = write!(out, "\n<run index=\"{}\" command=\"{}\">", t.index, escape::xml_attr(&escape::line(&t.command)));
        for o in &t.outcome {
            out.push_str("\n<outcome>\n");
            out.push_str(&escape::xml_text(&escape::block(&o.text)));
            out.push_str("\n</outcome>");
        }
        for n in &t.notes {
            xml_note(out, n);
        }
        if l.tree {
            for th in &t.threads {
                out.push_str("\n<call_tree");
                let label = escape::line(&th.label);
                if !label.is_empty() {
                    out.push_str(" thread=\"");
                    out.push_str(&escape::xml_attr(&label));
                    out.push('"');
                }
                out.push_str(">\n");
                out.push_str(&escape::xml_text(&escape::block(&th.tree)));
                out.push_str("\n</call_tree>");
            }
        }
        if l.sources && l.order == Order::Call {
            for s in &t.sources {
                xml_source(s, out);
            }
        }
        out.push_str("\n</run>");
    }
    if l.sources && l.order == Order::Sorted {
        for s in &doc.sorted_sources {
            xml_source(s, out);
        }
    }
}

fn xml_note(out: &mut String, n: &str) {
    out.push_str("\n<note>");
    out.push_str(&escape::xml_text(&escape::line(n)));
    out.push_str("</note>");
}

fn xml_source(s: &DocSource, out: &mut String) {
    out.push_str("\n<source function=\"");
    out.push_str(&escape::xml_attr(&escape::line(&s.qualname)));
    out.push_str("\" file=\"");
    out.push_str(&escape::xml_attr(&escape::line(&s.file)));
    out.push('"');
    if let Some((first, last)) = lines_of(s) {
        let _ = write!(out, " lines=\"{first}");
        if let Some(last) = last {
            let _ = write!(out, "-{last}");
        }
        out.push('"');
    }
    if s.elided {
        out.push_str(" elided=\"body\"");
    }
    out.push('>');
    if let Some(note) = truthy(&s.note) {
        xml_note(out, note);
    }
    if let Some(values) = truthy(&s.values) {
        out.push_str("\n<module_values lines=\"");
        out.push_str(&escape::xml_attr(&escape::line(&s.values_lines)));
        out.push_str("\">\n");
        out.push_str(&escape::xml_text(&escape::block(values)));
        out.push_str("\n</module_values>");
    }
    if let Some(code) = &s.code {
        out.push('\n');
        out.push_str(&escape::xml_text(&escape::block(code)));
    }
    out.push_str("\n</source>");
}

#[cfg(test)]
mod tests {
    use super::super::render::{Format, Renderer};
    use super::super::{DocBlock, DocNode, DocThread, DocTrace, Layout, Level, Plan, TreeMarks, Variant};
    use super::*;

    fn source(
        qualname: &str,
        first: Option<u32>,
        last: Option<u32>,
        code: Option<&str>,
        note: Option<&str>,
        values: Option<&str>,
    ) -> DocSource {
        DocSource {
            key: format!("app.py:{qualname}"),
            func: crate::symbols::FuncId::NONE,
            qualname: qualname.into(),
            file: "dir/app\u{1b}]0;x\u{7}.py".into(),
            first_line: first,
            last_line: last,
            lang: "python".into(),
            fence: "````".into(),
            code: code.map(str::to_string),
            note: note.map(str::to_string),
            elided: qualname.ends_with('e'),
            values: values.map(str::to_string),
            values_lines: "1, 4-5\u{1b}".into(),
        }
    }

    fn thread(label: &str, tree: &str) -> DocThread {
        let node = DocNode {
            id: 0,
            parent: 0,
            depth: 0,
            function: "app.py:main".into(),
            func: crate::symbols::FuncId::NONE,
            count: 1,
            resumes: 0,
            time_ns: 0,
            recursive: false,
            level: Level::Body,
            inlined: false,
        };
        DocThread { label: label.into(), pid: 1, tid: 2, name: None, main: true, tree: tree.into(), fence: "```".into(), nodes: vec![node] }
    }

    /// Every case a template tests: lines absent, zero, equal and different; notes and values
    /// absent, empty and present; code absent, empty and present; labels empty and not;
    /// outcomes and notes none and several; one run and several; control characters, `</`,
    /// quotes, ampersands and backticks in everything that comes from the trace.
    fn docs(layout: Layout) -> Vec<Doc> {
        let sources = vec![
            source("main", Some(3), Some(9), Some("def main():\n    f()\x07 </x> \"&\"\r\n"), None, Some("X = 1\r\nY = '\u{202e}'")),
            source("f`x`\ny", None, None, None, Some("changed since the run\n# Question"), None),
            source("same", Some(4), Some(4), Some(""), Some(""), Some("")),
            source("zero", Some(0), Some(7), Some("z"), None, None),
            source("nolast", Some(5), None, Some("n"), Some("note"), Some("V = 2")),
            source("lastzero", Some(5), Some(0), None, None, None),
            source("elide", Some(1), Some(2), Some("def elide(): ..."), None, None),
        ];
        let trace = |index: usize, threads: Vec<DocThread>, sources: Vec<DocSource>, notes: Vec<String>, outcome: Vec<DocBlock>| DocTrace {
            index,
            dir: "a.d".into(),
            command: "python3 `app`.py \"&<>\"\n# Question\u{1b}".into(),
            threads,
            sources,
            notes,
            outcome,
        };
        let outcome = vec![
            DocBlock { text: "AssertionError </x>\n\u{1b}]0;t\u{7}".into(), fence: "```".into() },
            DocBlock { text: String::new(), fence: "````".into() },
        ];
        let many = vec![
            trace(
                1,
                vec![thread("", "main  (app.py:1)\n  f\u{1b}[2J </y>\n\tg\r\n")],
                sources.clone(),
                vec!["note \u{1b}[31mred </n>".into()],
                outcome,
            ),
            trace(
                2,
                vec![thread("process 10, thread 11 \"&\u{1b}", "x"), thread("process 10, thread 12", "")],
                sources[..2].to_vec(),
                vec!["a".into(), String::new()],
                Vec::new(),
            ),
            trace(3, Vec::new(), Vec::new(), Vec::new(), Vec::new()),
        ];
        // Each mark of the legend with and without the others (bit i of `m`: the i-th mark).
        let marks = |m: u8| TreeMarks { count: m & 1 != 0, resumes: m & 2 != 0, recursive: m & 4 != 0, same_calls: m & 8 != 0 };
        let doc = |traces: Vec<DocTrace>, sorted: Vec<DocSource>, notes: Vec<String>, question: &str, m: u8| Doc {
            question: question.into(),
            variant: layout.variant().map(|v| v.name().to_string()),
            layout,
            marks: marks(m),
            multiple_traces: traces.len() > 1,
            traces,
            sorted_sources: sorted,
            notes,
        };
        let mut all = vec![
            doc(many, sources.clone(), vec!["budget: cut\nhere </z>".into(), "plain".into()], "Why \u{1b}[2J </q> &?\nreally", 15),
            doc(
                vec![trace(1, vec![thread("", "t")], sources[..1].to_vec(), Vec::new(), Vec::new())],
                sources[2..].to_vec(),
                Vec::new(),
                "q",
                0,
            ),
        ];
        for m in 0..16 {
            all.push(doc(vec![trace(1, vec![thread("", "t")], Vec::new(), Vec::new(), Vec::new())], Vec::new(), Vec::new(), "", m));
        }
        all
    }

    fn layouts() -> Vec<Layout> {
        let mut all: Vec<Layout> = Variant::ALL.map(|v| v.layout()).into_iter().chain([Layout::DEFAULT]).collect();
        all.push(Layout { tree: false, sources: false, order: Order::Call, repeat: false });
        all.push(Layout { tree: false, sources: true, order: Order::Sorted, repeat: true });
        all.push(Layout { tree: true, sources: false, order: Order::Sorted, repeat: true });
        all
    }

    /// Written in code, the bundled templates give what the engine gives from them, byte for
    /// byte: on documents made of every case a template tests, and on a recorded run laid out
    /// in every variant, whole and as a budget cuts it.
    #[test]
    fn the_bundled_templates_in_code_write_what_the_engine_writes() {
        let (_dir, m) = super::super::tests::fixture_model();
        let id = |q: &str| m.funcs.iter().find(|(_, f)| f.qualname == q).map(|(id, _)| id).unwrap();
        let mut cut = Plan { tree_depth: Some(2), notes: vec!["budget note".into()], collapse_repeats: true, ..Plan::default() };
        cut.levels.insert(id("compute"), Level::Signature);
        cut.levels.insert(id("helper"), Level::Name);
        let mut checked = 0;
        for format in [Format::Markdown, Format::Xml] {
            let r = Renderer::new(format, None).unwrap();
            for layout in layouts() {
                let mut all = docs(layout);
                all.push(m.doc(layout, &Plan::default()));
                all.push(m.doc(layout, &cut));
                for doc in all {
                    let engine = r.render_engine(doc.clone()).unwrap();
                    assert_eq!(r.render(&m, doc).unwrap(), engine, "{format} {layout:?}");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 2 * 9 * 20);
    }
}
