//! Why nothing is left to show: when start-up pruning and the selection (with its defaults)
//! remove every node of a run, say which rule removed what and which option shows it.

use crate::calltree::CallTree;
use crate::frontend::{FrontEnd, Opt};
use crate::pathclass::{origin, Origin};
use crate::select::Selection;
use std::path::Path;

/// One thread's tree as recorded and after start-up pruning.
pub struct Stage<'a> {
    pub recorded: &'a CallTree,
    pub pruned: &'a CallTree,
}

/// Nodes of a tree whose function comes from `which` (each function classified once).
pub fn count_origin(t: &CallTree, which: Origin) -> usize {
    let is: Vec<bool> = t.funcs.iter().map(|f| origin(f) == which).collect();
    t.nodes[1..].iter().filter(|n| is.get(n.func as usize).copied().unwrap_or(false)).count()
}

/// How [`stdlib_note`] starts (to find it among a trace's notes).
pub const STDLIB_NOTE_START: &str = "The standard library is hidden by default:";

/// The note for a prompt that the default hiding of the standard library left nearly empty
/// (it hid more than four times what is shown), or None. Its counts add up to `after_prune`:
/// the standard library's nodes, those the other rules left out (the test runner, framework
/// plumbing, filters: their own notes say which), and those shown.
pub fn stdlib_note(hidden_stdlib: usize, after_prune: usize, shown: usize, front: FrontEnd) -> Option<String> {
    (hidden_stdlib > 4 * shown).then(|| {
        let other = match after_prune.saturating_sub(hidden_stdlib + shown) {
            0 => String::new(),
            n => format!(", {n} the other notes' rules leave out"),
        };
        format!(
            "{STDLIB_NOTE_START} of the {after_prune} tree nodes left after start-up pruning, {hidden_stdlib} ran its code and are not shown{other}, and {shown} {} shown; `{}` shows its code.",
            if shown == 1 { "is" } else { "are" },
            front.on(Opt::Stdlib)
        )
    })
}

fn shown(stages: &[Stage], sel: &Selection, pruned: bool, cwd: &Path) -> usize {
    stages.iter().map(|s| sel.apply(if pruned { s.pruned } else { s.recorded }, cwd).len()).sum()
}

