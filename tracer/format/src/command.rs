//! The one check of a command line before it is recorded, shared by `trace run` and the MCP
//! server's `record` tool: an argument or an environment entry holding a NUL byte cannot be
//! passed to a program at all (`execve` takes C strings), so it is refused up front with a
//! message that names it, instead of failing at the spawn with a message about something else.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// A command line no program can be given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    #[error(
        "argument {index} of the command, {shown}, contains a NUL byte (\\0), which no program can be given (arguments are C strings); remove it"
    )]
    NulInArgument { index: usize, shown: String },
    #[error("the environment variable {shown} contains a NUL byte (\\0) in its {part}, which no program can be given; remove it")]
    NulInEnvironment { shown: String, part: &'static str },
    #[error("the environment variable name {shown} is empty or contains `=`, so it cannot be set")]
    EqualsInName { shown: String },
}

/// `arg` quoted with its NUL and control characters escaped, at most about 80 characters.
fn shown(arg: &OsStr) -> String {
    let text = arg.to_string_lossy();
    let cut: String = text.chars().take(80).collect();
    let more = if cut.len() < text.len() { "…" } else { "" };
    format!("{cut:?}{more}")
}

/// Check a command's arguments (`argv[0]` is argument 0).
pub fn check_argv<'a>(argv: impl IntoIterator<Item = &'a OsStr>) -> Result<(), CommandError> {
    for (index, a) in argv.into_iter().enumerate() {
        if a.as_bytes().contains(&0) {
            return Err(CommandError::NulInArgument { index, shown: shown(a) });
        }
    }
    Ok(())
}

/// Check environment entries to set for the command.
pub fn check_env<'a>(vars: impl IntoIterator<Item = (&'a OsStr, &'a OsStr)>) -> Result<(), CommandError> {
    for (name, value) in vars {
        if name.as_bytes().contains(&0) {
            return Err(CommandError::NulInEnvironment { shown: shown(name), part: "name" });
        }
        if value.as_bytes().contains(&0) {
            return Err(CommandError::NulInEnvironment { shown: shown(name), part: "value" });
        }
        if name.as_bytes().contains(&b'=') || name.is_empty() {
            return Err(CommandError::EqualsInName { shown: shown(name) });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_bytes_are_named() {
        assert_eq!(check_argv(["python3", "app.py"].map(OsStr::new)), Ok(()));
        let e = check_argv(["python3", "a\0b"].map(OsStr::new)).unwrap_err();
        assert_eq!(e, CommandError::NulInArgument { index: 1, shown: "\"a\\0b\"".into() });
        assert!(e.to_string().starts_with("argument 1 of the command, \"a\\0b\", contains a NUL byte"), "{e}");
        let long = format!("{}\0", "x".repeat(200));
        assert!(check_argv([OsStr::new(&long)]).unwrap_err().to_string().contains("xx\"…"));
        assert_eq!(check_env([(OsStr::new("A"), OsStr::new("1"))]), Ok(()));
        assert!(check_env([(OsStr::new("A"), OsStr::new("1\0"))])
            .unwrap_err()
            .to_string()
            .contains("\"A\" contains a NUL byte (\\0) in its value"));
        assert!(matches!(check_env([(OsStr::new("A=B"), OsStr::new("1"))]), Err(CommandError::EqualsInName { .. })));
        assert!(matches!(check_env([(OsStr::new(""), OsStr::new("1"))]), Err(CommandError::EqualsInName { .. })));
    }
}
