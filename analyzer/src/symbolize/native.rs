//! Native symbolization: DWARF through `object`/`gimli`/`addr2line`.
//! (Being written: for now resolves to the dynamic symbol name only.)

use crate::symbols::{Function, Language};

/// One native function address to resolve.
#[derive(Debug, Clone)]
pub struct NativeAddr {
    pub id: u32,
    pub addr: u64,
    pub module: String,
    pub base: u64,
    pub symbol: Option<String>,
}

/// Resolve addresses to functions, in the same order. Never fails: what cannot be
/// resolved degrades to a symbol name or an address, with a warning.
pub fn resolve(addrs: &[NativeAddr]) -> (Vec<Function>, Vec<String>) {
    let funcs = addrs
        .iter()
        .map(|a| {
            let name = a.symbol.clone().unwrap_or_else(|| format!("{:#x}", a.addr));
            Function {
                language: Language::Native,
                name: name.clone(),
                qualname: name,
                file: None,
                first_line: None,
                last_line: None,
                object: Some(a.module.clone()),
            }
        })
        .collect();
    (funcs, Vec::new())
}
