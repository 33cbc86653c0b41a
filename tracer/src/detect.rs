//! What kind of program `trace run` was asked to launch, and whether it can be recorded.

use object::{Object, ObjectSection, ObjectSymbol};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// How the target will be recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetKind {
    /// A CPython interpreter, or a script whose shebang names one.
    Python,
    /// An ELF built with `-finstrument-functions`.
    Native,
    /// Anything else that can run (a shell script...): both shims' environments are set, so
    /// Python and instrumented programs it starts are recorded.
    Other,
}

impl TargetKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            TargetKind::Python => "python",
            TargetKind::Native => "native",
            TargetKind::Other => "other",
        }
    }
}

/// A refusal to run the target, with the exit status `trace` should use.
#[derive(Debug)]
pub struct Refusal {
    pub message: String,
    pub code: i32,
}

impl Refusal {
    fn new(code: i32, message: String) -> Refusal {
        Refusal { message, code }
    }
}

/// Whether a file name looks like a CPython interpreter: `python`, `python3`, `python3.11`,
/// `python3.13t` (a free-threaded build).
pub fn is_python_name(name: &OsStr) -> bool {
    let b = name.as_bytes();
    let b = b.strip_suffix(b"t").filter(|v| v.len() > 6).unwrap_or(b);
    b.starts_with(b"python") && b[6..].iter().all(|c| c.is_ascii_digit() || *c == b'.')
}

/// Find `cmd` like `execvp` does: as a path if it contains a slash, else on `PATH`.
pub fn resolve_command(cmd: &OsStr, path_var: Option<&OsStr>) -> Option<PathBuf> {
    if cmd.as_bytes().contains(&b'/') {
        let p = PathBuf::from(cmd);
        return p.exists().then_some(p);
    }
    let path_var = path_var.map(OsString::from).unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    for dir in std::env::split_paths(&path_var) {
        let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
        let p = dir.join(cmd);
        if p.is_file() && is_executable(&p) {
            return Some(p);
        }
    }
    None
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).map(|m| m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// The flags that make a native program traceable without entry patching, for error messages.
pub const NATIVE_HOWTO: &str = "rebuild it with function instrumentation and debug info:\n  \
     C/C++ (gcc or clang): add `-finstrument-functions -g` to CFLAGS/CXXFLAGS and link normally\n  \
     Rust: stable rustc has no such flag; Rust programs are recorded by entry patching only";

/// The environment variable that controls entry patching of ordinary native builds
/// (docs/native-recording.md): unset or `1` patches the program and its own libraries, `all`
/// system libraries too, `0` turns it off (then only `-finstrument-functions` builds are
/// recorded).
pub const ENV_PATCH: &str = "SLICE_TRACE_PATCH";

/// Entry patching as the environment asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patching {
    Off,
    On,
}

impl Patching {
    pub fn from_env() -> Patching {
        match std::env::var_os(ENV_PATCH) {
            Some(v) if v == "0" => Patching::Off,
            _ => Patching::On,
        }
    }
}

/// The value of `SLICE_TRACE_PATCH` the target gets: `1` for an ordinary (not instrumented)
/// x86-64 ELF when the user did not set it (patching is the default), else what the user
/// set (inherited) or nothing.
pub fn patch_env(program: &Path) -> Option<&'static str> {
    if std::env::var_os(ENV_PATCH).is_some() {
        return None;
    }
    let info = elf_info(&map_file(program).ok()?);
    // A stripped program (a system launcher: `env`, `sh -c`) has nothing to patch; like a
    // shell script, it passes on no patching to the programs it starts.
    (info.x86_64 && !info.instrumented && !info.links_libpython && info.functions > 0).then_some("1")
}

/// Classify the program `argv[0]` names (`argv` is not empty). The remaining arguments are
/// checked when it is a Python interpreter (refused flags, a script that does not exist).
pub fn classify(argv: &[OsString], path_var: Option<&OsStr>) -> Result<(PathBuf, TargetKind), Refusal> {
    classify_with(argv, path_var, Patching::from_env())
}

