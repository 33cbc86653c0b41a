//! Where a function's code comes from: the program, the standard library, or installed
//! third-party packages; and the module name used by `--module`.

use crate::native::paths::{native_name_origin, native_origin};
use crate::python::paths::{dotted, made_by_stdlib, package_module, packages_dir_end, python_origin, stdlib_dir_end};
use crate::symbols::{Function, Language};
use std::path::Path;

/// Origin of a function's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The program's own code (anything not below).
    Program,
    /// Python's standard library (`.../lib/python3.X/...` outside `site-packages`, frozen
    /// modules), or for native code the C/C++ runtime (`/usr/include/...`, system libraries)
    /// and Rust's `std`/`core`/`alloc` (see [`native_origin`]).
    Stdlib,
    /// Installed packages: `site-packages` or `dist-packages`; for Rust, cargo's registry and
    /// git checkouts.
    SitePackages,
}

/// Origin of a function.
pub fn origin(f: &Function) -> Origin {
    let file = f.file.as_deref().map(|p| p.to_string_lossy().into_owned());
    match f.language {
        Language::Python if made_by_stdlib(f) => Origin::Stdlib,
        Language::Python => file.as_deref().map(python_origin).unwrap_or(Origin::Program),
        // A C function of an installed package (mypyc-compiled black's `main`, Cython, numpy)
        // is the package's code, not the standard library's.
        Language::Builtin => match f.object.as_deref() {
            Some(m) if !m.is_empty() && !crate::python::stdlib::is_stdlib_module(m) => Origin::SitePackages,
            _ => Origin::Stdlib,
        },
        // GoogleTest (linked into the test binary, built with the program or from Debian's
        // libgtest.a) is an installed test runner, wherever its source is.
        Language::Native if crate::plumbing::native_package(f).as_deref() == Some(crate::plumbing::GOOGLETEST) => Origin::SitePackages,
        // The program's own crate, built from cargo's registry (`cargo install`), or named as
        // the program's `main` is without debug information; a dependency's crate named so.
        Language::Native if f.std_dependency => Origin::Stdlib,
        Language::Native if f.program_crate => Origin::Program,
        Language::Native if f.dependency_crate => Origin::SitePackages,
        Language::Native => match (&file, native_name_origin(&f.qualname)) {
            (None, Some(o)) => o,
            (None, None) if crate::native::paths::extension_plumbing(&f.qualname, f.object.as_deref()) => Origin::Stdlib,
            // A library of the program's own (jq's libjq), installed among the system's.
            _ if f.program_library && native_origin(file.as_deref(), None) == Origin::Program => Origin::Program,
            _ => native_origin(file.as_deref(), f.object.as_deref()),
        },
    }
}

