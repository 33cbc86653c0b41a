//! Python's own rules, apart from the language-neutral pipeline (fold, calltree, prune, select,
//! render): where its code comes from (`paths`), which modules are its standard library
//! (`stdlib`), the module-level values a shown function reads (`values`), packages that
//! ran as compiled extension code (`compiled`), and mypyc's compiled functions mapped back to
//! their Python source (`mypyc`).

pub mod compiled;
pub mod mypyc;
pub mod paths;
pub mod stdlib;
pub mod values;
