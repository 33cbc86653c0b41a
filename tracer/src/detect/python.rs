//! A Python target: its interpreter, the arguments the recorder refuses, and whether the shim supports its version.

use super::*;

/// Check the interpreter's arguments: refuse the flags that switch off `site` or
/// `PYTHONPATH` (the recorder cannot load then), and a script that does not exist.
pub fn check_python_args(args: &[OsString]) -> Result<(), Refusal> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_bytes();
        if a == b"--" {
            return check_script(args.get(i + 1));
        }
        if a == b"-" || !a.starts_with(b"-") {
            return check_script(Some(&args[i]));
        }
        if a.starts_with(b"--") {
            if a == b"--check-hash-based-pycs" {
                i += 1;
            }
            i += 1;
            continue;
        }
        for (k, &c) in a.iter().enumerate().skip(1) {
            match c {
                b'c' | b'm' => return Ok(()),
                b'I' | b'E' | b'S' => {
                    return Err(Refusal::new(
                        2,
                        format!(
                            "python -{}: this flag makes Python ignore PYTHONPATH or the site module, through which `trace` loads its recorder; run without it",
                            c as char
                        ),
                    ))
                }
                b'W' | b'X' => {
                    if k + 1 == a.len() {
                        i += 1;
                    }
                    break;
                }
                _ => {}
            }
        }
        i += 1;
    }
    Ok(())
}

fn check_script(script: Option<&OsString>) -> Result<(), Refusal> {
    let Some(s) = script else { return Ok(()) };
    if s == "-" {
        return Ok(());
    }
    let p = Path::new(s);
    if !p.exists() {
        return Err(Refusal::new(2, format!("{}: no such Python script", p.display())));
    }
    Ok(())
}

/// The CPython versions a Python shim supports, from its exported `SLICETRACE_PYTHON_VERSION`
/// (`"3.9-3.14"`): the lowest and highest `(major, minor)`.
pub fn parse_supported(range: &str) -> Option<((u32, u32), (u32, u32))> {
    let v = |s: &str| -> Option<(u32, u32)> {
        let (a, b) = s.trim().split_once('.')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    };
    let (lo, hi) = range.split_once('-')?;
    Some((v(lo)?, v(hi)?))
}

/// The interpreter a Python target runs: the program itself, or its script's `#!` interpreter.
pub fn python_interpreter(resolved: &Path, path_var: Option<&OsStr>) -> Option<PathBuf> {
    // A file named like an interpreter is one, even as a script (pyenv's shims are).
    if resolved.file_name().is_some_and(|n| is_python_name(n) || n.as_bytes().starts_with(b"pypy")) {
        return Some(resolved.to_path_buf());
    }
    let head = read_head(resolved).ok()?;
    let Some(sb) = shebang(&head) else { return Some(resolved.to_path_buf()) };
    if Path::new(&sb.interpreter).file_name() == Some(OsStr::new("env")) {
        let (prog, _) = script_interpreter(&sb)?;
        return resolve_command(&prog, path_var);
    }
    Some(PathBuf::from(sb.interpreter))
}

/// What a Python interpreter is: implementation name, `(major, minor)`, free-threaded build.
#[derive(Debug, PartialEq, Eq)]
pub struct PythonInfo {
    pub implementation: String,
    pub version: (u32, u32),
    pub free_threaded: bool,
}

/// Ask the interpreter what it is (the file name alone cannot tell PyPy or a free-threaded
/// build from CPython). Its own site, environment and user site are left out (`-S -E -s`),
/// and the probe is written for every Python from 2.7 on.
pub fn probe_python(interp: &Path) -> Result<PythonInfo, String> {
    const PROBE: &str = "import sys\n\
try:\n    import sysconfig; ft = bool(sysconfig.get_config_var('Py_GIL_DISABLED'))\n\
except Exception:\n    ft = False\n\
print('%s %d %d %d' % (getattr(getattr(sys, 'implementation', None), 'name', 'python'), sys.version_info[0], sys.version_info[1], ft))";
    let out = std::process::Command::new(interp)
        .args(["-S", "-E", "-s", "-c", PROBE])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{}: cannot run it to ask its version: {e}", interp.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let w: Vec<&str> = text.split_whitespace().collect();
    match (out.status.success(), w.as_slice()) {
        (true, [name, major, minor, ft]) => Ok(PythonInfo {
            implementation: name.to_string(),
            version: (major.parse().unwrap_or(0), minor.parse().unwrap_or(0)),
            free_threaded: *ft == "1",
        }),
        _ => Err(format!(
            "{}: could not tell which Python this is (`{} -c ...` printed {:?})",
            interp.display(),
            interp.display(),
            text.trim()
        )),
    }
}

