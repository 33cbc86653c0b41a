//! `SLICE_TRACE_PATCH`, the switch of entry patching (docs/native-recording.md), read in one
//! place by `trace` (which sets it for an ordinary native program) and by the native shim
//! (which patches as it says).

use std::ffi::OsStr;

/// The environment variable.
pub const ENV_PATCH: &str = "SLICE_TRACE_PATCH";

/// What the variable asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchMode {
    /// `0`: no entry patching (only `-finstrument-functions` builds are recorded).
    Off,
    /// `1` (or any other value): the program and its own libraries.
    Program,
    /// `all`: system libraries and the C runtime too.
    All,
}

impl PatchMode {
    /// The mode a value asks for.
    pub fn parse(value: &OsStr) -> PatchMode {
        if value == "0" {
            PatchMode::Off
        } else if value == "all" {
            PatchMode::All
        } else {
            PatchMode::Program
        }
    }

    /// The mode the environment asks for, if the variable is set.
    pub fn from_env() -> Option<PatchMode> {
        std::env::var_os(ENV_PATCH).map(|v| PatchMode::parse(&v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_one_way() {
        assert_eq!(PatchMode::parse(OsStr::new("0")), PatchMode::Off);
        assert_eq!(PatchMode::parse(OsStr::new("1")), PatchMode::Program);
        assert_eq!(PatchMode::parse(OsStr::new("all")), PatchMode::All);
        assert_eq!(PatchMode::parse(OsStr::new("yes")), PatchMode::Program);
    }
}
