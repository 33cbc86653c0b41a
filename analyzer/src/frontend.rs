//! Which front end a text is for: the `slice` command line or `slice mcp`'s tools. A hint in
//! a note, an error or a prompt tells the reader which option to pass; an agent calling a tool
//! cannot pass `--show-plumbing`, it passes `show_plumbing: true`. Every such hint names its
//! option through [`FrontEnd`], and each option's two spellings are written here, side by side,
//! once ([`FrontEnd::name`]).

/// Who reads the text: a person or script at the command line, or an agent through MCP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FrontEnd {
    #[default]
    Cli,
    Mcp,
}

/// An option a hint names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    PruneStartup,
    Include,
    IncludeFile,
    Module,
    Exclude,
    ExcludeFile,
    ExcludeModule,
    /// Any of the three exclusions.
    ExcludeAny,
    Focus,
    FocusSubtree,
    MaxDepth,
    Stdlib,
    SitePackages,
    ShowPlumbing,
    Test,
    /// `slice diff`: run A's tests, run B's tests.
    TestA,
    TestB,
    /// The token limit: `--budget` at the command line, `max_tokens` in a tool call.
    Budget,
    /// `trace run`'s: also record compiled extension modules' native functions.
    NativeExt,
    Docstrings,
    NotRun,
    /// The prompt's layout: `--variant` or `variant` (e.g. `T`, the tree only).
    Variant,
}

impl FrontEnd {
    /// The option's name: `--show-plumbing` or `show_plumbing`.
    pub fn name(self, o: Opt) -> &'static str {
        use Opt::*;
        let (cli, mcp) = match o {
            PruneStartup => ("--prune-startup", "prune_startup"),
            Include => ("--include", "include"),
            IncludeFile => ("--include-file", "include_file"),
            Module => ("--module", "module"),
            Exclude => ("--exclude", "exclude"),
            ExcludeFile => ("--exclude-file", "exclude_file"),
            ExcludeModule => ("--exclude-module", "exclude_module"),
            ExcludeAny => ("--exclude*", "exclude*"),
            Focus => ("--focus", "focus"),
            FocusSubtree => ("--focus-subtree", "focus_subtree"),
            MaxDepth => ("--max-depth", "max_depth"),
            Stdlib => ("--stdlib", "stdlib"),
            SitePackages => ("--site-packages", "site_packages"),
            ShowPlumbing => ("--show-plumbing", "show_plumbing"),
            Test => ("--test", "test"),
            TestA => ("--test-a", "test_a"),
            TestB => ("--test-b", "test_b"),
            Budget => ("--budget", "max_tokens"),
            Docstrings => ("--docstrings", "docstrings"),
            NotRun => ("--not-run", "not_run"),
            Variant => ("--variant", "variant"),
            NativeExt => ("--native-ext", "native_ext"),
        };
        match self {
            FrontEnd::Cli => cli,
            FrontEnd::Mcp => mcp,
        }
    }

    /// A switch turned on: `--stdlib` or `stdlib: true`.
    pub fn on(self, o: Opt) -> String {
        match self {
            FrontEnd::Cli => self.name(o).to_string(),
            FrontEnd::Mcp => format!("{}: true", self.name(o)),
        }
    }

    /// A switch turned off: `--no-site-packages` or `site_packages: false`.
    pub fn off(self, o: Opt) -> String {
        match self {
            FrontEnd::Cli => format!("--no-{}", &self.name(o)[2..]),
            FrontEnd::Mcp => format!("{}: false", self.name(o)),
        }
    }

    /// An option with its value: `--test failed` or `test: "failed"` (a string in JSON).
    pub fn set(self, o: Opt, value: &str) -> String {
        match self {
            FrontEnd::Cli => format!("{} {value}", self.name(o)),
            FrontEnd::Mcp => format!("{}: {}", self.name(o), serde_json::Value::from(value)),
        }
    }

    /// Several settings together: `--stdlib --site-packages`, or `stdlib: true, site_packages: true`.
    pub fn join(self, settings: &[String]) -> String {
        settings.join(match self {
            FrontEnd::Cli => " ",
            FrontEnd::Mcp => ", ",
        })
    }

    /// How to list the tests of `traces`: `slice tests t.d` or `tests {"trace": "t.d"}`.
    pub fn list_tests(self, traces: &[String]) -> String {
        match self {
            FrontEnd::Cli => format!("slice tests {}", traces.join(" ")),
            FrontEnd::Mcp => {
                let t = match traces {
                    [one] => serde_json::Value::from(one.as_str()),
                    many => serde_json::Value::from(many.to_vec()),
                };
                // Spaced as the record tool's "Next:" line writes a call.
                format!("tests {{\"trace\": {t}}}")
            }
        }
    }

    /// The command or tool that lists tests, as a sentence names it.
    pub fn tests_command(self) -> &'static str {
        match self {
            FrontEnd::Cli => "`slice tests`",
            FrontEnd::Mcp => "the `tests` tool",
        }
    }

    /// A recording option of `trace run` turned on: `` `trace run --native-ext` `` or
    /// `` the `record` tool with `native_ext: true` ``.
    pub fn record_with(self, o: Opt) -> String {
        match self {
            FrontEnd::Cli => format!("`trace run {}`", self.on(o)),
            FrontEnd::Mcp => format!("the `record` tool with `{}`", self.on(o)),
        }
    }

    /// What records a trace, as "record it again with ..." names it: `` `trace run` `` or
    /// `` the `record` tool ``.
    pub fn recorder(self) -> &'static str {
        match self {
            FrontEnd::Cli => "`trace run`",
            FrontEnd::Mcp => "the `record` tool",
        }
    }

    /// How to record a test run: `trace run -- python -m pytest ...` or the record tool's call.
    pub fn record_tests(self) -> &'static str {
        match self {
            FrontEnd::Cli => "trace run -- python -m pytest ...",
            FrontEnd::Mcp => "record {\"argv\": [\"python3\", \"-m\", \"pytest\", ...]}",
        }
    }
}

