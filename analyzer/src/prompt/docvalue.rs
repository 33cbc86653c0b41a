//! The laid-out prompt as the templates see it: a minijinja [`Object`] that reads the [`Doc`]
//! in place, field by field as the template asks, instead of a copy of the whole document
//! serialized into template values (on a 200,000-function chain that copy, the tree nodes'
//! included, was most of the prompt's memory).
//!
//! It shows exactly what serializing the `Doc` shows (`docs/prompts.md`, "Output formats and
//! templates": a user's template may read any field): the same maps with the same keys in the
//! same order, the same lists, the same values. Everything that comes from the trace is escaped
//! as it is read (`docs/prompts.md`, "Untrusted text"): names, paths, the command, labels and
//! notes as one line each ([`escape::line`]: a newline in a function name cannot start a
//! heading), source code, module values, outcomes and trees as lines ([`escape::block`]). The
//! question is the user's own and stays as given; keys, fences and numbers need no escaping.

use super::{Doc, DocSource, Level, Order};
use minijinja::value::{Enumerator, Object, ObjectRepr, Value};
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use trace_format::escape;

/// The template's context for `doc`.
pub(super) fn value(doc: Doc) -> Value {
    Value::from_object(At { doc: Arc::new(doc), at: Path::Doc })
}

/// A place in the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    Doc,
    Layout,
    Marks,
    Traces,
    Trace(usize),
    Threads(usize),
    Thread(usize, usize),
    Nodes(usize, usize),
    Node(usize, usize, usize),
    /// A trace's sources (`Some(trace)`), or the sorted sources of all traces (`None`).
    Sources(Option<usize>),
    Source(Option<usize>, usize),
    Outcomes(usize),
    Outcome(usize, usize),
}

/// A map or list of the document, shared with the template.
struct At {
    doc: Arc<Doc>,
    at: Path,
}

impl fmt::Debug for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Doc at {:?}", self.at)
    }
}

/// Keys of each map, in the order serde writes the fields of its struct (the order a template
/// iterating over one sees).
const DOC_KEYS: &[&str] = &["question", "variant", "layout", "marks", "multiple_traces", "traces", "sorted_sources", "notes"];
const LAYOUT_KEYS: &[&str] = &["tree", "sources", "order", "repeat"];
const MARKS_KEYS: &[&str] = &["count", "resumes", "recursive", "same_calls"];
const TRACE_KEYS: &[&str] = &["index", "dir", "command", "threads", "sources", "notes", "outcome"];
const THREAD_KEYS: &[&str] = &["label", "pid", "tid", "name", "main", "tree", "fence", "nodes"];
const NODE_KEYS: &[&str] = &["id", "parent", "depth", "function", "count", "resumes", "time_ns", "recursive", "level"];
/// A node's keys when it is inlined (`inlined` is written only when true).
const INLINED_NODE_KEYS: &[&str] = &["id", "parent", "depth", "function", "count", "resumes", "time_ns", "recursive", "level", "inlined"];
const SOURCE_KEYS: &[&str] =
    &["key", "qualname", "file", "first_line", "last_line", "lang", "fence", "code", "note", "elided", "values", "values_lines"];
const BLOCK_KEYS: &[&str] = &["text", "fence"];

fn cow(s: Cow<'_, str>) -> Value {
    match s {
        Cow::Borrowed(b) => Value::from(b),
        Cow::Owned(o) => Value::from(o),
    }
}

/// One-line text from the trace.
fn line(s: &str) -> Value {
    cow(escape::line(s))
}

/// Text from the trace shown as lines.
fn block(s: &str) -> Value {
    cow(escape::block(s))
}

fn opt(v: Option<Value>) -> Value {
    v.unwrap_or(Value::from(()))
}

fn lines(v: &[String]) -> Value {
    Value::from(v.iter().map(|s| line(s)).collect::<Vec<Value>>())
}