fn classify_with(argv: &[OsString], path_var: Option<&OsStr>, patching: Patching) -> Result<(PathBuf, TargetKind), Refusal> {
    let cmd = &argv[0];
    let Some(path) = resolve_command(cmd, path_var) else {
        let shown = cmd.to_string_lossy();
        let msg = if cmd.as_bytes().contains(&b'/') {
            format!("{shown}: no such file")
        } else {
            format!("{shown}: command not found (not on PATH)")
        };
        return Err(Refusal::new(127, msg));
    };
    if path.is_dir() {
        return Err(Refusal::new(126, format!("{}: is a directory, not a program", path.display())));
    }
    let head = read_head(&path).map_err(|e| Refusal::new(126, format!("{}: cannot read: {e}", path.display())))?;
    let looks_python = path.extension() == Some(OsStr::new("py")) || shebang(&head).is_some_and(|(i, a)| shebang_is_python(&i, &a));
    if !is_executable(&path) {
        let hint = if looks_python {
            format!("; run it with the interpreter: `trace run -- python3 {}`", path.display())
        } else {
            format!("; make it executable (`chmod +x {}`) or name its interpreter", path.display())
        };
        return Err(Refusal::new(126, format!("{}: is not executable{hint}", path.display())));
    }
    let name = path.file_name().unwrap_or_default();
    if is_python_name(name) || is_python_name(cmd) {
        check_python_args(&argv[1..])?;
        return Ok((path, TargetKind::Python));
    }
    if let Some((interp, args)) = shebang(&head) {
        if shebang_is_python(&interp, &args) {
            check_python_args(&args)?;
            return Ok((path, TargetKind::Python));
        }
        return Ok((path, TargetKind::Other));
    }
    if head.starts_with(b"\x7fELF") {
        let info = elf_info(&map_file(&path).map_err(|e| Refusal::new(126, format!("{}: cannot read: {e}", path.display())))?);
        if info.links_libpython {
            check_python_args(&argv[1..])?;
            return Ok((path, TargetKind::Python));
        }
        if info.instrumented {
            return Ok((path, TargetKind::Native));
        }
        // An ordinary build: the native shim patches its function entries when it loads
        // (docs/native-recording.md), unless SLICE_TRACE_PATCH=0.
        let p = path.display();
        if patching == Patching::Off {
            return Err(Refusal::new(
                126,
                format!(
                    "{p}: this native program was not built with -finstrument-functions and entry patching is off \
                     ({ENV_PATCH}=0), so its calls cannot be recorded; unset {ENV_PATCH}, or {NATIVE_HOWTO}"
                ),
            ));
        }
        if !info.x86_64 {
            return Err(Refusal::new(
                126,
                format!("{p}: entry patching works on x86-64 programs only, so its calls cannot be recorded; {NATIVE_HOWTO}"),
            ));
        }
        if !info.dynamic {
            return Err(Refusal::new(
                126,
                format!(
                    "{p}: this program is statically linked, and the recorder is loaded with LD_PRELOAD, which a static \
                     program never reads, so its calls cannot be recorded; link it dynamically (drop `-static`)"
                ),
            ));
        }
        if info.functions == 0 {
            // A system program (`env`, `sh -c`, `bash`, `make`, `xargs`: Debian strips them) is
            // how a user starts what they want recorded: it runs like a shell script, and the
            // programs it starts are recorded. Their own builds are refused with what to change.
            if is_system_program(&path) {
                return Ok((path, TargetKind::Other));
            }
            return Err(Refusal::new(
                126,
                format!(
                    "{p}: this program has no symbol table (it was stripped), so its functions can neither be found nor named; \
                     rebuild it without stripping: C/C++ without `-s` (add `-g` for source lines), Rust with \
                     `strip = false` and `debug = 1` (or `debug = \"line-tables-only\"`) in its Cargo profile \
                     (for a crate whose profile strips, as fd-find's does: \
                     `CARGO_PROFILE_RELEASE_STRIP=false CARGO_PROFILE_RELEASE_DEBUG=1 cargo install ...`)"
                ),
            ));
        }
        return Ok((path, TargetKind::Native));
    }
    if looks_python {
        return Err(Refusal::new(
            126,
            format!(
                "{}: a Python file without a `#!` line; run it with the interpreter: `trace run -- python3 {}`",
                path.display(),
                path.display()
            ),
        ));
    }
    Ok((path, TargetKind::Other))
}

/// Directories of the distribution's programs (after resolving links: `/bin` is `/usr/bin` on
/// merged-/usr systems). `/usr/local` and home directories are the user's own.
const SYSTEM_DIRS: &[&str] = &["/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/", "/usr/libexec/", "/usr/lib/", "/lib/"];

/// Whether `path` is a program of the system (see [`SYSTEM_DIRS`]).
fn is_system_program(path: &Path) -> bool {
    let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let real = real.to_string_lossy();
    SYSTEM_DIRS.iter().any(|d| real.starts_with(d))
}