/// The module a function belongs to: the dotted Python module name derived from its file
/// (relative to `site-packages`, the standard library directory, or `cwd`), or for native
/// code the file name of its object.
pub fn module_name(f: &Function, cwd: &Path) -> String {
    if f.language != Language::Python {
        let o = f.object.as_deref().unwrap_or("");
        return o.rsplit('/').next().unwrap_or(o).to_string();
    }
    let Some(file) = f.file.as_deref() else { return String::new() };
    let s = file.to_string_lossy();
    if let Some(inner) = s.strip_prefix("<frozen ").and_then(|r| r.strip_suffix('>')) {
        return inner.to_string();
    }
    let rel: &str = if let Some((_, i)) = packages_dir_end(&s) {
        &s[i..]
    } else if let Some(i) = stdlib_dir_end(&s) {
        &s[i..]
    } else {
        return package_module(file).unwrap_or_else(|| match file.strip_prefix(cwd) {
            Ok(r) => dotted(&r.to_string_lossy()),
            Err(_) => dotted(s.rsplit('/').next().unwrap_or(&s)),
        });
    };
    dotted(rel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::paths::{cargo_crate, native_display_path};
    use std::path::PathBuf;

    fn pyf(file: &str) -> Function {
        Function {
            language: Language::Python,
            name: "f".into(),
            qualname: "f".into(),
            file: Some(PathBuf::from(file)),
            first_line: Some(1),
            last_line: Some(2),
            object: None,
            program_library: false,
            program_crate: false,
            dependency_crate: false,
            std_dependency: false,
            rust_symbol: false,
            made_in: None,
            inlined: false,
        }
    }

    #[test]
    fn origins() {
        assert_eq!(python_origin("/usr/lib/python3.11/json/decoder.py"), Origin::Stdlib);
        assert_eq!(python_origin("/root/.pyenv/versions/3.11.7/lib/python3.11/re/__init__.py"), Origin::Stdlib);
        assert_eq!(python_origin("<frozen runpy>"), Origin::Stdlib);
        assert_eq!(python_origin("/usr/local/lib/python3.11/dist-packages/rich/table.py"), Origin::SitePackages);
        assert_eq!(python_origin("/home/u/.local/lib/python3.11/site-packages/rich/table.py"), Origin::SitePackages);
        assert_eq!(python_origin("/home/u/proj/app.py"), Origin::Program);
        assert_eq!(native_origin(Some("/usr/include/c++/12/bits/stl_vector.h"), None), Origin::Stdlib);
        assert_eq!(native_origin(None, Some("/usr/lib/x86_64-linux-gnu/libc.so.6")), Origin::Stdlib);
        assert_eq!(native_origin(Some("/home/u/x.c"), Some("/home/u/x")), Origin::Program);
        // A Python extension module: the C API's headers are the standard library, the
        // module's own code the program's, or an installed package's in site-packages.
        let ext = "/w/demo_ext.cpython-312-x86_64-linux-gnu.so";
        assert_eq!(native_origin(Some("/root/.pyenv/versions/3.12.1/include/python3.12/object.h"), Some(ext)), Origin::Stdlib);
        assert_eq!(native_origin(Some("/opt/py/include/python3.13t/cpython/listobject.h"), Some(ext)), Origin::Stdlib);
        assert_eq!(native_origin(Some("/w/demo_ext.c"), Some(ext)), Origin::Program);
        assert_eq!(native_origin(Some("/w/include/python3.c"), Some(ext)), Origin::Program);
        let black = "/v/lib/python3.12/site-packages/black/linegen.cpython-312-x86_64-linux-gnu.so";
        assert_eq!(native_origin(None, Some(black)), Origin::SitePackages);
        assert_eq!(native_origin(None, Some("/v/lib/python3.12/site-packages/x/libhelper.so")), Origin::Program);
        use crate::native::paths::extension_plumbing as mypyc_runtime;
        let rt = Some("/v/lib/python3.11/site-packages/30fcd23745efe32ce681__mypyc.cpython-311-x86_64-linux-gnu.so");
        assert!(mypyc_runtime("CPyStr_Build", rt) && mypyc_runtime("CPyPy_linegen___LineGenerator___visit_stmt", rt));
        assert!(!mypyc_runtime("CPyDef_linegen___LineGenerator___visit_default", rt));
        assert!(mypyc_runtime("linegen___LineGenerator_traverse", rt) && mypyc_runtime("__pyx_tp_dealloc_5demo_Thing", rt));
        assert!(mypyc_runtime("mode___Mode_set_preview", rt) && mypyc_runtime("list_pop_impl", rt));
        // A generator class's methods around its body, and a callable class's `__get__`; not
        // the body (the helper), nor a nested function's `__call__`.
        for wrapper in ["_gen_____next__", "_gen_____iter__", "_gen___send", "_gen___throw", "_gen___close", "_obj_____get__"] {
            assert!(mypyc_runtime(&format!("CPyDef_linegen___visit_default_LineGenerator{wrapper}"), rt), "{wrapper}");
        }
        assert!(!mypyc_runtime("CPyDef_linegen___visit_default_LineGenerator_gen_____mypyc_generator_helper__", rt));
        assert!(!mypyc_runtime("CPyDef_linegen____rhs_transform_line_obj_____call__", rt));
        let own = Some("/w/demo_ext.cpython-312-x86_64-linux-gnu.so");
        assert!(!mypyc_runtime("weighted_sum", own) && !mypyc_runtime("list_pop_impl", own), "a C extension's own functions");
        assert!(!mypyc_runtime("CPyStr_Build", Some("/home/u/app")), "only in an extension module");
        // libstdc++ with its debug symbols installed: its build tree's files, a system object.
        let libstdcxx = Some("/usr/lib/x86_64-linux-gnu/libstdc++.so.6");
        assert_eq!(native_origin(Some("/build/gcc-12/libstdc++-v3/src/c++11/string-inst.cc"), libstdcxx), Origin::Stdlib);
        assert_eq!(native_origin(Some("/opt/app/src/x.c"), Some("/opt/app/libx.so")), Origin::Program);
    }

    #[test]
    fn c_functions_belong_to_their_module() {
        let c = |module: Option<&str>| Function {
            language: Language::Builtin,
            name: "main".into(),
            qualname: "main".into(),
            file: None,
            first_line: None,
            last_line: None,
            object: module.map(String::from),
            program_library: false,
            program_crate: false,
            dependency_crate: false,
            std_dependency: false,
            rust_symbol: false,
            made_in: None,
            inlined: false,
        };
        assert_eq!(origin(&c(Some("builtins"))), Origin::Stdlib);
        assert_eq!(origin(&c(Some("os.path"))), Origin::Stdlib);
        assert_eq!(origin(&c(None)), Origin::Stdlib);
        // black's mypyc-compiled `main`.
        assert_eq!(origin(&c(Some("black"))), Origin::SitePackages);
    }

    #[test]
    fn dataclass_generated_methods_are_the_standard_library() {
        let mut f = pyf("<string>");
        f.qualname = "__create_fn__.<locals>.__init__".into();
        assert_eq!(origin(&f), Origin::Stdlib);
        f.qualname = "__create_fn__".into();
        assert_eq!(origin(&f), Origin::Stdlib);
        // Traces without `made_in` (recorded before it): dataclasses' naming decides; other
        // code compiled from a string is the program's (an `exec` the program ran).
        f.qualname = "<lambda>".into();
        assert_eq!(origin(&f), Origin::Program);
        f.qualname = "make.<locals>.__init__".into();
        assert_eq!(origin(&f), Origin::Program);
        // A program's own function of that name in a real file stays the program's.
        let mut g = pyf("/home/u/proj/gen.py");
        g.qualname = "__create_fn__.<locals>.__init__".into();
        assert_eq!(origin(&g), Origin::Program);
    }

    #[test]
    fn code_compiled_from_a_string_is_whose_code_ran_the_string() {
        let made = |qualname: &str, file: &str, made_in: Option<&str>| {
            let mut f = pyf(file);
            f.qualname = qualname.into();
            f.made_in = made_in.map(String::from);
            origin(&f)
        };
        let collections = Some("/root/.pyenv/versions/3.12.1/lib/python3.12/collections/__init__.py");
        // namedtuple's `__new__`, and the body `eval` ran to make it: the standard library's.
        assert_eq!(made("<lambda>", "<string>", collections), Origin::Stdlib);
        assert_eq!(made("<module>", "<string>", collections), Origin::Stdlib);
        assert_eq!(made("__create_fn__.<locals>.__init__", "<string>", Some("/usr/lib/python3.11/dataclasses.py")), Origin::Stdlib);
        // What an installed package (fastjsonschema's validators) or the program generates
        // stays the program's, whatever its name.
        assert_eq!(made("validate", "<string>", Some("/v/lib/python3.12/site-packages/fastjsonschema/__init__.py")), Origin::Program);
        assert_eq!(made("<lambda>", "<string>", Some("/home/u/proj/app.py")), Origin::Program);
        assert_eq!(made("__create_fn__.<locals>.__init__", "<string>", Some("/home/u/proj/app.py")), Origin::Program);
        // Who ran it unknown (`python -c`): the program's.
        assert_eq!(made("<lambda>", "<string>", None), Origin::Program);
        // Another name than `<string>` (doctest's examples of the program's docstrings) is
        // not generated code of the standard library's, whoever compiled it.
        assert_eq!(made("<module>", "<doctest app.f[0]>", Some("/usr/lib/python3.11/doctest.py")), Origin::Program);
    }

    #[test]
    fn rust_origins() {
        let std = "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/alloc/src/raw_vec/mod.rs";
        assert_eq!(native_origin(Some(std), Some("/p/hexyl")), Origin::Stdlib);
        assert_eq!(native_origin(Some("/rust/deps/gimli-0.32.3/src/read/unit.rs"), None), Origin::Stdlib);
        let rustup = "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/lib/rustlib/src/rust/library/core/src/fmt/mod.rs";
        assert_eq!(native_origin(Some(rustup), None), Origin::Stdlib);
        let dep = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/clap_builder-4.5.20/src/derive.rs";
        assert_eq!(native_origin(Some(dep), None), Origin::SitePackages);
        assert_eq!(native_origin(Some("/usr/local/cargo/git/checkouts/foo-0123abcd/4f1e2d3/src/lib.rs"), None), Origin::SitePackages);
        // Look-alikes are the program's.
        assert_eq!(native_origin(Some("/home/u/rustc/src/main.rs"), None), Origin::Program);
        assert_eq!(native_origin(Some("/rustc/notahash/library/std/src/lib.rs"), None), Origin::Program);
        assert_eq!(native_origin(Some("/home/u/registry/src/x/y.rs"), None), Origin::Program);
        assert_eq!(native_origin(Some("/home/u/proj/library/std/src/x.rs"), None), Origin::Program);
        // Without a source file: the name decides.
        let f = |q: &str| Function {
            language: Language::Native,
            name: q.into(),
            qualname: q.into(),
            file: None,
            first_line: None,
            last_line: None,
            object: Some("/p/hexyl".into()),
            program_library: false,
            program_crate: false,
            dependency_crate: false,
            std_dependency: false,
            rust_symbol: false,
            made_in: None,
            inlined: false,
        };
        assert_eq!(origin(&f("__rustc::__rust_alloc")), Origin::Stdlib);
        assert_eq!(origin(&f("<core::fmt::Arguments as core::fmt::Display>::fmt")), Origin::Stdlib);
        assert_eq!(origin(&f("main")), Origin::Program);
        assert_eq!(origin(&f("<[u8]>::starts_with")), Origin::Stdlib);
        assert_eq!(origin(&f("<str>::find::<char>")), Origin::Stdlib);
        assert_eq!(origin(&f("<u8 as core::fmt::Display>::fmt")), Origin::Stdlib);
        assert_eq!(origin(&f("<&alloc::vec::Vec<u8> as core::fmt::Debug>::fmt")), Origin::Stdlib);
        assert_eq!(origin(&f("<std::ffi::os_str::OsStr as clap_lex::ext::OsStrExt>::find")), Origin::Program);
        // A library of the program's own, installed among the system's (jq's libjq): the
        // program's code, unless its source file is the runtime's.
        let lib = |q: &str, file: Option<&str>, own: bool| Function {
            object: Some("/usr/lib/x86_64-linux-gnu/libjq.so.1.0.4".into()),
            file: file.map(Into::into),
            program_library: own,
            program_crate: false,
            dependency_crate: false,
            std_dependency: false,
            rust_symbol: false,
            made_in: None,
            ..f(q)
        };
        assert_eq!(origin(&lib("jq_next", None, true)), Origin::Program);
        assert_eq!(origin(&lib("jq_next", None, false)), Origin::Stdlib);
        assert_eq!(origin(&lib("jq_next", Some("./src/execute.c"), true)), Origin::Program);
        assert_eq!(origin(&lib("memcpy", Some("/usr/include/x86_64-linux-gnu/bits/string_fortified.h"), true)), Origin::Stdlib);
        assert_eq!(origin(&f("<app::Opt as core::default::Default>::default")), Origin::Program);
        assert_eq!(origin(&f("<app::Wrapper<u8>>::get")), Origin::Program);
        assert_eq!(origin(&f("standalone::run")), Origin::Program);
        assert_eq!(native_display_path(std).as_deref(), Some("rust-library/alloc/src/raw_vec/mod.rs"));
        assert_eq!(native_display_path(dep).as_deref(), Some("cargo-registry/clap_builder-4.5.20/src/derive.rs"));
        assert_eq!(cargo_crate(dep).as_deref(), Some("clap_builder"));
        assert_eq!(
            cargo_crate("/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pico-args-0.5.0/src/lib.rs").as_deref(),
            Some("pico_args")
        );
        assert_eq!(cargo_crate("/root/.cargo/git/checkouts/clap-0d2c1b/5a1c2e3/src/lib.rs"), None);
        assert_eq!(cargo_crate("/home/u/proj/src/main.rs"), None);
        assert_eq!(native_display_path("/home/u/x.rs"), None);
        // A CARGO_HOME of any name: recognized by the registry's shape.
        let elsewhere = "/opt/rust-deps/registry/src/index.crates.io-1949cf8c6b5b557f/memchr-2.7.4/src/lib.rs";
        assert_eq!(cargo_crate(elsewhere).as_deref(), Some("memchr"));
        assert_eq!(native_display_path(elsewhere).as_deref(), Some("cargo-registry/memchr-2.7.4/src/lib.rs"));
        assert_eq!(
            native_display_path("/srv/ch/git/checkouts/clap-0d2c1b8f3a5e7d91/5a1c2e3/src/lib.rs").as_deref(),
            Some("cargo-git/5a1c2e3/src/lib.rs")
        );
        // A registry that replaces crates.io under no name: `-<hash>`; a checkout needs its
        // commit's directory.
        let unnamed = "/opt/rust-deps/registry/src/-14cd1cce6819ff87/memchr-2.7.4/src/lib.rs";
        assert_eq!(cargo_crate(unnamed).as_deref(), Some("memchr"));
        assert_eq!(native_origin(Some(unnamed), Some("/opt/app/bin/app")), Origin::SitePackages);
        assert_eq!(native_display_path("/srv/ch/git/checkouts/clap-0d2c1b8f3a5e7d91/src/lib.rs"), None);
        // The user's own folders named `registry/src` are not cargo's.
        assert_eq!(cargo_crate("/home/u/app/registry/src/server/handler.rs"), None);
        assert_eq!(cargo_crate("/home/u/app/registry/src/v1-aaaa/x-1.0/lib.rs"), None);
    }

    /// A Rust program without debug information: a function is classed by the crates of its
    /// demangled name (names as a release build of a program using clap and regex has them,
    /// `nm -C`, hashes dropped as the analyzer shows them).
    #[test]
    fn rust_crates_by_name() {
        use crate::native::paths::rust_name_origin;
        let o = |q: &str| rust_name_origin(q, &["greprs"]);
        let (p, s, d) = (Some(Origin::Program), Some(Origin::Stdlib), Some(Origin::SitePackages));
        // The program's crate, closures included.
        assert_eq!(o("greprs::main"), p);
        assert_eq!(o("greprs::count_matches::{{closure}}"), p);
        assert_eq!(o("greprs::_<impl serde::ser::Serialize for greprs::Opts>::serialize"), p);
        // An impl of the program's for a dependency's or the standard library's trait, and of
        // a dependency's trait for the program's type.
        assert_eq!(o("<greprs::Mode as core::fmt::Debug>::fmt"), p);
        assert_eq!(o("<greprs::Mode as clap_builder::derive::ValueEnum>::value_variants"), p);
        assert_eq!(o("<alloc::vec::Vec<greprs::Hit> as greprs::Render>::render"), p);
        // Dependencies: paths, generic instances, closures, impl blocks, trait impls either way.
        assert_eq!(o("clap_builder::parser::parser::Parser::react"), d);
        assert_eq!(o("clap_builder::util::flat_map::FlatMap<K,V>::remove"), d);
        assert_eq!(o("regex_automata::meta::regex::Builder::build_many_from_hir::{{closure}}"), d);
        assert_eq!(o("regex_automata::dfa::remapper::onepass::<impl regex_automata::dfa::remapper::Remappable for regex_automata::dfa::onepass::DFA>::remap"), d);
        assert_eq!(o("<clap_builder::util::id::Id as core::fmt::Debug>::fmt"), d);
        assert_eq!(o("<hashbrown::raw::RawTable<T,A> as core::ops::drop::Drop>::drop"), d);
        assert_eq!(o("<P as clap_builder::builder::value_parser::AnyValueParser>::parse_ref_"), d);
        assert_eq!(o("<regex_automata::meta::strategy::Core as regex_automata::meta::strategy::Strategy>::search_half"), d);
        assert_eq!(o("<std::ffi::os_str::OsStr as clap_lex::ext::OsStrExt>::find"), d);
        assert_eq!(o("<&[u8] as object::read::read_ref::ReadRef>::read_bytes_at_until"), d);
        assert_eq!(o("<dyn clap_builder::builder::value_parser::AnyValueParser>::downcast_ref"), d);
        // The standard library: its crates, blanket impls over a generic parameter, primitives'
        // methods, references and trait objects of its types.
        assert_eq!(o("std::rt::lang_start_internal"), s);
        assert_eq!(o("core::ops::function::impls::<impl core::ops::function::FnMut<A> for &mut F>::call_mut"), s);
        assert_eq!(o("<T as core::any::Any>::type_id"), s);
        assert_eq!(o("<&str as core::any::Any>::type_id"), s);
        assert_eq!(o("<&dyn core::fmt::Debug as core::fmt::Debug>::fmt"), s);
        assert_eq!(o("<[u8]>::copy_within::<core::ops::range::RangeInclusive<usize>>"), s);
        assert_eq!(o("<&'a alloc::string::String as core::fmt::Display>::fmt"), s);
        assert_eq!(o("__rustc::__rust_alloc"), s);
        assert_eq!(o("proc_macro::bridge::client::run_client"), s);
        // Not Rust paths.
        assert_eq!(o("main"), None);
        assert_eq!(o("_start"), None);
        assert_eq!(o("<unknown #3>"), None);
        assert_eq!(o("anon.056682babd8b50a4376c172afdb56b34.7.llvm.6934348850192648175"), None);
        // Without the program's crate (not known to be a Rust program): only the standard
        // library is told by name, as before.
        assert_eq!(native_name_origin("clap_builder::parser::parser::Parser::react"), None);
        assert_eq!(native_name_origin("<std::ffi::os_str::OsStr as clap_lex::ext::OsStrExt>::find"), None);
        assert_eq!(native_name_origin("<T as core::any::Any>::type_id"), s);
    }

    /// A program `cargo install` built from cargo's registry is told from its dependencies
    /// by its `main`: `<crate>::main`, the crate named as the executable (ripgrep's binary crate
    /// is `rg`) or as its package; its package directory is the program's.
    #[test]
    fn the_package_of_a_programs_main_is_the_program() {
        use crate::native::paths::program_crate_root;
        let reg = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f";
        let main = format!("{reg}/hexyl-0.16.0/src/main.rs");
        let root = format!("{reg}/hexyl-0.16.0/");
        assert_eq!(program_crate_root("hexyl::main", &main, "hexyl"), Some(root.as_str()));
        // A renamed executable: the package's crate.
        assert_eq!(program_crate_root("hexyl::main", &main, "hx"), Some(root.as_str()));
        let rg = format!("{reg}/ripgrep-15.2.0/crates/core/main.rs");
        assert_eq!(program_crate_root("rg::main", &rg, "rg"), Some(format!("{reg}/ripgrep-15.2.0/").as_str()));
        let fd = format!("{reg}/fd-find-10.2.0/src/main.rs");
        assert_eq!(program_crate_root("fd::main", &fd, "fd"), Some(format!("{reg}/fd-find-10.2.0/").as_str()));
        assert_eq!(program_crate_root("fd_find::main", &fd, "other"), Some(format!("{reg}/fd-find-10.2.0/").as_str()));
        // A dependency's `main`, any other function, a nested `main`, a program outside cargo's
        // directories: none.
        let dep = format!("{reg}/clap_builder-4.5.20/src/lib.rs");
        assert_eq!(program_crate_root("clap_builder::main", &dep, "hexyl"), None);
        assert_eq!(program_crate_root("hexyl::run", &main, "hexyl"), None);
        assert_eq!(program_crate_root("hexyl::cli::main", &main, "hexyl"), None);
        assert_eq!(program_crate_root("<hexyl::X as hexyl::T>::main", &main, "hexyl"), None);
        assert_eq!(program_crate_root("app::main", "/home/u/app/src/main.rs", "app"), None);
        // A git checkout (`cargo install --git`): the checked-out repository, its workspace's
        // crates included.
        let git = "/root/.cargo/git/checkouts/ripgrep-0d2c1b8f3a5e7d91/4f1e2d3/crates/core/main.rs";
        assert_eq!(program_crate_root("rg::main", git, "rg"), Some("/root/.cargo/git/checkouts/ripgrep-0d2c1b8f3a5e7d91/4f1e2d3/"));
        assert_eq!(program_crate_root("ripgrep::main", git, "other"), None);

        // The mark makes its functions the program's; the same path unmarked is a dependency.
        let f = |own: bool| Function {
            language: Language::Native,
            name: "print_all".into(),
            qualname: "hexyl::Printer<Writer>::print_all".into(),
            file: Some(format!("{reg}/hexyl-0.16.0/src/lib.rs").into()),
            first_line: Some(615),
            last_line: Some(759),
            object: Some("/root/.cargo/bin/hexyl".into()),
            program_library: false,
            program_crate: own,
            dependency_crate: false,
            std_dependency: false,
            rust_symbol: false,
            made_in: None,
            inlined: false,
        };
        assert_eq!(origin(&f(true)), Origin::Program);
        assert_eq!(origin(&f(false)), Origin::SitePackages);
    }

    /// A package's repository, from its manifest's `[package]` table; a package is the
    /// program's repository's when its repository is that one or a directory inside it.
    #[test]
    fn packages_of_the_programs_repository() {
        use crate::native::paths::{package_repository, same_repository};
        let m = "[package]\nedition = \"2021\"\nname = \"ignore\"\nrepository = \"https://github.com/BurntSushi/ripgrep/tree/master/crates/ignore\"\n\n[dependencies.log]\nversion = \"0.4\"\n";
        assert_eq!(package_repository(m).as_deref(), Some("https://github.com/BurntSushi/ripgrep/tree/master/crates/ignore"));
        assert_eq!(
            package_repository("[package]\nrepository = \"https://github.com/sharkdp/hexyl.git/\"\n").as_deref(),
            Some("https://github.com/sharkdp/hexyl")
        );
        // Not in `[package]`, or none.
        assert_eq!(package_repository("[package]\nname = \"x\"\n[badges]\nrepository = \"https://h/a/b\"\n"), None);
        assert_eq!(package_repository("[package]\nname = \"x\"\nrepository_url = \"https://h/a/b\"\n"), None);
        let rg = "https://github.com/BurntSushi/ripgrep";
        assert!(same_repository(rg, "https://github.com/BurntSushi/ripgrep/tree/master/crates/ignore"));
        assert!(same_repository(rg, "https://github.com/burntsushi/ripgrep"));
        assert!(!same_repository(rg, "https://github.com/BurntSushi/ripgrep-extra"));
        assert!(!same_repository(rg, "https://github.com/clap-rs/clap"));
        // A repository that names only a host or an owner takes in nothing.
        assert!(!same_repository("https://github.com/BurntSushi", "https://github.com/BurntSushi/memchr"));
        assert!(!same_repository("https://github.com", "https://github.com/clap-rs/clap"));
    }

    /// `cargo vendor`'s directories are dependencies, by the checksum file it writes; a
    /// project's own `vendor/` folder without it is the program.
    #[test]
    fn vendored_crates() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().to_str().unwrap();
        for (dir, checksum) in [("vendor/memchr", true), ("vendor/aho-corasick-1.1.3", true), ("vendor/zlib", false)] {
            std::fs::create_dir_all(d.path().join(dir).join("src")).unwrap();
            if checksum {
                std::fs::write(d.path().join(dir).join(".cargo-checksum.json"), "{}").unwrap();
            }
        }
        let memchr = format!("{root}/vendor/memchr/src/memchr.rs");
        assert_eq!(native_origin(Some(&memchr), None), Origin::SitePackages);
        assert_eq!(cargo_crate(&memchr).as_deref(), Some("memchr"));
        assert_eq!(native_display_path(&memchr).as_deref(), Some("cargo-vendor/memchr/src/memchr.rs"));
        let aho = format!("{root}/vendor/aho-corasick-1.1.3/src/lib.rs");
        assert_eq!(cargo_crate(&aho).as_deref(), Some("aho_corasick"));
        let zlib = format!("{root}/vendor/zlib/src/inflate.c");
        assert_eq!(native_origin(Some(&zlib), None), Origin::Program);
        assert_eq!(cargo_crate(&zlib), None);
        assert_eq!(native_display_path(&zlib), None);
    }

    #[test]
    fn module_names() {
        let cwd = Path::new("/home/u/proj");
        assert_eq!(module_name(&pyf("/usr/local/lib/python3.11/dist-packages/rich/table.py"), cwd), "rich.table");
        assert_eq!(module_name(&pyf("/usr/local/lib/python3.11/site-packages/rich/__init__.py"), cwd), "rich");
        assert_eq!(module_name(&pyf("/usr/lib/python3.11/json/decoder.py"), cwd), "json.decoder");
        assert_eq!(module_name(&pyf("/home/u/proj/pkg/util.py"), cwd), "pkg.util");
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("shop")).unwrap();
        std::fs::write(d.path().join("shop/__init__.py"), "").unwrap();
        let f = d.path().join("shop/pricing.py");
        assert_eq!(module_name(&pyf(f.to_str().unwrap()), cwd), "shop.pricing");
        let f = d.path().join("shop/__init__.py");
        assert_eq!(module_name(&pyf(f.to_str().unwrap()), cwd), "shop");
        assert_eq!(module_name(&pyf("<frozen runpy>"), cwd), "runpy");
    }
}