fn order(o: Order) -> &'static str {
    match o {
        Order::Call => "call",
        Order::Sorted => "sorted",
    }
}

fn level(l: Level) -> &'static str {
    match l {
        Level::Body => "body",
        Level::Ran => "ran",
        Level::Signature => "signature",
        Level::Name => "name",
    }
}

impl At {
    fn child(&self, at: Path) -> Value {
        Value::from_object(At { doc: self.doc.clone(), at })
    }

    fn sources(&self, trace: Option<usize>) -> Option<&[DocSource]> {
        match trace {
            Some(t) => self.doc.traces.get(t).map(|t| t.sources.as_slice()),
            None => Some(&self.doc.sorted_sources),
        }
    }

    fn len(&self) -> Option<usize> {
        let d = &self.doc;
        Some(match self.at {
            Path::Traces => d.traces.len(),
            Path::Threads(t) => d.traces.get(t)?.threads.len(),
            Path::Nodes(t, h) => d.traces.get(t)?.threads.get(h)?.nodes.len(),
            Path::Sources(t) => self.sources(t)?.len(),
            Path::Outcomes(t) => d.traces.get(t)?.outcome.len(),
            _ => return None,
        })
    }

    /// The `i`-th item of a list.
    fn item(&self, i: usize) -> Option<Value> {
        if i >= self.len()? {
            return None;
        }
        Some(self.child(match self.at {
            Path::Traces => Path::Trace(i),
            Path::Threads(t) => Path::Thread(t, i),
            Path::Nodes(t, h) => Path::Node(t, h, i),
            Path::Sources(t) => Path::Source(t, i),
            Path::Outcomes(t) => Path::Outcome(t, i),
            _ => return None,
        }))
    }

    /// A field of a map.
    fn field(&self, key: &str) -> Option<Value> {
        let d = &self.doc;
        Some(match self.at {
            Path::Doc => match key {
                "question" => Value::from(d.question.as_str()),
                "variant" => opt(d.variant.as_deref().map(Value::from)),
                "layout" => self.child(Path::Layout),
                "marks" => self.child(Path::Marks),
                "multiple_traces" => Value::from(d.multiple_traces),
                "traces" => self.child(Path::Traces),
                "sorted_sources" => self.child(Path::Sources(None)),
                "notes" => lines(&d.notes),
                _ => return None,
            },
            Path::Layout => match key {
                "tree" => Value::from(d.layout.tree),
                "sources" => Value::from(d.layout.sources),
                "order" => Value::from(order(d.layout.order)),
                "repeat" => Value::from(d.layout.repeat),
                _ => return None,
            },
            Path::Marks => match key {
                "count" => Value::from(d.marks.count),
                "resumes" => Value::from(d.marks.resumes),
                "recursive" => Value::from(d.marks.recursive),
                "same_calls" => Value::from(d.marks.same_calls),
                _ => return None,
            },
            Path::Trace(t) => {
                let tr = d.traces.get(t)?;
                match key {
                    "index" => Value::from(tr.index as u64),
                    "dir" => line(&tr.dir),
                    "command" => line(&tr.command),
                    "threads" => self.child(Path::Threads(t)),
                    "sources" => self.child(Path::Sources(Some(t))),
                    "notes" => lines(&tr.notes),
                    "outcome" => self.child(Path::Outcomes(t)),
                    _ => return None,
                }
            }
            Path::Thread(t, h) => {
                let th = d.traces.get(t)?.threads.get(h)?;
                match key {
                    "label" => line(&th.label),
                    "pid" => Value::from(th.pid),
                    "tid" => Value::from(th.tid),
                    "name" => opt(th.name.as_deref().map(line)),
                    "main" => Value::from(th.main),
                    "tree" => block(&th.tree),
                    "fence" => Value::from(th.fence.as_str()),
                    "nodes" => self.child(Path::Nodes(t, h)),
                    _ => return None,
                }
            }
            Path::Node(t, h, i) => {
                let n = d.traces.get(t)?.threads.get(h)?.nodes.get(i)?;
                match key {
                    "id" => Value::from(n.id),
                    "parent" => Value::from(n.parent),
                    "depth" => Value::from(n.depth),
                    "function" => Value::from(&*n.function),
                    "count" => Value::from(n.count),
                    "resumes" => Value::from(n.resumes),
                    "time_ns" => Value::from(n.time_ns),
                    "recursive" => Value::from(n.recursive),
                    "level" => Value::from(level(n.level)),
                    "inlined" if n.inlined => Value::from(true),
                    _ => return None,
                }
            }
            Path::Source(t, i) => {
                let s = self.sources(t)?.get(i)?;
                match key {
                    "key" => Value::from(s.key.as_str()),
                    "qualname" => line(&s.qualname),
                    "file" => line(&s.file),
                    "first_line" => opt(s.first_line.map(Value::from)),
                    "last_line" => opt(s.last_line.map(Value::from)),
                    "lang" => line(&s.lang),
                    "fence" => Value::from(s.fence.as_str()),
                    "code" => opt(s.code.as_deref().map(block)),
                    "note" => opt(s.note.as_deref().map(line)),
                    "elided" => Value::from(s.elided),
                    "values" => opt(s.values.as_deref().map(block)),
                    "values_lines" => line(&s.values_lines),
                    _ => return None,
                }
            }
            Path::Outcome(t, i) => {
                let o = d.traces.get(t)?.outcome.get(i)?;
                match key {
                    "text" => block(&o.text),
                    "fence" => Value::from(o.fence.as_str()),
                    _ => return None,
                }
            }
            Path::Traces | Path::Threads(..) | Path::Nodes(..) | Path::Sources(_) | Path::Outcomes(_) => return None,
        })
    }

