//! Rendering a laid-out prompt: Markdown and XML through minijinja templates (the defaults
//! live in `prompts/`, a user can pass their own), JSON through serde (schema in
//! `docs/slice-json.md`).

use super::bundled::{self, Bundled};
use super::{Doc, DocSource, Model};
use crate::pathclass::Origin;
use crate::symbols::Language;
use minijinja::Environment;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use trace_format::escape;

/// The default Markdown template (`prompts/markdown.md.j2`).
pub const MARKDOWN_TEMPLATE: &str = include_str!("../../prompts/markdown.md.j2");
/// The default XML template (`prompts/xml.xml.j2`).
pub const XML_TEMPLATE: &str = include_str!("../../prompts/xml.xml.j2");
/// Version of the JSON document (`docs/slice-json.md`).
pub const JSON_SCHEMA_VERSION: u32 = 1;

/// Output format of a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Markdown,
    Xml,
    Json,
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "markdown" | "md" => Ok(Format::Markdown),
            "xml" => Ok(Format::Xml),
            "json" => Ok(Format::Json),
            _ => Err(format!("unknown format {s:?}: use markdown, xml or json")),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Markdown => "markdown",
            Format::Xml => "xml",
            Format::Json => "json",
        })
    }
}

/// A template that does not parse or render.
#[derive(Debug, thiserror::Error)]
#[error("template {name}: {msg}")]
pub struct TemplateError {
    pub name: String,
    pub msg: String,
}

/// Filter `xmltext`: text inside a tag ([`escape::xml_text`]: code kept readable, no entity
/// escaping, any `</` written `<\/` so no content can close an enclosing tag, control
/// characters other than newline and tab escaped).
fn xmltext(s: String) -> String {
    escape::xml_text(&s)
}

/// Filter `xmlattr`: an XML attribute value ([`escape::xml_attr`]).
fn xmlattr(s: String) -> String {
    escape::xml_attr(&s)
}

/// Filter `code`: a Markdown inline code span that no backtick or line break inside can end
/// ([`escape::code_span`]).
fn code(s: String) -> String {
    escape::code_span(&s)
}

/// The document as templates saw it before [`super::docvalue`]: a copy with everything that
/// comes from the trace escaped, serialized into template values. Tests check that the object
/// shows the same thing.
#[cfg(test)]
fn for_display(doc: &Doc) -> Doc {
    use std::borrow::Cow;
    let line = |s: &mut String| {
        if let Cow::Owned(o) = escape::line(s) {
            *s = o;
        }
    };
    let block = |s: &mut String| {
        if let Cow::Owned(o) = escape::block(s) {
            *s = o;
        }
    };
    let source = |s: &mut DocSource| {
        line(&mut s.qualname);
        line(&mut s.file);
        line(&mut s.lang);
        line(&mut s.values_lines);
        s.note.iter_mut().for_each(line);
        s.code.iter_mut().for_each(block);
        s.values.iter_mut().for_each(block);
    };
    let mut d = doc.clone();
    d.notes.iter_mut().for_each(line);
    d.sorted_sources.iter_mut().for_each(source);
    for t in &mut d.traces {
        line(&mut t.dir);
        line(&mut t.command);
        t.notes.iter_mut().for_each(line);
        t.outcome.iter_mut().for_each(|o| block(&mut o.text));
        t.sources.iter_mut().for_each(source);
        for th in &mut t.threads {
            line(&mut th.label);
            th.name.iter_mut().for_each(line);
            block(&mut th.tree);
        }
    }
    d
}

/// A prompt renderer: the template environment, built once.
pub struct Renderer {
    env: Environment<'static>,
    format: Format,
    name: String,
    /// The bundled template of the format, written in code ([`super::bundled`]), when no
    /// user template replaces it.
    bundled: Option<Bundled>,
}

impl Renderer {
    /// `template`: a user template (name for messages, source) replacing the default of the
    /// format. JSON ignores templates.
    pub fn new(format: Format, template: Option<(String, String)>) -> Result<Renderer, TemplateError> {
        let mut env = Environment::new();
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        env.add_filter("xmltext", xmltext);
        env.add_filter("xmlattr", xmlattr);
        env.add_filter("code", code);
        let bundled = match (&template, format) {
            (Some(_), _) | (None, Format::Json) => None,
            (None, Format::Markdown) => Some(Bundled::Markdown),
            (None, Format::Xml) => Some(Bundled::Xml),
        };
        let (name, src) = match (template, format) {
            (Some((n, s)), _) => (n, s),
            (None, Format::Xml) => ("prompts/xml.xml.j2".to_string(), XML_TEMPLATE.to_string()),
            (None, _) => ("prompts/markdown.md.j2".to_string(), MARKDOWN_TEMPLATE.to_string()),
        };
        env.add_template_owned(name.clone(), src).map_err(|e| TemplateError { name: name.clone(), msg: describe(&e) })?;
        Ok(Renderer { env, format, name, bundled })
    }

    /// The prompt for `doc` (laid out from `model`): a bundled template written in code
    /// ([`super::bundled`]), or a user's template, which reads the document in place
    /// ([`super::docvalue`]).
    pub fn render(&self, model: &Model, doc: Doc) -> Result<String, TemplateError> {
        if self.format == Format::Json {
            return Ok(json(model, &doc));
        }
        if let Some(which) = self.bundled {
            let mut s = bundled::render(which, &doc);
            if !s.ends_with('\n') {
                s.push('\n');
            }
            return Ok(s);
        }
        self.render_template(doc)
    }

