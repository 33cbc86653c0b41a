//! What kind of program `trace run` was asked to launch, and whether it can be recorded.

use object::{Object, ObjectSection, ObjectSymbol};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
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
/// recorded). Read by [`trace_format::patching`].
pub use trace_format::patching::ENV_PATCH;

/// Entry patching as the environment asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patching {
    Off,
    /// The program and its own libraries (`1`, the default).
    On,
    /// System programs and libraries too (`all`).
    All,
}

impl Patching {
    pub fn from_env() -> Patching {
        match trace_format::patching::PatchMode::from_env() {
            Some(trace_format::patching::PatchMode::Off) => Patching::Off,
            Some(trace_format::patching::PatchMode::All) => Patching::All,
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
    patch_env_for(program, &elf_info(&map_file(program).ok()?))
}

/// [`patch_env`] for the program at `program` whose [`elf_info`] is `info`.
fn patch_env_for(program: &Path, info: &ElfInfo) -> Option<&'static str> {
    // A stripped program (a system launcher: `env`, `sh -c`) has nothing to patch; like a
    // shell script, it passes on no patching to the programs it starts. Unless its code is in
    // a library of its own (Debian's `jq` and `libjq.so.1`): that library is patched.
    let patchable = info.functions > 0 || !own_libraries(program, info).is_empty();
    (info.x86_64 && !info.instrumented && !info.links_libpython && patchable).then_some("1")
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
    let looks_python = path.extension() == Some(OsStr::new("py")) || shebang(&head).is_some_and(|sb| shebang_is_python(&sb));
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
    if let Some(sb) = shebang(&head) {
        if shebang_is_python(&sb) {
            // The interpreter gets its arguments from the `#!` line, then the script's path,
            // then the command's arguments.
            if let Some((_, mut args)) = script_interpreter(&sb) {
                args.push(path.clone().into_os_string());
                args.extend(argv[1..].iter().cloned());
                check_python_args(&args)?;
            }
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
        let own_code = !own_libraries(&path, &info).is_empty();
        if own_code {
            // A distribution's program whose code is in a library of its own (`jq` over
            // `libjq.so.1`): the shim patches that library (`trace_format::objects`).
            return Ok((path, TargetKind::Native));
        }
        if is_system_program(&path) && !(patching == Patching::All && info.functions > 0) {
            // A system program (`env`, `sh -c`, `bash`, `make`, `xargs`) is how a user starts
            // what they want recorded: the shim leaves it alone unless SLICE_TRACE_PATCH=all,
            // it runs like a shell script, and the programs it starts are recorded.
            return Ok((path, TargetKind::Other));
        }
        if info.functions == 0 {
            // The user's own stripped builds are refused with what to change.
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

/// Whether `path` is a program or library of the system (`trace_format::objects`, the rule the
/// native shim and `slice` read too): `/usr/bin`, `/usr/lib`, ...; `/usr/local` and home
/// directories are the user's own.
fn is_system_program(path: &Path) -> bool {
    let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    trace_format::objects::not_the_programs(&real.to_string_lossy(), None).is_some()
}

/// The libraries of the program at `program` (`info` is its [`elf_info`]) that are its own
/// code: named after it (`trace_format::objects::own_library`), as the shim decides.
fn own_libraries(program: &Path, info: &ElfInfo) -> Vec<String> {
    let real = program.canonicalize().unwrap_or_else(|_| program.to_path_buf());
    trace_format::objects::own_libraries(&real, info.needed.iter().map(String::as_str)).into_iter().map(str::to_string).collect()
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

/// The `#!` line of a script, as the Linux kernel reads it (`fs/binfmt_script.c`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shebang {
    /// The interpreter's path: after `#!` and any spaces or tabs, up to a space, tab or NUL.
    pub interpreter: OsString,
    /// The one optional argument: the rest of the line after spaces or tabs, up to a NUL,
    /// without trailing spaces or tabs. Other whitespace is kept: the CR of a CRLF line is part
    /// of the last word (so `#!/usr/bin/python3\r` names a program that does not exist, and
    /// the script fails the same with or without `trace`).
    pub arg: Option<OsString>,
}

/// The kernel's buffer for the `#!` line (`BINPRM_BUF_SIZE`).
const BINPRM_BUF_SIZE: usize = 256;

/// The `#!` line of a script as the kernel reads it (see [`Shebang`]); `None` when the kernel
/// would not run it as a script (no `#!`, no interpreter name, or a name cut off by the end of
/// the kernel's 256-byte buffer).
pub fn shebang(head: &[u8]) -> Option<Shebang> {
    let mut buf = [0u8; BINPRM_BUF_SIZE];
    let n = head.len().min(BINPRM_BUF_SIZE);
    buf[..n].copy_from_slice(&head[..n]);
    if &buf[..2] != b"#!" {
        return None;
    }
    let spacetab = |c: u8| c == b' ' || c == b'\t';
    let last = BINPRM_BUF_SIZE - 1;
    let mut end = match buf.iter().position(|&c| c == b'\n') {
        Some(nl) => nl,
        None => {
            // No newline: the interpreter's name must end (space, tab, NUL) within the buffer.
            let name = (2..=last).find(|&i| !spacetab(buf[i]))?;
            (name..=last).find(|&i| spacetab(buf[i]) || buf[i] == 0)?;
            last
        }
    };
    while end > 2 && spacetab(buf[end - 1]) {
        end -= 1;
    }
    let line = &buf[2..end];
    let start = line.iter().position(|&c| !spacetab(c))?;
    let name_end = line[start..].iter().position(|&c| spacetab(c) || c == 0).map_or(line.len(), |k| start + k);
    let interpreter = OsStr::from_bytes(&line[start..name_end]).to_os_string();
    let arg = if name_end < line.len() && line[name_end] != 0 {
        line[name_end..].iter().position(|&c| !spacetab(c)).map(|k| {
            let a = &line[name_end + k..];
            let a = &a[..a.iter().position(|&c| c == 0).unwrap_or(a.len())];
            OsStr::from_bytes(a).to_os_string()
        })
    } else {
        None
    };
    Some(Shebang { interpreter, arg })
}

/// The program a script's `#!` line runs and the arguments before the script's path: the
/// interpreter and its argument, or, through `env`, the command `env` would run (GNU env: its
/// options, `-S` strings split, `NAME=VALUE` assignments skipped; [`env_command`]). `None` when
/// `env` would refuse its arguments or has no command to run.
pub fn script_interpreter(sb: &Shebang) -> Option<(OsString, Vec<OsString>)> {
    let args: Vec<OsString> = sb.arg.iter().cloned().collect();
    if Path::new(&sb.interpreter).file_name() == Some(OsStr::new("env")) {
        return env_command(&args);
    }
    Some((sb.interpreter.clone(), args))
}

/// C's `isspace` in the C locale, the separators of GNU env's `-S` strings.
fn c_isspace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Split a `-S` string as GNU env (coreutils 9) does: whitespace separates outside quotes;
/// `'...'` keeps everything but `\\` and `\'`; `"..."` takes escapes and `${NAME}`; `\_`
/// separates (a space inside double quotes); `\c` and a `#` starting an argument end the
/// string; `\f \n \r \t \v \# \$ \" \' \\` are escapes; `${NAME}` is the variable's value.
/// `None` where env fails (an unknown escape, `$` without `{NAME}`, an open quote).
pub fn split_env_string(s: &[u8]) -> Option<Vec<OsString>> {
    let s = &s[s.iter().position(|&c| !c_isspace(c)).unwrap_or(s.len())..];
    let mut out: Vec<Vec<u8>> = Vec::new();
    let (mut sq, mut dq, mut sep) = (false, false, true);
    let mut i = 0;
    let mut ended = false;
    let push = |out: &mut Vec<Vec<u8>>, sep: &mut bool, bytes: &[u8]| {
        if *sep {
            out.push(Vec::new());
            *sep = false;
        }
        if let Some(last) = out.last_mut() {
            last.extend_from_slice(bytes);
        }
    };
    while i < s.len() {
        let c = s[i];
        match c {
            b'\'' if !dq => {
                sq = !sq;
                push(&mut out, &mut sep, b"");
                i += 1;
            }
            b'"' if !sq => {
                dq = !dq;
                push(&mut out, &mut sep, b"");
                i += 1;
            }
            c if c_isspace(c) && !sq && !dq => {
                sep = true;
                while i < s.len() && c_isspace(s[i]) {
                    i += 1;
                }
            }
            b'#' if sep => {
                ended = true;
                break;
            }
            b'\\' if !sq || matches!(s.get(i + 1), Some(b'\\' | b'\'')) => {
                let next = *s.get(i + 1)?;
                i += 2;
                let ch = match next {
                    b'\\' | b'\'' => next,
                    b'#' | b'$' | b'"' if !sq => next,
                    b'_' if !dq => {
                        sep = true;
                        continue;
                    }
                    b'_' => b' ',
                    b'c' if !dq => {
                        ended = true;
                        break;
                    }
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'v' => 0x0b,
                    _ => return None,
                };
                push(&mut out, &mut sep, &[ch]);
            }
            b'$' if !sq => {
                let rest = &s[i..];
                let name_len = rest.get(2..).map_or(0, |r| r.iter().take_while(|&&b| b.is_ascii_alphanumeric() || b == b'_').count());
                let valid = rest.get(1) == Some(&b'{')
                    && rest.get(2).is_some_and(|&b| b.is_ascii_alphabetic() || b == b'_')
                    && rest.get(2 + name_len) == Some(&b'}');
                if !valid {
                    return None;
                }
                if let Some(v) = std::env::var_os(OsStr::from_bytes(&rest[2..2 + name_len])) {
                    push(&mut out, &mut sep, v.as_bytes());
                }
                i += 3 + name_len;
            }
            _ => {
                push(&mut out, &mut sep, &[c]);
                i += 1;
            }
        }
    }
    if !ended && (sq || dq) {
        return None;
    }
    Some(out.into_iter().map(OsString::from_vec).collect())
}

/// The command GNU env runs given `args` (after its own name): options (`-i`, `-0`, `-v`,
/// `-u NAME`, `-C DIR`, `-a ARG0`, `-S STRING` whose words are parsed again as arguments, their
/// long forms and the signal options), then `NAME=VALUE` assignments, then the command.
pub fn env_command(args: &[OsString]) -> Option<(OsString, Vec<OsString>)> {
    const WITH_ARG: &[&str] = &["unset", "chdir", "split-string", "argv0"];
    const OPTIONAL_ARG: &[&str] = &["default-signal", "ignore-signal", "block-signal"];
    const NO_ARG: &[&str] = &["ignore-environment", "null", "debug", "list-signal-handling"];
    let mut args: std::collections::VecDeque<OsString> = args.iter().cloned().collect();
    loop {
        let a = args.front().map(|a| a.as_bytes().to_vec())?;
        if a == b"--" {
            args.pop_front();
            break;
        }
        if a == b"-" {
            args.pop_front();
            continue;
        }
        if let Some(long) = a.strip_prefix(b"--") {
            args.pop_front();
            let (name, value) = match long.iter().position(|&c| c == b'=') {
                Some(k) => (&long[..k], Some(&long[k + 1..])),
                None => (long, None),
            };
            let name = std::str::from_utf8(name).ok()?;
            // An exact name, or the unique option it abbreviates (getopt_long).
            let all: Vec<&str> = WITH_ARG.iter().chain(OPTIONAL_ARG).chain(NO_ARG).copied().collect();
            let matches: Vec<&str> = all.iter().copied().filter(|o| o.starts_with(name)).collect();
            let full: &str = match (all.iter().find(|o| **o == name), matches.as_slice()) {
                (Some(o), _) => o,
                (None, [o]) => o,
                _ => return None,
            };
            if WITH_ARG.contains(&full) {
                let v = match value {
                    Some(v) => v.to_vec(),
                    None => args.pop_front()?.into_vec(),
                };
                if full == "split-string" {
                    for w in split_env_string(&v)?.into_iter().rev() {
                        args.push_front(w);
                    }
                }
            } else if NO_ARG.contains(&full) && value.is_some() {
                return None;
            }
            continue;
        }
        if a.len() > 1 && a[0] == b'-' {
            args.pop_front();
            let mut k = 1;
            while k < a.len() {
                match a[k] {
                    b'i' | b'0' | b'v' => k += 1,
                    b'u' | b'C' | b'a' | b'S' => {
                        let v = if k + 1 < a.len() { a[k + 1..].to_vec() } else { args.pop_front()?.into_vec() };
                        if a[k] == b'S' {
                            for w in split_env_string(&v)?.into_iter().rev() {
                                args.push_front(w);
                            }
                        }
                        break;
                    }
                    // Anything else (a space: `#!/usr/bin/env -i python3` without -S) is
                    // an error for env.
                    _ => return None,
                }
            }
            continue;
        }
        break;
    }
    while args.front().is_some_and(|a| a.as_bytes().contains(&b'=')) {
        args.pop_front();
    }
    let prog = args.pop_front()?;
    Some((prog, args.into()))
}

/// Whether a script's `#!` line runs Python: `#!/usr/bin/python3` or through `env`.
fn shebang_is_python(sb: &Shebang) -> bool {
    script_interpreter(sb).is_some_and(|(prog, _)| is_python_name(Path::new(&prog).file_name().unwrap_or_default()))
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
    /// The shared libraries its dynamic string table names (`DT_NEEDED`, and the sonames of
    /// its symbol versions): `libjq.so.1`, `libc.so.6`.
    pub needed: Vec<String>,
}

pub fn elf_info(data: &[u8]) -> ElfInfo {
    let Ok(file) = object::File::parse(data) else { return ElfInfo::default() };
    let dynstr = file.section_by_name(".dynstr").and_then(|s| s.data().ok()).unwrap_or_default();
    let links_libpython = dynstr.split(|&c| c == 0).any(|name| name.starts_with(b"libpython"));
    let needed: Vec<String> = dynstr
        .split(|&c| c == 0)
        .filter(|n| n.starts_with(b"lib") && n.windows(3).any(|w| w == b".so"))
        .filter_map(|n| std::str::from_utf8(n).ok().map(str::to_string))
        .collect();
    let is_cyg = |name: Result<&str, object::Error>| name.is_ok_and(|n| n == "__cyg_profile_func_enter");
    let instrumented = file.symbols().any(|s| is_cyg(s.name())) || file.dynamic_symbols().any(|s| is_cyg(s.name()));
    let is_func = |s: &object::Symbol| s.kind() == object::SymbolKind::Text && s.is_definition() && s.address() != 0;
    let functions = match file.symbols().filter(is_func).count() {
        0 => file.dynamic_symbols().filter(is_func).count(),
        n => n,
    };
    let x86_64 = file.architecture() == object::Architecture::X86_64;
    let dynamic = file.section_by_name(".interp").is_some();
    ElfInfo { links_libpython, instrumented, x86_64, functions, dynamic, needed }
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

    fn sb(i: &str, a: Option<&str>) -> Shebang {
        Shebang { interpreter: i.into(), arg: a.map(OsString::from) }
    }

    #[test]
    fn shebangs_are_read_as_the_kernel_reads_them() {
        assert_eq!(shebang(b"#!/usr/bin/env python3\nimport x"), Some(sb("/usr/bin/env", Some("python3"))));
        // One argument: the rest of the line, inner spaces kept, trailing spaces and tabs cut.
        assert_eq!(shebang(b"#! /usr/bin/env -S python3 -u \t\n"), Some(sb("/usr/bin/env", Some("-S python3 -u"))));
        assert_eq!(shebang(b"#!/opt/venv/bin/python -u\n"), Some(sb("/opt/venv/bin/python", Some("-u"))));
        assert_eq!(shebang(b"#!/bin/sh"), Some(sb("/bin/sh", None)));
        // CR is no separator for the kernel: it stays in the last word.
        assert_eq!(shebang(b"#!/usr/bin/python3\r\n"), Some(sb("/usr/bin/python3\r", None)));
        assert_eq!(shebang(b"#!/usr/bin/env python3\r\n"), Some(sb("/usr/bin/env", Some("python3\r"))));
        // A NUL ends the name and the argument.
        assert_eq!(shebang(b"#!/bin/sh\0 -x\n"), Some(sb("/bin/sh", None)));
        assert_eq!(shebang(b"#!/bin/sh -x\0y\n"), Some(sb("/bin/sh", Some("-x"))));
        assert_eq!(shebang(b"#!  \t\n"), None);
        assert!(shebang(b"\x7fELF").is_none());
        // No newline in the kernel's 256 bytes: a complete name runs (its argument cut at 253
        // bytes); a name running past the buffer is refused.
        let long = [b"#!/bin/sh -".as_slice(), &[b'x'; 300]].concat();
        assert_eq!(shebang(&long).and_then(|s| s.arg).map(|a| a.len()), Some(253 - "/bin/sh ".len()));
        let cut = [b"#!/".as_slice(), &[b'x'; 300]].concat();
        assert_eq!(shebang(&cut), None);
    }

    #[test]
    fn env_lines_run_what_gnu_env_runs() {
        let run = |line: &[u8]| shebang(line).and_then(|s| script_interpreter(&s));
        let cmd = |p: &str, a: &[&str]| Some((OsString::from(p), os(a)));
        assert_eq!(run(b"#!/usr/bin/env python3\n"), cmd("python3", &[]));
        assert_eq!(run(b"#!/usr/bin/env -S python3 -u\n"), cmd("python3", &["-u"]));
        assert_eq!(run(b"#!/usr/bin/env -S python3 -u\r\n"), cmd("python3", &["-u"]));
        assert_eq!(run(b"#!/usr/bin/env -Spython3 -X dev\n"), cmd("python3", &["-X", "dev"]));
        assert_eq!(run(b"#!/usr/bin/env --split-string=-i A=1 'python3' \"-W\"\\_ignore # c\n"), cmd("python3", &["-W", "ignore"]));
        assert_eq!(run(b"#!/usr/bin/env -S -u HOME -C /tmp python3 -c 'print(1)'\n"), cmd("python3", &["-c", "print(1)"]));
        // Without -S env gets one argument: a program named with its spaces (that env cannot
        // find); with CR, a program named "python3\r".
        assert_eq!(run(b"#!/usr/bin/env python3 -u\n"), cmd("python3 -u", &[]));
        assert_eq!(run(b"#!/usr/bin/env python3\r\n"), cmd("python3\r", &[]));
        // What env refuses.
        assert_eq!(run(b"#!/usr/bin/env -S python3 $X\n"), None);
        assert_eq!(run(b"#!/usr/bin/env -S python3 'open\n"), None);
        assert_eq!(run(b"#!/usr/bin/env -i python3\n"), None);
        assert_eq!(run(b"#!/usr/bin/env\n"), None);
        // Python or not.
        for (line, py) in [
            (&b"#!/usr/bin/env -S python3.11 -u\n"[..], true),
            (b"#!/usr/bin/python3\n", true),
            (b"#!/usr/bin/python3\r\n", false),
            (b"#!/usr/bin/env python3\r\n", false),
            (b"#!/bin/sh\n", false),
        ] {
            assert_eq!(shebang(line).is_some_and(|s| shebang_is_python(&s)), py, "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn env_split_strings() {
        let split = |s: &str| split_env_string(s.as_bytes()).map(|v| v.into_iter().map(|a| a.into_string().unwrap()).collect::<Vec<_>>());
        assert_eq!(split("  a\tb\x0bc\rd"), Some(vec!["a".into(), "b".into(), "c".into(), "d".into()]));
        assert_eq!(split(r#"'a b' "c\_d" e\_f \c g"#), Some(vec!["a b".into(), "c d".into(), "e".into(), "f".into()]));
        assert_eq!(split(r#"'a\nb' "a\nb" '' x"#), Some(vec!["a\\nb".into(), "a\nb".into(), "".into(), "x".into()]));
        assert_eq!(split("a#b #c"), Some(vec!["a#b".into()]));
        assert_eq!(split("${SLICE_TRACE_NO_SUCH_VAR_X} a"), Some(vec!["a".into()]));
        assert_eq!(split(r"a\q"), None);
        assert_eq!(split("a\\"), None);
        assert_eq!(split("${1X}"), None);
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
    fn a_system_program_is_a_launcher_unless_its_code_is_in_a_library_of_its_own() {
        // Debian's `ls` defines a few functions in .dynsym (`_obstack_*`), which the shim
        // would leave alone as a system program's: a launcher, unless SLICE_TRACE_PATCH=all.
        let ls = resolve_command(OsStr::new("ls"), Some(OsStr::new("/usr/bin:/bin"))).unwrap();
        assert!(elf_info(&map_file(&ls).unwrap()).functions > 0, "{} defines no function: not Debian's ls", ls.display());
        assert_eq!(classify_with(&os(&["ls"]), Some(OsStr::new("/usr/bin:/bin")), Patching::On).unwrap().1, TargetKind::Other);
        assert_eq!(classify_with(&os(&["ls"]), Some(OsStr::new("/usr/bin:/bin")), Patching::All).unwrap().1, TargetKind::Native);
        assert_eq!(patch_env_for(&ls, &elf_info(&map_file(&ls).unwrap())), Some("1"), "patched only if the shim is asked to");
        // Debian's jq is a stripped `main` over libjq.so.1: recorded, through that library.
        let jq = Path::new("/usr/bin/jq");
        assert!(jq.is_file(), "/usr/bin/jq is missing: `apt-get install jq` (.ci/run installs it)");
        let info = elf_info(&map_file(jq).unwrap());
        assert_eq!(own_libraries(jq, &info), vec!["libjq.so.1".to_string()]);
        assert_eq!(classify_with(&os(&["/usr/bin/jq"]), None, Patching::On).unwrap().1, TargetKind::Native);
        assert_eq!(patch_env_for(jq, &info), Some("1"));
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
