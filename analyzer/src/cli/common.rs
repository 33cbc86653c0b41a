//! Options shared by the `slice` subcommands that read traces and show trees.

use crate::analysis::{Options, PruneMode};
use crate::frontend::{FrontEnd, Opt};
use crate::plumbing::Plumbing;
use crate::prompt::render::Format;
use crate::prompt::{Docstrings, Layout, NotRun, Order, Variant};
use crate::select::{compile, Selection};
use crate::tokens::Tokenizer;
use clap::Args;
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::PathBuf;

/// A usage error found after parsing (bad regex, conflicting options): exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The selection options that read the same on the command line and in an MCP call, defined
/// once: flattened into [`SelectArgs`] (clap) and into the MCP tools' `Selection` (serde, with
/// the JSON schema an agent reads), so neither can gain or lose one alone. Each doc comment is
/// the option's `--help`; its schema description (`#[schemars(description)]`) says the same in
/// fewer words, since every agent session pays for the tool list in tokens before its first
/// call (`mcp::params::input_schema`). In JSON every field may be left out or null (its default).
#[derive(Debug, Clone, Default, Args, Deserialize, JsonSchema)]
#[command(next_help_heading = "Selection")]
#[serde(default)]
pub struct SelectFields {
    /// Start-up pruning: "auto" (Python: drop the work done while importing modules; the
    /// default), "off", or a baseline trace directory (a run that only starts and exits):
    /// leaves that the baseline also reached at the same path are removed, repeatedly.
    #[arg(long, value_name = "auto|off|BASELINE.d", default_value = "auto")]
    #[schemars(description = "\"auto\" (default: drop Python import-time work), \"off\", or a baseline run\'s trace directory.")]
    pub prune_startup: Option<String>,
    /// Show only functions whose qualified name matches one of these regexes (others are
    /// hidden, their callees move up).
    #[arg(long, value_name = "REGEX")]
    #[serde(deserialize_with = "null_as_default")]
    #[schemars(with = "Option<Vec<String>>")]
    #[schemars(description = "Regexes over qualified names: show only matches.")]
    pub include: Vec<String>,
    /// Drop functions whose qualified name matches, with everything they called.
    #[arg(long, value_name = "REGEX")]
    #[serde(deserialize_with = "null_as_default")]
    #[schemars(with = "Option<Vec<String>>")]
    #[schemars(description = "Regexes over qualified names: drop matches and their calls.")]
    pub exclude: Vec<String>,
    /// Show only functions whose source path matches (hidden ones' callees move up).
    #[arg(long, value_name = "REGEX")]
    #[serde(deserialize_with = "null_as_default")]
    #[schemars(with = "Option<Vec<String>>")]
    #[schemars(description = "Regexes over source paths: show only matches.")]
    pub include_file: Vec<String>,
    /// Drop functions whose source path matches, with everything they called.
    #[arg(long, value_name = "REGEX")]
    #[serde(deserialize_with = "null_as_default")]
    #[schemars(with = "Option<Vec<String>>")]
    #[schemars(description = "Regexes over source paths: drop matches and their calls.")]
    pub exclude_file: Vec<String>,
    /// Show only functions whose module matches: the dotted Python module (`rich.table`) or
    /// the native object's file name (`libfoo.so`).
    #[arg(long = "module", value_name = "REGEX")]
    #[serde(rename = "module", deserialize_with = "null_as_default")]
    #[schemars(rename = "module", with = "Option<Vec<String>>")]
    #[schemars(description = "Regexes over modules (`rich.table`, `libfoo.so`): show only matches.")]
    pub include_module: Vec<String>,
    /// Drop functions whose module matches, with everything they called.
    #[arg(long, value_name = "REGEX")]
    #[serde(deserialize_with = "null_as_default")]
    #[schemars(with = "Option<Vec<String>>")]
    #[schemars(description = "Regexes over modules: drop matches and their calls.")]
    pub exclude_module: Vec<String>,
    /// Keep only the call paths from the root to functions whose qualified name matches.
    #[arg(long, value_name = "REGEX")]
    #[serde(deserialize_with = "null_as_default")]
    #[schemars(with = "Option<Vec<String>>")]
    #[schemars(description = "Regexes over qualified names: keep only the call paths to matches.")]
    pub focus: Vec<String>,
    /// With focus: also keep everything the matching functions called.
    #[arg(long, requires = "focus")]
    #[serde(deserialize_with = "null_as_default")]
    #[schemars(with = "Option<bool>")]
    #[schemars(description = "With focus: also keep what the matches called.")]
    pub focus_subtree: bool,
    /// Drop calls deeper than this many levels (the first function is level 1).
    #[arg(long, value_name = "N")]
    #[serde(deserialize_with = "depth")]
    #[schemars(with = "Option<u64>")]
    #[schemars(description = "Drop calls below this depth (1: the first function).")]
    pub max_depth: Option<u32>,
    /// Prompts: show command-line frameworks and plugin managers (click, typer, docopt,
    /// pluggy, ...) whole. By default their internals are collapsed: tree lines on the path to
    /// the program, no sources (unless the question or a filter names the package).
    #[arg(long)]
    #[serde(deserialize_with = "null_as_default")]
    #[schemars(with = "Option<bool>")]
    #[schemars(description = "Show frameworks (click, pluggy, test runners, ...) whole instead of collapsed.")]
    pub show_plumbing: bool,
    /// Prompts: also collapse these installed packages as framework plumbing.
    #[arg(long, value_name = "PACKAGE")]
    #[serde(deserialize_with = "null_as_default")]
    #[schemars(with = "Option<Vec<String>>")]
    #[schemars(description = "More installed packages to collapse as plumbing.")]
    pub plumbing: Vec<String>,
    /// Show recorded tests instead of the whole run (a run of pytest or unittest): a test id
    /// (pytest's node id, unittest's id), its end ("TestClass::test_name", a parametrized
    /// test's name for all its instances), a glob ("tests/test_x.py::*", "test_sub*"), or "failed" for
    /// every failing test. Each test's tree starts at the test, through its fixtures; a prompt
    /// starts with its failure. `slice tests TRACE` (the tests tool) lists them.
    #[arg(long, value_name = "ID|GLOB|failed")]
    #[schemars(
        description = "Only these recorded tests (an id, its end, a glob, or \"failed\"): each from the test through its fixtures, its failure first."
    )]
    pub test: Option<String>,
}