/// Map a file to parse it: only the pages the parser touches (headers, symbol tables) are
/// read, not a whole large executable.
pub fn map_file(path: &Path) -> std::io::Result<memmap2::Mmap> {
    let file = std::fs::File::open(path)?;
    // SAFETY: a read-only private mapping of a file we only parse. If another process
    // rewrites it while mapped, parsing may fail (the callers treat that as "unknown"); if it
    // truncates it, touching a page past the new end raises SIGBUS and ends `trace` before the
    // program starts. That is accepted: it is the program about to be run (it could not run
    // either), and reading whole executables instead costs hundreds of megabytes for large
    // ones.
    unsafe { memmap2::Mmap::map(&file) }
}

fn read_head(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 512];
    let mut n = 0;
    while n < buf.len() {
        let k = f.read(&mut buf[n..])?;
        if k == 0 {
            break;
        }
        n += k;
    }
    buf.truncate(n);
    Ok(buf)
}

/// `#!interpreter args...` of a script: the interpreter and its arguments.
pub fn shebang(head: &[u8]) -> Option<(OsString, Vec<OsString>)> {
    let rest = head.strip_prefix(b"#!")?;
    let line = rest.split(|&c| c == b'\n').next()?;
    let mut words = line.split(|c| c.is_ascii_whitespace()).filter(|w| !w.is_empty()).map(|w| OsStr::from_bytes(w).to_os_string());
    let interp = words.next()?;
    Some((interp, words.collect()))
}

/// Whether a shebang runs Python: `#!/usr/bin/python3` or `#!/usr/bin/env [-S] python3`.
fn shebang_is_python(interp: &OsStr, args: &[OsString]) -> bool {
    let name = Path::new(interp).file_name().unwrap_or_default();
    if is_python_name(name) {
        return true;
    }
    if name == "env" {
        if let Some(prog) = args.iter().find(|a| !a.as_bytes().starts_with(b"-") && !a.as_bytes().contains(&b'=')) {
            return is_python_name(Path::new(prog).file_name().unwrap_or_default());
        }
    }
    false
}

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
    let Some((interp, args)) = shebang(&head) else { return Some(resolved.to_path_buf()) };
    if Path::new(&interp).file_name() == Some(OsStr::new("env")) {
        let prog = args.iter().find(|a| !a.as_bytes().starts_with(b"-") && !a.as_bytes().contains(&b'='))?;
        return resolve_command(prog, path_var);
    }
    Some(PathBuf::from(interp))
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
/// (about 100 ms). `None` when it is not a shim or the choice is not a plain installed version:
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

/// What `trace` needs to know about an ELF file.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ElfInfo {
    pub links_libpython: bool,
    pub instrumented: bool,
    /// An x86-64 ELF (entry patching's architecture).
    pub x86_64: bool,
    /// Defined function symbols (`.symtab`, else `.dynsym`): what entry patching can patch.
    pub functions: usize,
    /// Dynamically linked (it has a program interpreter, so LD_PRELOAD applies).
    pub dynamic: bool,
}

pub fn elf_info(data: &[u8]) -> ElfInfo {
    let Ok(file) = object::File::parse(data) else { return ElfInfo::default() };
    let links_libpython = file
        .section_by_name(".dynstr")
        .and_then(|s| s.data().ok())
        .is_some_and(|d| d.split(|&c| c == 0).any(|name| name.starts_with(b"libpython")));
    let is_cyg = |name: Result<&str, object::Error>| name.is_ok_and(|n| n == "__cyg_profile_func_enter");
    let instrumented = file.symbols().any(|s| is_cyg(s.name())) || file.dynamic_symbols().any(|s| is_cyg(s.name()));
    let is_func = |s: &object::Symbol| s.kind() == object::SymbolKind::Text && s.is_definition() && s.address() != 0;
    let functions = match file.symbols().filter(is_func).count() {
        0 => file.dynamic_symbols().filter(is_func).count(),
        n => n,
    };
    let x86_64 = file.architecture() == object::Architecture::X86_64;
    let dynamic = file.section_by_name(".interp").is_some();
    ElfInfo { links_libpython, instrumented, x86_64, functions, dynamic }
}

