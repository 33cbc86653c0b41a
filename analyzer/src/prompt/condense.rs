//! The default condensing of a prompt's sources, outside the functions closest to the question:
//! code that did not run elided ([`super::notrun`]), long docstrings cut to their summary
//! ([`super::docstring`]).

use super::{docstring, notrun, Docstrings, FuncId, Model, NotRun, SourceState};
use crate::pathclass::Origin;
use crate::source::CodeKind;
use crate::symbols::Language;
use rustc_hash::FxHashSet as HashSet;

/// In the `auto` condensing (docstrings cut to their summary, code that did not run elided),
/// this many functions closest to the question (the ranking by relevance) keep their exact
/// source, and so do the program's own: enough that a function the question is about, when
/// ranked a little lower than it should be, is not condensed, few enough that condensing still
/// shortens the prompt (how it was chosen: `docs/performance.md`, "Figures behind the code's choices").
pub const KEPT_EXACT_TOP: usize = 25;
// The CLI's help texts (`--docstrings`, `--not-run`) say "25".
const _: () = assert!(KEPT_EXACT_TOP == 25);

impl Model {
    /// [`Model::shorten_docstrings`], with the prompt's note saying what was cut and how to see
    /// it whole. Warn about [`Model::notes`] before: this note is for the prompt only.
    pub fn apply_docstrings(&mut self, mode: Docstrings) {
        let cut = self.shorten_docstrings(mode);
        if let Some(n) = docstring::note(mode, cut, self.condensed_whose(), self.front) {
            self.notes.push(n);
        }
    }

    /// Cut long docstrings to their summary (see [`docstring`]): every one with
    /// [`Docstrings::Short`]; with [`Docstrings::Auto`] those of installed packages' functions
    /// outside the [`KEPT_EXACT_TOP`] closest to the question. Call it after
    /// [`Model::build`]: relevance was computed on the whole code, so a docstring's words still
    /// count. Returns how many docstrings were cut.
    pub fn shorten_docstrings(&mut self, mode: Docstrings) -> usize {
        self.shorten_docstrings_top(mode, KEPT_EXACT_TOP)
    }

    /// Which functions `auto` condensing reaches, for its notes.
    pub fn condensed_whose(&self) -> &'static str {
        if self.tests_shown {
            "functions outside the test files"
        } else {
            "installed packages' functions"
        }
    }

    /// The functions that `auto` condensing (docstrings, code that did not run) leaves exact:
    /// the `top` closest to the question and the program's own. In a test's prompt the code
    /// under test is often the program itself, all of which the test's set-up may run (a
    /// Markdown parser built afresh by every test): there the program's functions are kept
    /// exact only in the test files (the tests, their fixtures) and among the `top`, which the
    /// spectrum and the failure's traceback rank first.
    fn kept_exact(&self, top: usize) -> HashSet<FuncId> {
        let mut k: HashSet<FuncId> = self.ranking().into_iter().take(top).collect();
        let tests = self.tests_shown;
        k.extend(
            self.funcs
                .iter()
                .filter(|(_, f)| f.origin == Origin::Program && (!tests || crate::plumbing::is_test_file(std::path::Path::new(&f.file))))
                .map(|(id, _)| id),
        );
        k
    }

    /// The condensing options in their order: code that did not run (computed on the exact
    /// code), then docstrings; each adds its note to the prompt.
    pub fn condense(&mut self, not_run: NotRun, docstrings: Docstrings) {
        self.apply_not_run(not_run);
        self.apply_docstrings(docstrings);
    }

    /// [`Model::elide_not_run`], with the prompt's note saying what was elided and how to see
    /// it. Call it before [`Model::apply_docstrings`] (the elision was computed on the exact
    /// code).
    pub fn apply_not_run(&mut self, mode: NotRun) {
        let (funcs, lines, native) = self.elide_not_run_native(mode);
        if let Some(mut n) = notrun::note(mode, funcs, lines, self.condensed_whose(), self.front) {
            if native {
                n.push_str(" In native code (C, C++, Rust) a run is marked `// ...  N lines not run`.");
            }
            self.notes.push(n);
        }
    }

    /// Elide the statements that did not run (see [`notrun`]): in every function with
    /// [`NotRun::Hide`]; with [`NotRun::Auto`] in installed packages' functions outside the
    /// [`KEPT_EXACT_TOP`] closest to the question. Returns (functions, lines) elided.
    pub fn elide_not_run(&mut self, mode: NotRun) -> (usize, usize) {
        let (funcs, lines, _) = self.elide_not_run_native(mode);
        (funcs, lines)
    }

    /// [`Model::elide_not_run`], and whether a native function was among those condensed.
    fn elide_not_run_native(&mut self, mode: NotRun) -> (usize, usize, bool) {
        let keep: HashSet<FuncId> = match mode {
            NotRun::Show => {
                // Exact source everywhere, under a budget too (no [`super::Level::Ran`]).
                for f in self.funcs.values_mut() {
                    f.not_run = None;
                }
                return (0, 0, false);
            }
            NotRun::Hide => HashSet::default(),
            NotRun::Auto => self.kept_exact(KEPT_EXACT_TOP),
        };
        let (mut funcs, mut lines, mut native) = (0, 0, false);
        for (i, f) in self.funcs.values_mut().enumerate() {
            // A function kept exact keeps its condensed form for the budget
            // ([`super::Level::Ran`]: what it shows of a function whose whole source does not fit).
            if keep.contains(&FuncId(i as u32)) {
                continue;
            }
            let Some((code, n)) = f.not_run.take() else { continue };
            if let SourceState::Code(e) = &mut f.source {
                e.code = code;
                // A value only the elided code read is not shown either.
                crate::python::values::still_read(&e.code, &mut f.values);
                funcs += 1;
                lines += n;
                native |= f.language == Language::Native;
            }
        }
        (funcs, lines, native)
    }

    /// [`Model::shorten_docstrings`] with the `top` closest functions kept whole in `auto`.
    pub(super) fn shorten_docstrings_top(&mut self, mode: Docstrings, top: usize) -> usize {
        let keep: HashSet<FuncId> = match mode {
            Docstrings::Whole => return 0,
            Docstrings::Short => HashSet::default(),
            Docstrings::Auto => self.kept_exact(top),
        };
        let mut cut = 0;
        for (_, f) in self.funcs.values_mut().enumerate().filter(|(i, _)| !keep.contains(&FuncId(*i as u32))) {
            if let SourceState::Code(e) = &mut f.source {
                if f.language == Language::Python && e.kind == CodeKind::Function {
                    if let Some(short) = docstring::trim_docstring(&e.code) {
                        e.code = short;
                        cut += 1;
                    }
                }
            }
        }
        cut
    }
}