/// A JSON null as the field's default (an agent's way of leaving an option out).
fn null_as_default<'de, D: serde::Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A depth from JSON (any unsigned integer) as the analyzer's u32: any larger depth means
/// "everything".
fn depth<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    Ok(Option::<u64>::deserialize(d)?.map(clamp_depth))
}

/// A depth from an agent, as the analyzer's u32 (any larger depth means "everything").
pub fn clamp_depth(d: u64) -> u32 {
    u32::try_from(d).unwrap_or(u32::MAX)
}

/// Start-up pruning and selection: which part of the recorded tree to show. The options an
/// MCP call spells differently (one optional boolean for each pair of switches) are here; the
/// rest are [`SelectFields`].
#[derive(Debug, Clone, Default, Args)]
pub struct SelectArgs {
    #[command(flatten)]
    pub fields: SelectFields,
    /// Show standard-library code (hidden by default in prompts: models know it, and it is
    /// most of the calls of any Python program; program code it calls back stays visible).
    #[arg(long, overrides_with = "no_stdlib", help_heading = "Selection")]
    pub stdlib: bool,
    /// Hide standard-library code.
    #[arg(long, overrides_with = "stdlib", help_heading = "Selection")]
    pub no_stdlib: bool,
    /// Show installed packages (site-packages/dist-packages; the default).
    #[arg(long, overrides_with = "no_site_packages", help_heading = "Selection")]
    pub site_packages: bool,
    /// Hide installed packages (program code they call back stays visible; a Python program
    /// that is itself installed keeps its own package: the one its entry script calls; a Rust
    /// program built in cargo's registry by `cargo install`, the package of its `main` and those
    /// of its repository).
    #[arg(long, overrides_with = "site_packages", help_heading = "Selection")]
    pub no_site_packages: bool,
}

impl SelectArgs {
    /// Analysis options. `hide_stdlib_default`: whether the standard library is hidden
    /// when neither --stdlib nor --no-stdlib is given.
    pub fn options(&self, hide_stdlib_default: bool) -> Result<Options, UsageError> {
        self.options_for(FrontEnd::Cli, hide_stdlib_default)
    }