/// The explanation: what each hiding rule removed, then the options that would show something.
/// `prune_removed`: nodes start-up pruning removed (`prune_option`: how to turn it off, or None
/// when pruning is off). Options are named as `front` spells them.
pub fn explain(stages: &[Stage], sel: &Selection, cwd: &Path, prune_removed: usize, prune_option: Option<&str>, front: FrontEnd) -> String {
    let recorded: usize = stages.iter().map(|s| s.recorded.len()).sum();
    let after_prune: usize = stages.iter().map(|s| s.pruned.len()).sum();
    let mut why = vec![format!("the run recorded {recorded} tree nodes")];
    if prune_removed > 0 {
        if let Some(opt) = prune_option {
            why.push(format!("start-up pruning removed {prune_removed} as work done while importing modules (`{opt}` keeps them)"));
        }
    }
    let stdlib: usize = stages.iter().map(|s| count_origin(s.pruned, Origin::Stdlib)).sum();
    if sel.hide_stdlib && stdlib > 0 {
        why.push(format!(
            "{stdlib} of the {after_prune} left are standard-library functions, hidden by default (`{}` shows them)",
            front.on(Opt::Stdlib)
        ));
    }
    let site: usize = stages.iter().map(|s| count_origin(s.pruned, Origin::SitePackages)).sum();
    if sel.hide_site_packages && site > 0 {
        why.push(format!("{site} are in installed packages (site-packages), hidden by `{}`", front.off(Opt::SitePackages)));
    }
    let mut filters = Vec::new();
    for (on, name) in [
        (!sel.include.is_empty(), Opt::Include),
        (!sel.include_file.is_empty(), Opt::IncludeFile),
        (!sel.include_module.is_empty(), Opt::Module),
        (!sel.exclude.is_empty() || !sel.exclude_file.is_empty() || !sel.exclude_module.is_empty(), Opt::ExcludeAny),
        (!sel.focus.is_empty(), Opt::Focus),
        (sel.max_depth.is_some(), Opt::MaxDepth),
    ] {
        if on {
            filters.push(front.name(name));
        }
    }
    if !filters.is_empty() {
        why.push(format!("the filters {} removed the rest", filters.join(", ")));
    }
    // What would show something: the least change first.
    let mut no_stdlib = sel.clone();
    no_stdlib.hide_stdlib = false;
    let mut no_site = sel.clone();
    no_site.hide_site_packages = false;
    let mut neither = no_stdlib.clone();
    neither.hide_site_packages = false;
    let mut tries: Vec<(String, usize)> = Vec::new();
    let both = front.join(&[front.on(Opt::Stdlib), front.on(Opt::SitePackages)]);
    if sel.hide_stdlib {
        tries.push((format!("`{}`", front.on(Opt::Stdlib)), shown(stages, &no_stdlib, true, cwd)));
    }
    if sel.hide_site_packages {
        tries.push((format!("`{}`", front.on(Opt::SitePackages)), shown(stages, &no_site, true, cwd)));
    }
    if sel.hide_stdlib && sel.hide_site_packages {
        tries.push((format!("`{both}`"), shown(stages, &neither, true, cwd)));
    }
    if let Some(opt) = prune_option.filter(|_| prune_removed > 0) {
        tries.push((format!("`{opt}`"), shown(stages, sel, false, cwd)));
        if sel.hide_stdlib || sel.hide_site_packages {
            tries.push((format!("`{opt}` with `{both}`"), shown(stages, &neither, false, cwd)));
        }
    }
    let fix = match tries.iter().find(|(_, n)| *n > 0) {
        Some((opt, n)) => format!("{opt} shows {n} tree nodes"),
        None if !filters.is_empty() => format!("loosen {}", filters.join(", ")),
        None => "no option shows more: the recorded calls are all hidden or pruned".to_string(),
    };
    format!("{}; {fix}", why.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Ev::C, Ev::R};
    use crate::views::tests::tree_of;

    #[test]
    fn stdlib_only_run_names_the_stdlib_option_with_its_count() {
        let lib = "/usr/lib/python3.11/json/tool.py";
        let t = tree_of(&["main", "load"], &[lib, "/usr/lib/python3.11/json/__init__.py"], &[C(0), C(1), R, R]);
        let sel = Selection { hide_stdlib: true, ..Selection::default() };
        let msg = explain(&[Stage { recorded: &t, pruned: &t }], &sel, Path::new("/w"), 0, Some("--prune-startup off"), FrontEnd::Cli);
        assert_eq!(
            msg,
            "the run recorded 2 tree nodes; 2 of the 2 left are standard-library functions, hidden by default (`--stdlib` shows them); `--stdlib` shows 2 tree nodes"
        );
    }

    /// Through MCP the same explanation names the tools' parameters.
    #[test]
    fn an_agent_is_told_the_parameters() {
        let lib = "/usr/lib/python3.11/json/tool.py";
        let t = tree_of(&["main", "load"], &[lib, "/usr/lib/python3.11/json/__init__.py"], &[C(0), C(1), R, R]);
        let sel = Selection { hide_stdlib: true, hide_site_packages: true, ..Selection::default() };
        let msg = explain(&[Stage { recorded: &t, pruned: &t }], &sel, Path::new("/w"), 3, Some("prune_startup: \"off\""), FrontEnd::Mcp);
        assert_eq!(
            msg,
            "the run recorded 2 tree nodes; start-up pruning removed 3 as work done while importing modules (`prune_startup: \"off\"` keeps them); \
             2 of the 2 left are standard-library functions, hidden by default (`stdlib: true` shows them); `stdlib: true` shows 2 tree nodes"
        );
        assert!(stdlib_note(291, 292, 1, FrontEnd::Mcp).unwrap().ends_with("`stdlib: true` shows its code."));
    }

    #[test]
    fn stdlib_note_only_when_the_stdlib_dwarfs_what_is_shown() {
        assert_eq!(stdlib_note(40, 50, 10, FrontEnd::Cli), None);
        let n = stdlib_note(291, 292, 1, FrontEnd::Cli).unwrap();
        assert_eq!(
            n,
            format!(
                "{STDLIB_NOTE_START} of the 292 tree nodes left after start-up pruning, 291 ran its code and are not shown, and 1 is \
                 shown; `--stdlib` shows its code."
            )
        );
        // The nodes other rules left out (the test runner's) are counted: the three add up.
        let n = stdlib_note(762, 1393, 26, FrontEnd::Cli).unwrap();
        assert!(
            n.contains(
                "of the 1393 tree nodes left after start-up pruning, 762 ran its code and are not shown, 605 the other notes' rules \
                 leave out, and 26 are shown;"
            ),
            "{n}"
        );
    }

    #[test]
    fn filters_that_match_nothing_are_named() {
        let t = tree_of(&["main"], &["/w/app.py"], &[C(0), R]);
        let sel = Selection { focus: vec![regex::Regex::new("^nothing$").unwrap()], ..Selection::default() };
        let msg = explain(&[Stage { recorded: &t, pruned: &t }], &sel, Path::new("/w"), 0, None, FrontEnd::Cli);
        assert_eq!(msg, "the run recorded 1 tree nodes; the filters --focus removed the rest; loosen --focus");
    }
}