    fn keys(&self) -> &'static [&'static str] {
        match self.at {
            Path::Doc => DOC_KEYS,
            Path::Layout => LAYOUT_KEYS,
            Path::Marks => MARKS_KEYS,
            Path::Trace(_) => TRACE_KEYS,
            Path::Thread(..) => THREAD_KEYS,
            Path::Node(t, h, i) => {
                let inlined =
                    self.doc.traces.get(t).and_then(|t| t.threads.get(h)).and_then(|th| th.nodes.get(i)).is_some_and(|n| n.inlined);
                if inlined {
                    INLINED_NODE_KEYS
                } else {
                    NODE_KEYS
                }
            }
            Path::Source(..) => SOURCE_KEYS,
            Path::Outcome(..) => BLOCK_KEYS,
            Path::Traces | Path::Threads(..) | Path::Nodes(..) | Path::Sources(_) | Path::Outcomes(_) => &[],
        }
    }

    fn is_list(&self) -> bool {
        matches!(self.at, Path::Traces | Path::Threads(..) | Path::Nodes(..) | Path::Sources(_) | Path::Outcomes(_))
    }
}

impl Object for At {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        if self.is_list() {
            ObjectRepr::Seq
        } else {
            ObjectRepr::Map
        }
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        if self.is_list() {
            self.item(key.as_usize()?)
        } else {
            self.field(key.as_str()?)
        }
    }

    fn get_value_by_str(self: &Arc<Self>, key: &str) -> Option<Value> {
        if self.is_list() {
            None
        } else {
            self.field(key)
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match self.len() {
            Some(n) => Enumerator::Seq(n),
            None => Enumerator::Str(self.keys()),
        }
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.len().unwrap_or(self.keys().len()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::render::{Format, Renderer};
    use super::super::*;

    /// Prints every field of the document, the maps and lists whole (keys in order, values
    /// with their types: strings quoted, none, booleans), then reads them the ways a template
    /// can: items, lengths, negative indices, filters, tests.
    const DUMP: &str = r#"{{ question }}
{{ variant }}|{{ layout }}|{{ multiple_traces }}|{{ notes }}|{{ layout.order }}
{{ traces }}
{{ sorted_sources }}
{{ traces|length }} {{ sorted_sources|length }} {{ traces[-1].index }}
{%- for t in traces %}
{{ t|length }} {% for k, v in t|items %}{{ k }}={{ v }};{% endfor %}
{%- for th in t.threads %}
{{ th.label }} {{ th.name }} {{ th.nodes|length }} {{ th.nodes[-1] }} {{ th.nodes|last }} {{ th.tree }}
{%- for n in th.nodes %}
{{ loop.index }}/{{ loop.length }}:{{ n.function }}{% if n.inlined is defined %} inlined={{ n.inlined }}{% endif %} {{ n.level }} {{ n|length }} {{ n|list }}
{%- endfor %}
{%- endfor %}
{%- for s in t.sources %}
{{ s.code is none }} {{ s.first_line }} {{ s.values }} {{ s.note }} {{ s|length }}
{%- endfor %}
{%- for o in t.outcome %}{{ o.text }}{{ o.fence }}{% endfor %}
{%- endfor %}
{{ traces[1].sources|map(attribute="qualname")|join(",") }}
{{ sorted_sources|selectattr("elided")|list|length }} {{ traces[0].threads[0].nodes[0].missing is defined }}
{{ traces[0] is mapping }} {{ traces is sequence }} {{ traces[0].outcome is sequence }} {% if traces[1].outcome %}x{% else %}empty{% endif %}
"#;

    fn source(key: &str, qualname: &str, code: Option<&str>) -> DocSource {
        DocSource {
            key: key.into(),
            qualname: qualname.into(),
            file: "dir/app\u{1b}]0;x\u{7}.py".into(),
            first_line: code.map(|_| 3),
            last_line: code.map(|_| 9),
            lang: "python".into(),
            fence: "````".into(),
            code: code.map(str::to_string),
            note: (code.is_none()).then(|| "changed since the run\n# Question".to_string()),
            elided: key.ends_with('e'),
            values: code.map(|_| "X = 1\r\nY = '\u{202e}'".to_string()),
            values_lines: "1, 4-5".into(),
            func: crate::symbols::FuncId::NONE,
        }
    }

    fn node(id: u32, depth: u32, function: &str, level: Level, inlined: bool) -> DocNode {
        DocNode {
            id,
            parent: id.saturating_sub(1),
            depth,
            function: function.into(),
            count: 2,
            resumes: 1,
            time_ns: 7,
            recursive: id == 2,
            level,
            inlined,
            func: crate::symbols::FuncId::NONE,
        }
    }

    fn thread(label: &str, name: Option<&str>, tree: &str) -> DocThread {
        DocThread {
            label: label.into(),
            pid: 10,
            tid: 11,
            name: name.map(str::to_string),
            main: name.is_none(),
            tree: tree.into(),
            fence: "```".into(),
            nodes: vec![
                node(0, 0, "app.py:main", Level::Body, false),
                node(1, 1, "app.py:f\u{1b}[2J", Level::Signature, true),
                node(2, 2, "app.py:g", Level::Name, false),
            ],
        }
    }

    /// A document with every kind of field and value: two traces, threads with and without
    /// labels and names, inlined and plain nodes, sources with and without code, notes, values
    /// and outcomes, and control characters in everything that comes from the trace.
    fn doc(layout: Layout) -> Doc {
        let traces = vec![
            DocTrace {
                index: 1,
                dir: "a.d".into(),
                command: "python3 app.py\n# Question".into(),
                threads: vec![thread("", None, "main  (app.py:1)\n  f\u{1b}[2J\n\tg\r\n")],
                sources: vec![source("app.py:main", "main", Some("def main():\n    f()\x07\n")), source("app.py:fe", "f\nx", None)],
                notes: vec!["note \u{1b}[31mred".into()],
                outcome: vec![DocBlock { text: "AssertionError\n\u{1b}]0;t\u{7}".into(), fence: "```".into() }],
            },
            DocTrace {
                index: 2,
                dir: "b\u{202e}.d".into(),
                command: "python3 app.py b".into(),
                threads: vec![thread("process 10, thread 11", Some("Worker\u{1b}"), "x"), thread("process 10, thread 12", Some("w2"), "")],
                sources: vec![source("app.py:g", "g", Some("def g():\n    pass\n"))],
                notes: Vec::new(),
                outcome: Vec::new(),
            },
        ];
        Doc {
            question: "Why \u{1b}[2J?\nreally".into(),
            variant: layout.variant().map(|v| v.name().to_string()),
            layout,
            marks: TreeMarks { count: true, resumes: false, recursive: true, same_calls: false },
            multiple_traces: true,
            traces,
            sorted_sources: vec![source("app.py:ge", "g", Some("def g():\n    ...\n")), source("app.py:h", "h", None)],
            notes: vec!["budget: cut\nhere".into(), "plain".into()],
        }
    }

    fn both(format: Format, template: Option<&str>, doc: Doc) -> (String, String) {
        let r = Renderer::new(format, template.map(|t| ("t.j2".to_string(), t.to_string()))).unwrap();
        let serialized = r.render_serialized(&doc).unwrap();
        let model = Model {
            question: String::new(),
            traces: Vec::new(),
            funcs: Funcs::default(),
            notes: Vec::new(),
            tests_shown: false,
            front: Default::default(),
            budget_by_default: false,
            analysis_ids: Default::default(),
        };
        (r.render(&model, doc).unwrap(), serialized)
    }

    #[test]
    fn templates_see_the_same_document_as_when_it_was_serialized() {
        let layouts = Variant::ALL.map(|v| v.layout()).into_iter().chain([Layout::DEFAULT]);
        for layout in layouts {
            for (format, template) in [(Format::Markdown, None), (Format::Xml, None), (Format::Markdown, Some(DUMP))] {
                let (object, serialized) = both(format, template, doc(layout));
                assert_eq!(object, serialized, "{format} {layout:?} {}", template.is_some());
            }
        }
        // The dump does reach every field: nodes (an inlined one's extra key), levels, escaped
        // names, thread names and outcomes.
        let (dump, _) = both(Format::Markdown, Some(DUMP), doc(Layout::DEFAULT));
        for shown in [
            "'inlined': True",
            "inlined=True",
            "'level': 'signature'",
            "'qualname': 'f\\\\nx'",
            "Worker\\x1b",
            "AssertionError\n\\x1b]0;t\\x07",
        ] {
            assert!(dump.contains(shown), "{shown:?} not in {dump}");
        }
    }

    #[test]
    fn the_bundled_templates_render_a_recorded_run_alike_both_ways() {
        let (_dir, m) = super::super::tests::fixture_model();
        // A plan as a budget makes one: bodies elided, sources dropped, the tree cut, notes.
        let id = |q: &str| m.funcs.iter().find(|(_, f)| f.qualname == q).map(|(id, _)| id).unwrap();
        let mut cut = Plan { tree_depth: Some(2), notes: vec!["budget note".into()], collapse_repeats: true, ..Plan::default() };
        cut.levels.insert(id("compute"), Level::Signature);
        cut.levels.insert(id("helper"), Level::Name);
        for format in [Format::Markdown, Format::Xml] {
            for layout in Variant::ALL.map(|v| v.layout()).into_iter().chain([Layout::DEFAULT]) {
                for plan in [&Plan::default(), &cut] {
                    let r = Renderer::new(format, None).unwrap();
                    let serialized = r.render_serialized(&m.doc(layout, plan)).unwrap();
                    assert_eq!(r.render(&m, m.doc(layout, plan)).unwrap(), serialized, "{format} {layout:?}");
                }
            }
        }
    }
}
