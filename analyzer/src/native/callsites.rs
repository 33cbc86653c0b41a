//! Calls made by inlined code (docs/native-recording.md, "Calls made by inlined code"): a
//! recorded call from `f` to `g` goes under the inlined function whose code made it, when the
//! machine code says which one that is.
//!
//! Entry patching records that `main` called `hexyl::Printer::print_all`, not that the call
//! was made by `hexyl::run`, which the compiler inlined into `main`: without more, the tree
//! shows `print_all` beside the `hexyl::run [inlined]` node, not under it. The call
//! instructions of `f`'s code ([`symbolize::calls`]) that target `g` directly each lie in the
//! address ranges of a chain of inlined instances (none: `f`'s own code), which the
//! symbolizer gives like an inline probe's. When every direct call site of `g` in `f` lies in
//! the same chain, every call of `g` from `f` was made by that chain's innermost function, and
//! the fold opens the chain around each such call ([`crate::symbols::ResolvedProcess::wraps`]);
//! the chain's functions ran, since the call did. When the sites disagree (one in inlined
//! code, one in `f`'s own; or in two different inlined functions), which one made a given
//! call cannot be told from the call, and the call stays beside them, as it did. Calls
//! through a pointer name no target in the code and stay beside too; and when `f`'s code takes
//! `g`'s address (`lea rcx, [rip+g]` before `qsort(.., g)`, a dispatch table filled in `f`), a
//! recorded call from `f` to `g` may have been made through that pointer, from `f`'s own code
//! or from a library that is not recorded, so no call of `g` from `f` is wrapped.

use super::resolve::{NativeAddr, WithChain};
use crate::symbols::Function;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use symbolize::functions::ObjectFile;

/// At most this many call sites are resolved per process (a program's recorded functions make
/// a few per function; a crafted trace could name millions).
pub const MAX_SITES: usize = 200_000;

/// The direct call sites between recorded native functions of one object, for
/// [`crate::native::resolve::resolve_chains`] to resolve beside the functions.
#[derive(Debug, Default)]
pub struct Sites {
    /// One address per site (an inline probe's kind: the chain of inlined functions there).
    pub addrs: Vec<NativeAddr>,
    /// For each of `addrs`: (caller, callee), as the `id`s of the functions in `native`.
    pub pairs: Vec<(u32, u32)>,
    /// The (caller, callee) pairs where the caller's code takes the callee's address: a call
    /// through the pointer may come from anywhere.
    pub taken: BTreeSet<(u32, u32)>,
}

/// The sites, in the code of the functions of `native` (not its inline probes), of the direct
/// calls to other functions of `native` in the same object.
pub fn find(native: &[NativeAddr]) -> Sites {
    let mut by_module: BTreeMap<&str, Vec<&NativeAddr>> = BTreeMap::new();
    for a in native.iter().filter(|a| !a.inlined && !a.module.is_empty()) {
        by_module.entry(a.module.as_str()).or_default().push(a);
    }
    let mut out = Sites::default();
    for (module, funcs) in by_module {
        let Ok(obj) = ObjectFile::open(Path::new(module)) else { continue };
        let link: Vec<u64> = funcs.iter().map(|a| obj.link_address(a.addr, a.base)).collect();
        let mut by_entry: HashMap<u64, u32> = HashMap::new();
        for (&l, a) in link.iter().zip(&funcs) {
            by_entry.entry(l).or_insert(a.id);
        }
        for (a, calls) in funcs.iter().zip(obj.direct_calls(&link)) {
            for c in calls {
                let Some(&callee) = by_entry.get(&c.target) else { continue };
                if c.taken {
                    out.taken.insert((a.id, callee));
                    continue;
                }
                if out.addrs.len() >= MAX_SITES {
                    return out;
                }
                out.addrs.push(NativeAddr {
                    id: a.id,
                    addr: obj.run_address(c.site, a.base),
                    module: a.module.clone(),
                    base: a.base,
                    symbol: None,
                    inlined: true,
                });
                out.pairs.push((a.id, callee));
            }
        }
    }
    out
}

/// For each (caller, callee) of `pairs` whose sites all lie in inlined code of one chain
/// (`resolved`, one per site): the chain they share (its innermost function, the ones around it
/// outermost first). Sites in different inlined functions share the outer levels they are all
/// in (`Gitignore::matched`, inlined at three places of `matched_ignore`, some inside its
/// closures: the calls were made by `matched_ignore`'s code); a pair with a site in the
/// caller's own code, or whose sites share no level, has none. `funcs`: the functions, by the
/// ids of `pairs` (a site in no inlined code resolves to its caller, as a probe's address
/// there would). A pair of `taken` (the caller's code takes the callee's address) has none: a
/// call through that pointer may have come from the caller's own code.
pub fn wraps(
    pairs: &[(u32, u32)],
    resolved: Vec<WithChain>,
    funcs: &[Function],
    taken: &BTreeSet<(u32, u32)>,
) -> BTreeMap<(u32, u32), WithChain> {
    // Per pair, the levels every site so far lies in, outermost first.
    let mut seen: BTreeMap<(u32, u32), Vec<Function>> = BTreeMap::new();
    for (&pair, chain) in pairs.iter().zip(resolved) {
        let (inner, outer) = shown_levels(chain);
        let own = |f: &Function| f.qualname == inner.qualname && f.file == inner.file && f.first_line == inner.first_line;
        let inlined = inner.inlined && !(outer.is_empty() && funcs.get(pair.0 as usize).is_some_and(own));
        let levels = if inlined { outer.into_iter().chain([inner]).collect() } else { Vec::new() };
        match seen.get_mut(&pair) {
            None => {
                seen.insert(pair, levels);
            }
            Some(known) => {
                let shared = known.iter().zip(&levels).take_while(|(a, b)| a == b).count();
                known.truncate(shared);
            }
        }
    }
    seen.into_iter()
        .filter(|(pair, _)| !taken.contains(pair))
        .filter_map(|(pair, mut levels)| {
            let inner = levels.pop()?;
            Some((pair, (inner, levels)))
        })
        .collect()
}