/// What a pyenv shim (`$(pyenv root)/shims/python3`, a bash script that runs `pyenv exec`)
/// would run, found the way pyenv chooses a version (`PYENV_VERSION`, a `.python-version` in
/// the current directory or above, then `$(pyenv root)/version`), without starting pyenv
/// (a bash script that costs more than the rest of `trace run`'s start-up:
/// `docs/performance.md`, "Figures behind the code's choices"). `None` when it is not a shim or the choice is not a plain installed version:
/// the interpreter is then asked directly.
fn pyenv_shim_target(shim: &Path) -> Option<PathBuf> {
    let shims = shim.parent()?;
    if shims.file_name()? != "shims" {
        return None;
    }
    let root = shims.parent()?;
    let head = read_head(shim).ok()?;
    let needle = b"libexec/pyenv";
    if !head.windows(needle.len()).any(|w| w == needle) {
        return None;
    }
    let first = |text: &str| text.split(|c: char| c == ':' || c.is_whitespace()).find(|v| !v.is_empty()).map(str::to_string);
    let mut version = std::env::var("PYENV_VERSION").ok().and_then(|v| first(&v));
    if version.is_none() {
        let mut dir = std::env::current_dir().ok();
        while let Some(d) = dir {
            if let Ok(text) = std::fs::read_to_string(d.join(".python-version")) {
                version = first(&text);
                break;
            }
            dir = d.parent().map(Path::to_path_buf);
        }
    }
    let version = version.or_else(|| std::fs::read_to_string(root.join("version")).ok().and_then(|t| first(&t)))?;
    if version == "system" || version.contains('/') {
        return None;
    }
    let exe = root.join("versions").join(version).join("bin").join(shim.file_name()?);
    exe.canonicalize().ok().filter(|p| p.is_file())
}

/// Refuse a Python target the shim cannot record: not CPython, a version outside `supported`,
/// or a free-threaded build. A `python3.N` file (after links) in range is taken at its word.
pub fn check_python_target(interp: &Path, supported: ((u32, u32), (u32, u32))) -> Result<(), Refusal> {
    let (lo, hi) = supported;
    let range = format!("CPython {}.{} to {}.{}", lo.0, lo.1, hi.0, hi.1);
    let real = interp.canonicalize().unwrap_or_else(|_| interp.to_path_buf());
    let real = pyenv_shim_target(&real).unwrap_or(real);
    let name = real.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let named = name
        .strip_prefix("python")
        .and_then(|v| v.split_once('.'))
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)));
    if let Some(v) = named {
        if (lo..=hi).contains(&v) {
            return Ok(());
        }
    }
    let info = probe_python(&real).map_err(|e| Refusal::new(126, format!("{e}; supported: {range}")))?;
    let (major, minor) = info.version;
    let why = if info.implementation != "cpython" {
        Some(format!("{} {major}.{minor} is not CPython", info.implementation))
    } else if !(lo..=hi).contains(&info.version) {
        Some(format!("CPython {major}.{minor} is not supported"))
    } else if info.free_threaded {
        Some(format!("CPython {major}.{minor} is a free-threaded build, which the recorder does not support"))
    } else {
        None
    };
    match why {
        Some(why) => Err(Refusal::new(126, format!("{}: {why} (supported: {range}); it was not run", interp.display()))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn python_args() {
        assert!(check_python_args(&os(&["-c", "pass"])).is_ok());
        assert!(check_python_args(&os(&["-m", "json.tool"])).is_ok());
        assert!(check_python_args(&os(&["-u", "-W", "ignore", "/nonexistent/x.py"]))
            .unwrap_err()
            .message
            .contains("no such Python script"));
        assert!(check_python_args(&os(&["-Wignore", "/nonexistent/x.py"])).is_err());
        assert!(check_python_args(&os(&["-X", "dev", "-c", "1"])).is_ok());
        assert_eq!(check_python_args(&os(&["-I", "-c", "1"])).unwrap_err().code, 2);
        assert!(check_python_args(&os(&["-uS"])).is_err());
        assert!(check_python_args(&os(&[])).is_ok());
        assert!(check_python_args(&os(&["-"])).is_ok());
    }

    #[test]
    fn supported_range_parses() {
        assert_eq!(parse_supported("3.9-3.14"), Some(((3, 9), (3, 14))));
        assert_eq!(parse_supported("3.9"), None);
        assert_eq!(parse_supported("x-3.1"), None);
    }
}