/// The remedies of the trace format's errors (a missing or unreadable trace directory, a run
/// that recorded nothing): `trace`'s own words at the command line ([`trace_format::TraceRun`]),
/// the `record` tool's parameters through MCP.
impl trace_format::RecordHint for FrontEnd {
    fn record_into(&self, path: &std::path::Path) -> String {
        match self {
            FrontEnd::Cli => trace_format::TraceRun.record_into(path),
            FrontEnd::Mcp => {
                format!("`record {{\"argv\": [...], \"out\": {}}}`", serde_json::Value::from(path.display().to_string()))
            }
        }
    }

    fn writes_traces(&self) -> String {
        match self {
            FrontEnd::Cli => trace_format::TraceRun.writes_traces(),
            FrontEnd::Mcp => "the `record` tool writes (its answer names it)".into(),
        }
    }

    fn patch_details(&self) -> String {
        match self {
            FrontEnd::Cli => trace_format::TraceRun.patch_details(),
            FrontEnd::Mcp => "each process's `p<pid>/patch.json` in the trace".into(),
        }
    }

    fn with_env(&self, name: &str, value: &str) -> String {
        match self {
            FrontEnd::Cli => trace_format::TraceRun.with_env(name, value),
            FrontEnd::Mcp => {
                format!("the `record` tool with `env: {{{}: {}}}`", serde_json::Value::from(name), serde_json::Value::from(value))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_option_is_spelled_for_its_front_end() {
        let (c, m) = (FrontEnd::Cli, FrontEnd::Mcp);
        assert_eq!((c.on(Opt::ShowPlumbing), m.on(Opt::ShowPlumbing)), ("--show-plumbing".into(), "show_plumbing: true".into()));
        assert_eq!((c.off(Opt::SitePackages), m.off(Opt::SitePackages)), ("--no-site-packages".into(), "site_packages: false".into()));
        assert_eq!((c.set(Opt::Test, "failed"), m.set(Opt::Test, "failed")), ("--test failed".into(), "test: \"failed\"".into()));
        assert_eq!((c.name(Opt::Budget), m.name(Opt::Budget)), ("--budget", "max_tokens"));
        assert_eq!(m.set(Opt::PruneStartup, "a \"b\""), r#"prune_startup: "a \"b\"""#);
        assert_eq!(m.join(&[m.on(Opt::Stdlib), m.on(Opt::SitePackages)]), "stdlib: true, site_packages: true");
        assert_eq!(c.list_tests(&["t.d".into()]), "slice tests t.d");
        assert_eq!(c.record_with(Opt::NativeExt), "`trace run --native-ext`");
        assert_eq!(m.record_with(Opt::NativeExt), "the `record` tool with `native_ext: true`");
        assert_eq!(m.list_tests(&["t.d".into()]), r#"tests {"trace": "t.d"}"#);
        assert_eq!(m.list_tests(&["a.d".into(), "b.d".into()]), r#"tests {"trace": ["a.d","b.d"]}"#);
        assert_eq!((c.recorder(), m.recorder()), ("`trace run`", "the `record` tool"));
    }

    /// The trace format's errors: at the command line in `trace`'s words, byte for byte (its
    /// `Display`); through MCP naming the `record` tool and its parameters, never `trace run`.
    #[test]
    fn trace_format_remedies_are_worded_for_the_front_end() {
        use trace_format::{FormatError, RecordHint};
        let path = std::path::PathBuf::from("x \"y\".d");
        for e in [
            FormatError::NotFound { path: path.clone() },
            FormatError::NotADirectory { path: path.clone() },
            FormatError::NotATrace { path: path.clone() },
        ] {
            assert_eq!(e.message(&FrontEnd::Cli), e.to_string());
            let m = e.message(&FrontEnd::Mcp);
            assert!(!m.contains("trace run") && m.contains("`record"), "{m}");
        }
        let m = FrontEnd::Mcp;
        assert_eq!(
            FormatError::NotFound { path: path.clone() }.message(&m),
            r#"x "y".d: no such trace directory (record one with `record {"argv": [...], "out": "x \"y\".d"}`)"#
        );
        assert_eq!(m.with_env("SLICE_TRACE_PATCH", "all"), r#"the `record` tool with `env: {"SLICE_TRACE_PATCH": "all"}`"#);
        assert_eq!(FrontEnd::Cli.with_env("SLICE_TRACE_PATCH", "all"), "SLICE_TRACE_PATCH=all");
    }

    /// The MCP spelling of every option a tool takes is a field of a tool's schema (or, for
    /// `exclude*`, stands for three of them): no hint names a parameter that does not exist.
    #[test]
    fn every_mcp_name_is_a_tool_parameter() {
        use crate::mcp::params::{DiffParams, PromptParams, RecordParams, TreeParams};
        let mut fields = std::collections::BTreeSet::new();
        for schema in [
            schemars::schema_for!(PromptParams),
            schemars::schema_for!(TreeParams),
            schemars::schema_for!(DiffParams),
            schemars::schema_for!(RecordParams),
        ] {
            let v = serde_json::to_value(schema).unwrap();
            fields.extend(v["properties"].as_object().unwrap().keys().cloned());
        }
        use Opt::*;
        for o in [
            PruneStartup,
            Include,
            IncludeFile,
            Module,
            Exclude,
            ExcludeFile,
            ExcludeModule,
            Focus,
            FocusSubtree,
            MaxDepth,
            Stdlib,
            SitePackages,
            ShowPlumbing,
            Test,
            TestA,
            TestB,
            Budget,
            Docstrings,
            NotRun,
            NativeExt,
        ] {
            let name = FrontEnd::Mcp.name(o);
            assert!(fields.contains(name), "{o:?}: {name} is no tool parameter ({fields:?})");
        }
    }
}
