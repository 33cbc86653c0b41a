//! Which functions' lines are reported again in each test ([`per_test`], used by
//! [`crate::testlines`]): plain Rust without CPython, compiled into `tests/python_linetable.rs`
//! too so that its unit tests run (the shim is a cdylib that only links inside an interpreter).

/// Test runners and their plugins, by their top-level package or module in `site-packages`
/// (the analyzer's `plumbing::TEST_RUNNERS`, whose lines its spectrum leaves out).
const RUNNERS: &[&str] = &["pytest", "_pytest", "pluggy", "xdist", "execnet", "iniconfig", "_hypothesis_pytestplugin"];

/// Whether the lines of a function defined in `file` are reported again in each test: not for
/// the standard library (under `stdlib_dir`, outside its `site-packages`) nor for a test runner
/// installed as a package ([`RUNNERS`], `pytest_*` plugins).
pub(crate) fn per_test(file: &str, stdlib_dir: Option<&str>) -> bool {
    let installed = ["/site-packages/", "/dist-packages/"].iter().find_map(|d| file.find(d).map(|i| &file[i + d.len()..]));
    match installed {
        Some(rest) => {
            let top = rest.split('/').next().unwrap_or_default();
            let top = top.strip_suffix(".py").unwrap_or(top);
            !(RUNNERS.contains(&top) || top.starts_with("pytest_"))
        }
        None => !stdlib_dir.is_some_and(|d| file.starts_with(d)),
    }
}

#[cfg(test)]
mod tests {
    use super::per_test;

    #[test]
    fn the_code_under_test_is_rearmed_and_the_runner_and_standard_library_are_not() {
        let std = Some("/usr/local/lib/python3.12/");
        assert!(per_test("/src/app/tests/test_x.py", std));
        assert!(per_test("/v/lib/python3.12/site-packages/sqlparse/lexer.py", std));
        assert!(per_test("/usr/local/lib/python3.12/site-packages/click/core.py", std));
        assert!(!per_test("/usr/local/lib/python3.12/site-packages/_pytest/runner.py", std));
        assert!(!per_test("/v/lib/python3.12/site-packages/pluggy/_hooks.py", std));
        assert!(!per_test("/v/lib/python3.12/site-packages/pytest_cov/plugin.py", std));
        assert!(!per_test("/v/lib/python3.12/site-packages/_hypothesis_pytestplugin.py", std));
        assert!(!per_test("/usr/lib/python3/dist-packages/pytest/__init__.py", std));
        assert!(!per_test("/usr/local/lib/python3.12/unittest/case.py", std));
        assert!(!per_test("/usr/local/lib/python3.12/json/decoder.py", std));
        // Unknown standard library: everything outside site-packages is the code under test.
        assert!(per_test("/usr/local/lib/python3.12/json/decoder.py", None));
    }
}