    /// [`SelectArgs::options`] for a front end: its errors, and the notes and errors of what
    /// the options prepare, name the options as `front` spells them.
    pub fn options_for(&self, front: FrontEnd, hide_stdlib_default: bool) -> Result<Options, UsageError> {
        let f = &self.fields;
        let prune = match f.prune_startup.as_deref().unwrap_or("auto") {
            "auto" => PruneMode::Auto,
            "off" | "none" => PruneMode::Off,
            dir => PruneMode::Baseline(vec![PathBuf::from(dir)]),
        };
        let c = |opt: Opt, v: &[String]| compile(front.name(opt), v).map_err(UsageError);
        let selection = Selection {
            hide_stdlib: if self.stdlib {
                false
            } else if self.no_stdlib {
                true
            } else {
                hide_stdlib_default
            },
            hide_site_packages: self.no_site_packages,
            program_packages: Vec::new(),
            include: c(Opt::Include, &f.include)?,
            include_file: c(Opt::IncludeFile, &f.include_file)?,
            include_module: c(Opt::Module, &f.include_module)?,
            exclude: c(Opt::Exclude, &f.exclude)?,
            exclude_file: c(Opt::ExcludeFile, &f.exclude_file)?,
            exclude_module: c(Opt::ExcludeModule, &f.exclude_module)?,
            focus: c(Opt::Focus, &f.focus)?,
            focus_subtree: f.focus_subtree,
            max_depth: f.max_depth,
        };
        let tests = match &f.test {
            Some(t) => Some(crate::testrun::TestFilter::parse(t).map_err(UsageError)?),
            None => None,
        };
        // A test's tree in a view starts at the test, as in a prompt: the runner's own
        // protocol around it is spliced out unless --show-plumbing (a whole run's view shows
        // everything that ran).
        let plumbing = if tests.is_some() && !f.show_plumbing { Plumbing::test_runners_in_tests(&f.plumbing) } else { Plumbing::default() };
        Ok(Options {
            prune,
            selection,
            plumbing,
            tests,
            hints: Default::default(),
            front,
            max_tests: None,
            question_words: Default::default(),
        })
    }

    /// Options for a prompt about `question`: [`SelectArgs::options`] with framework plumbing
    /// collapsed unless `--show-plumbing`.
    pub fn prompt_options(&self, question: &str) -> Result<Options, UsageError> {
        self.prompt_options_for(FrontEnd::Cli, question)
    }

    /// [`SelectArgs::prompt_options`] for a front end ([`SelectArgs::options_for`]).
    pub fn prompt_options_for(&self, front: FrontEnd, question: &str) -> Result<Options, UsageError> {
        let mut o = self.options_for(front, true)?;
        o.max_tests = Some(crate::analysis::PROMPT_MAX_TESTS);
        o.question_words = crate::testrun::id_words(question);
        if !self.fields.show_plumbing {
            o.plumbing = Plumbing::for_prompt(question, &self.fields.plumbing, &o.selection);
        }
        Ok(o)
    }
}

/// Source order option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OrderArg {
    Call,
    Sorted,
}

/// What the prompt contains and how it is written.
#[derive(Debug, Clone, Args)]
pub struct PromptArgs {
    /// One of the method's exact prompt variants: full (tree + sources in call order,
    /// repeated where a function repeats), A (tree + sources sorted, once each), C (sources in
    /// call order, no tree), CA (sources sorted, no tree), T (tree only). Without it: the tree,
    /// then each function's source once, in call order.
    #[arg(long, value_name = "full|A|C|CA|T", help_heading = "Prompt layout")]
    pub variant: Option<Variant>,
    /// Include the call tree (overrides the variant).
    #[arg(long, overrides_with = "no_tree", help_heading = "Prompt layout")]
    pub tree: bool,
    /// Leave the call tree out (overrides the variant).
    #[arg(long, overrides_with = "tree", help_heading = "Prompt layout")]
    pub no_tree: bool,
    /// Include the sources (overrides the variant).
    #[arg(long, overrides_with = "no_sources", help_heading = "Prompt layout")]
    pub sources: bool,
    /// Leave the sources out (overrides the variant).
    #[arg(long, overrides_with = "sources", help_heading = "Prompt layout")]
    pub no_sources: bool,
    /// Order of the sources: call (tree pre-order) or sorted (by qualified name, once each).
    #[arg(long, value_enum, help_heading = "Prompt layout")]
    pub order: Option<OrderArg>,
    /// In call order, repeat a function's source wherever it appears in the tree.
    #[arg(long, overrides_with = "dedupe", help_heading = "Prompt layout")]
    pub repeat: bool,
    /// Show each function's source once.
    #[arg(long, overrides_with = "repeat", help_heading = "Prompt layout")]
    pub dedupe: bool,
    /// Which Python docstrings longer than 3 lines are cut to their first paragraph (the cut
    /// is marked in the code): auto (the default: those of installed packages' functions
    /// outside the 25 closest to the question), whole (none: each function's exact source),
    /// short (all: about a sixth of a typical library's source tokens).
    #[arg(long, value_enum, value_name = "auto|whole|short", help_heading = "Prompt layout")]
    pub docstrings: Option<Docstrings>,
    /// The same as --docstrings short.
    #[arg(long, conflicts_with = "docstrings", help_heading = "Prompt layout")]
    pub short_docstrings: bool,
    /// Where statements that this run never executed (branches not taken, the rest of a
    /// function after an early return) are elided, each run marked `...  # N lines not run`:
    /// auto (the default: in installed packages' functions outside the 25 closest to the
    /// question), show (nowhere: each function's exact source), hide (everywhere). Needs a
    /// trace with line data (`trace run` records it on CPython 3.12+, and with --lines before).
    #[arg(long, value_enum, value_name = "auto|show|hide", help_heading = "Prompt layout")]
    pub not_run: Option<NotRun>,
    /// Print the functions in the order the budget keeps them (most relevant first, with their
    /// scores) on standard error: the first N, or all with 0.
    #[arg(long, value_name = "N", help_heading = "Output")]
    pub show_ranking: Option<usize>,
    /// Output format: markdown, xml (XML-tagged sections) or json (docs/slice-json.md).
    #[arg(long, value_name = "markdown|xml|json", default_value = "markdown", help_heading = "Output")]
    pub format: Format,
    /// Use this minijinja template instead of the default of the format (see prompts/).
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub template: Option<PathBuf>,
    /// Tokenizer for counts and --budget: o200k_base (GPT-4o and later) or cl100k_base (GPT-4).
    #[arg(long, value_name = "NAME", default_value = "o200k_base", help_heading = "Output")]
    pub tokenizer: Tokenizer,
    /// Guarantee a prompt of at most N tokens: bodies are elided, then sources dropped, least
    /// relevant first, then the tree is cut (all marked and listed); see docs/prompts.md.
    /// Without it a prompt is held to 100000 tokens, a test's prompt (--test) to 20000
    /// (--no-budget: no limit); a prompt that fits is unchanged.
    #[arg(long, value_name = "N", help_heading = "Output")]
    pub budget: Option<usize>,
    /// No budget, not even the default one: every function that ran, whole (or condensed as
    /// --docstrings and --not-run say).
    #[arg(long, conflicts_with = "budget", help_heading = "Output")]
    pub no_budget: bool,
}