/// The CPython `major.minor` the Python shim was built for (its exported
/// `SLICETRACE_PYTHON_VERSION`).
pub fn shim_python_version(data: &[u8]) -> Option<String> {
    let file = object::File::parse(data).ok()?;
    let sym = file.dynamic_symbols().chain(file.symbols()).find(|s| s.name() == Ok("SLICETRACE_PYTHON_VERSION"))?;
    let addr = sym.address();
    for sec in file.sections() {
        if addr >= sec.address() && addr + 16 <= sec.address() + sec.size() {
            let d = sec.data().ok()?;
            let off = (addr - sec.address()) as usize;
            let bytes = d.get(off..off + 16)?;
            let end = bytes.iter().position(|&c| c == 0).unwrap_or(16);
            let v = std::str::from_utf8(&bytes[..end]).ok()?;
            return (!v.is_empty()).then(|| v.to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn python_names() {
        for n in ["python", "python3", "python3.11", "python2.7", "python3.13t"] {
            assert!(is_python_name(OsStr::new(n)), "{n}");
        }
        for n in ["pythonw", "ipython", "python3-config", "py", "pythont"] {
            assert!(!is_python_name(OsStr::new(n)), "{n}");
        }
    }

    #[test]
    fn shebangs() {
        let (i, a) = shebang(b"#!/usr/bin/env python3\nimport x").unwrap();
        assert!(shebang_is_python(&i, &a));
        let (i, a) = shebang(b"#!/opt/venv/bin/python -u\n").unwrap();
        assert_eq!(a, os(&["-u"]));
        assert!(shebang_is_python(&i, &a));
        let (i, a) = shebang(b"#!/usr/bin/env -S python3.11 -u\n").unwrap();
        assert!(shebang_is_python(&i, &a));
        let (i, a) = shebang(b"#!/bin/sh\n").unwrap();
        assert!(!shebang_is_python(&i, &a));
        assert!(shebang(b"\x7fELF").is_none());
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
    fn commands() {
        assert!(resolve_command(OsStr::new("sh"), Some(OsStr::new("/bin:/usr/bin"))).is_some());
        assert!(resolve_command(OsStr::new("no-such-command-xyz"), Some(OsStr::new("/bin"))).is_none());
        let r = classify(&os(&["no-such-command-xyz"]), Some(OsStr::new("/bin"))).unwrap_err();
        assert_eq!(r.code, 127);
    }

    #[test]
    fn plain_elf_is_refused_with_the_flags_when_patching_is_off() {
        // The test binary itself: an ordinary build with a symbol table.
        let me = std::env::current_exe().unwrap();
        let r = classify_with(&[me.clone().into_os_string()], None, Patching::Off).unwrap_err();
        assert!(r.message.contains("-finstrument-functions -g"), "{}", r.message);
        assert!(r.message.contains("SLICE_TRACE_PATCH=0"), "{}", r.message);
        assert_eq!(r.code, 126);
        let (_, kind) = classify_with(&[me.into_os_string()], None, Patching::On).unwrap();
        assert_eq!(kind, TargetKind::Native);
    }

    #[test]
    fn a_stripped_elf_is_refused_with_a_clear_message_unless_it_is_a_system_program() {
        // Debian's /bin/true is stripped: no .symtab, no defined function in .dynsym.
        let info = elf_info(&map_file(Path::new("/bin/true")).unwrap());
        if info.functions != 0 {
            return; // not stripped on this system
        }
        // As a system program it is a launcher, like a shell script (`env X=1 python3 ...`).
        let (_, kind) = classify_with(&os(&["/bin/true"]), None, Patching::On).unwrap();
        assert_eq!(kind, TargetKind::Other);
        // The same binary as the user's own build is refused.
        let d = tempfile::tempdir().unwrap();
        let mine = d.path().join("true");
        std::fs::copy("/bin/true", &mine).unwrap();
        let r = classify_with(&[mine.into_os_string()], None, Patching::On).unwrap_err();
        assert!(r.message.contains("no symbol table (it was stripped)"), "{}", r.message);
        // `cargo install` cannot edit the crate's profile: the environment form is named.
        assert!(r.message.contains("CARGO_PROFILE_RELEASE_STRIP=false CARGO_PROFILE_RELEASE_DEBUG=1 cargo install"), "{}", r.message);
        assert_eq!(r.code, 126);
    }

    #[test]
    fn not_elf_is_not_instrumented() {
        assert_eq!(elf_info(b"#!/bin/sh\n"), ElfInfo::default());
    }

    #[test]
    fn supported_range_parses() {
        assert_eq!(parse_supported("3.9-3.14"), Some(((3, 9), (3, 14))));
        assert_eq!(parse_supported("3.9"), None);
        assert_eq!(parse_supported("x-3.1"), None);
    }
}