    /// `doc` through the template engine, whatever the template.
    fn render_template(&self, doc: Doc) -> Result<String, TemplateError> {
        let tmpl = self.env.get_template(&self.name).map_err(|e| TemplateError { name: self.name.clone(), msg: describe(&e) })?;
        let mut s = tmpl.render(super::docvalue::value(doc)).map_err(|e| TemplateError { name: self.name.clone(), msg: describe(&e) })?;
        if !s.ends_with('\n') {
            s.push('\n');
        }
        Ok(s)
    }
}

#[cfg(test)]
impl Renderer {
    /// [`Renderer::render`] through the template engine even for a bundled template, for
    /// tests that [`super::bundled`] writes what the engine writes.
    pub(crate) fn render_engine(&self, doc: Doc) -> Result<String, TemplateError> {
        self.render_template(doc)
    }

    /// [`Renderer::render`] as it was: the template given the document serialized into
    /// template values ([`for_display`]), for tests that the object shows the same.
    pub(crate) fn render_serialized(&self, doc: &Doc) -> Result<String, TemplateError> {
        let tmpl = self.env.get_template(&self.name).map_err(|e| TemplateError { name: self.name.clone(), msg: describe(&e) })?;
        let mut s = tmpl
            .render(minijinja::Value::from(minijinja::value::Serde(&for_display(doc))))
            .map_err(|e| TemplateError { name: self.name.clone(), msg: describe(&e) })?;
        if !s.ends_with('\n') {
            s.push('\n');
        }
        Ok(s)
    }
}

fn describe(e: &minijinja::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s.push_str(&format!(": {inner}"));
        src = inner.source();
    }
    s
}

#[derive(Serialize)]
struct JsonDoc<'a> {
    schema: &'static str,
    schema_version: u32,
    question: &'a str,
    variant: &'a Option<String>,
    layout: &'a super::Layout,
    traces: Vec<JsonTrace<'a>>,
    sorted_sources: Vec<&'a str>,
    functions: BTreeMap<&'a str, JsonFunc<'a>>,
    sources: BTreeMap<&'a str, JsonSource<'a>>,
    notes: &'a [String],
}

#[derive(Serialize)]
struct JsonTrace<'a> {
    index: usize,
    dir: &'a str,
    command: &'a str,
    notes: &'a [String],
    threads: &'a [super::DocThread],
    sources: Vec<&'a str>,
}

#[derive(Serialize)]
struct JsonFunc<'a> {
    qualname: &'a str,
    language: &'static str,
    file: &'a str,
    line: Option<u32>,
    module: &'a str,
    origin: &'static str,
}

#[derive(Serialize)]
struct JsonSource<'a> {
    file: &'a str,
    first_line: Option<u32>,
    last_line: Option<u32>,
    lang: &'a str,
    code: Option<&'a str>,
    note: Option<&'a str>,
    elided: bool,
}

fn add_source<'a>(s: &'a DocSource, sources: &mut BTreeMap<&'a str, JsonSource<'a>>) {
    sources.entry(s.key.as_str()).or_insert(JsonSource {
        file: &s.file,
        first_line: s.first_line,
        last_line: s.last_line,
        lang: &s.lang,
        code: s.code.as_deref(),
        note: s.note.as_deref(),
        elided: s.elided,
    });
}

fn json(model: &Model, doc: &Doc) -> String {
    let mut functions = BTreeMap::new();
    let mut sources = BTreeMap::new();
    for t in &doc.traces {
        for th in &t.threads {
            for n in &th.nodes {
                if let Some(f) = model.funcs.get(n.func) {
                    functions.entry(&*f.key).or_insert(JsonFunc {
                        qualname: &f.qualname,
                        language: match f.language {
                            Language::Python => "python",
                            Language::Builtin => "builtin",
                            Language::Native => "native",
                        },
                        file: &f.file,
                        line: f.line,
                        module: &f.module,
                        origin: match f.origin {
                            Origin::Program => "program",
                            Origin::Stdlib => "stdlib",
                            Origin::SitePackages => "site-packages",
                        },
                    });
                }
            }
        }
        for s in &t.sources {
            add_source(s, &mut sources);
        }
    }
    for s in &doc.sorted_sources {
        add_source(s, &mut sources);
    }
    let out = JsonDoc {
        schema: "slice-prompt",
        schema_version: JSON_SCHEMA_VERSION,
        question: &doc.question,
        variant: &doc.variant,
        layout: &doc.layout,
        traces: doc
            .traces
            .iter()
            .map(|t| JsonTrace {
                index: t.index,
                dir: &t.dir,
                command: &t.command,
                notes: &t.notes,
                threads: &t.threads,
                sources: t.sources.iter().map(|s| s.key.as_str()).collect(),
            })
            .collect(),
        sorted_sources: doc.sorted_sources.iter().map(|s| s.key.as_str()).collect(),
        functions,
        sources,
        notes: &doc.notes,
    };
    let mut s = escape::json_pretty(&out).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}