impl PromptArgs {
    /// The budget of the prompt: `--budget`, else the model's default
    /// ([`crate::prompt::Model::default_budget`], noted in the model so that the prompt says
    /// it is a default), none with `--no-budget`.
    pub fn apply_budget(&self, model: &mut crate::prompt::Model) -> Option<usize> {
        model.budget_by_default = !self.no_budget && self.budget.is_none();
        if self.no_budget {
            None
        } else {
            Some(self.budget.unwrap_or_else(|| model.default_budget()))
        }
    }
}

impl PromptArgs {
    /// The layout: the variant's, with the long options applied on top.
    pub fn layout(&self) -> Result<Layout, UsageError> {
        let mut l = self.variant.map_or(Layout::DEFAULT, Variant::layout);
        if self.tree {
            l.tree = true;
        }
        if self.no_tree {
            l.tree = false;
        }
        if self.sources {
            l.sources = true;
        }
        if self.no_sources {
            l.sources = false;
        }
        if let Some(o) = self.order {
            l.order = match o {
                OrderArg::Call => Order::Call,
                OrderArg::Sorted => Order::Sorted,
            };
            if l.order == Order::Sorted {
                l.repeat = false;
            }
        }
        if self.repeat {
            if l.order == Order::Sorted {
                return Err(UsageError("--repeat needs call order: sorted sources are listed once each (use --order call)".into()));
            }
            l.repeat = true;
        }
        if self.dedupe {
            l.repeat = false;
        }
        if !l.tree && !l.sources {
            return Err(UsageError("nothing to show: --no-tree together with --no-sources (or variant T with --no-tree)".into()));
        }
        Ok(l)
    }

    /// Which docstrings to cut (`auto` unless an option says otherwise).
    pub fn docstrings(&self) -> Docstrings {
        if self.short_docstrings {
            Docstrings::Short
        } else {
            self.docstrings.unwrap_or_default()
        }
    }

    /// Where code that did not run is elided (`auto` unless an option says otherwise).
    pub fn not_run(&self) -> NotRun {
        self.not_run.unwrap_or_default()
    }

    /// The user template, read.
    pub fn template(&self) -> anyhow::Result<Option<(String, String)>> {
        use anyhow::Context;
        match &self.template {
            None => Ok(None),
            Some(p) => {
                let s = std::fs::read_to_string(p).with_context(|| format!("{}: cannot read the template", p.display()))?;
                Ok(Some((p.display().to_string(), s)))
            }
        }
    }
}