/// A chain without the levels a tree does not show: inlined code of the standard library (no
/// inline probe is planted there either, and `--stdlib` would show one node per instance of
/// a function the line table alone names) and instances no DIE names a file for (the tree could
/// show only a bare name, `main [inlined]` inside `main`). When none is left, the call site's
/// own function, not inlined.
fn shown_levels((inner, mut outer): WithChain) -> WithChain {
    if !inner.inlined {
        return (inner, outer);
    }
    outer.retain(shown_level);
    if shown_level(&inner) {
        return (inner, outer);
    }
    match outer.pop() {
        Some(f) => (f, outer),
        None => (Function { inlined: false, ..inner }, outer),
    }
}

/// Whether a level of a chain of inlined functions is one the tree shows: it names a file and
/// is not the standard library's inlined code. One rule for the chains around calls made by
/// inlined code ([`wraps`]) and for the levels around an inline probe's function
/// ([`crate::symbols::resolve_process_with_inlined`]), so that `--stdlib` shows one node for a lambda that
/// both a probe and a wrapped call name (`std::for_each`'s inlined frame kept by one of them
/// gave two).
pub fn shown_level(f: &Function) -> bool {
    f.file.is_some() && crate::pathclass::origin(f) != crate::pathclass::Origin::Stdlib
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::Language;

    fn func(name: &str, inlined: bool) -> Function {
        Function {
            language: Language::Native,
            name: name.to_string(),
            qualname: name.to_string(),
            file: Some("a.c".into()),
            first_line: Some(1),
            last_line: Some(9),
            object: Some("/bin/a".into()),
            program_library: false,
            program_crate: false,
            dependency_crate: false,
            std_dependency: false,
            rust_symbol: false,
            made_in: None,
            inlined,
        }
    }

    #[test]
    fn a_call_goes_under_the_inlined_code_that_every_site_of_it_lies_in() {
        let run = || (func("run", true), vec![]);
        let nested = || (func("parse", true), vec![func("run", true)]);
        // A site in main's own code resolves to main, as a probe's address there would.
        let own = || (func("main", true), vec![]);
        let funcs = vec![func("x", false), func("main", false)];
        let std = || {
            let mut f = func("core::iter::Iterator::next", true);
            f.file = Some("/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/iter/traits/iterator.rs".into());
            f
        };
        let unnamed = || {
            let mut f = func("main", true);
            f.file = None;
            f
        };
        let pairs = [(1, 2), (1, 2), (1, 3), (1, 3), (1, 4), (1, 4), (1, 5), (1, 6), (1, 6), (1, 7), (1, 8), (1, 8), (1, 9)];
        let resolved = vec![
            run(),
            run(),
            run(),
            own(),
            run(),
            nested(),
            nested(),
            // In `run` inside a level that names no file, and in that level alone; in the
            // standard library's code inlined into `run`.
            (func("run", true), vec![unnamed()]),
            (std(), vec![unnamed(), func("run", true)]),
            (std(), vec![unnamed()]),
            run(),
            (func("step", true), vec![]),
            run(),
        ];
        // main's code also takes the address of 9 (`qsort(.., cmp)`, `fp = report`): a call of 9
        // through the pointer may come from main's own code.
        let taken = BTreeSet::from([(1, 9)]);
        let got = wraps(&pairs, resolved, &funcs, &taken);
        // (1, 2): both sites in `run`; (1, 3): one in main's own code; (1, 4): one in `run`,
        // one in `parse` inside `run`: `run` made the calls; (1, 5): one site, in `parse`
        // inlined into `run`; (1, 6): both in `run` once the unnamed level is left out; (1, 7):
        // in nothing shown; (1, 8): in `run` and in `step`, which share no level; (1, 9): its
        // one site is in `run`, but main takes its address.
        assert_eq!(got.keys().copied().collect::<Vec<_>>(), vec![(1, 2), (1, 4), (1, 5), (1, 6)]);
        assert_eq!(got[&(1, 4)], run());
        assert_eq!(got[&(1, 6)], run());
        assert_eq!(got[&(1, 2)], run());
        assert_eq!(got[&(1, 5)], nested());
    }
}
