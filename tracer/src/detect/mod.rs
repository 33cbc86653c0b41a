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

mod python;
mod shebang;

pub use python::*;
pub use shebang::*;

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

/// Why a program's own functions cannot be recorded, even with `SLICE_TRACE_PATCH=all`: a
/// stripped ELF file (no `.symtab`; its dynamic symbols name only what it exports, none for
/// Debian's `/usr/bin/cmark`, with libcmark linked in) whose separate debug file, where they
/// would be, is not installed. `None` for any other file.
pub fn stripped_note(program: &Path) -> Option<String> {
    let map = map_file(program).ok()?;
    let file = object::File::parse(&*map).ok()?;
    // Stripped: no `.symtab`; what `.dynsym` defines is only what it exports.
    if file.format() != object::BinaryFormat::Elf || file.symbols().next().is_some() {
        return None;
    }
    let exported = elf_info(&map).functions;
    let build_id = file.build_id().ok().flatten();
    let link = file.gnu_debuglink().ok().flatten().map(|(name, _)| name);
    let candidates = trace_format::objects::debug_file_candidates(program, build_id, link);
    if candidates.iter().any(|c| c.is_file()) {
        return None;
    }
    let p = trace_format::escape::line(&program.to_string_lossy()).into_owned();
    let looked = candidates.first().map(|c| format!(" ({} is not there)", c.display())).unwrap_or_default();
    let found = match exported {
        0 => "none of its own functions can be found".to_string(),
        n => format!("only the {n} functions it exports can be found, not the rest of its code"),
    };
    Some(format!(
        "`{p}` is stripped: it has no symbol table and no separate debug information{looked}, so even with \
         SLICE_TRACE_PATCH=all {found}; its debug symbols would name them (on Debian and Ubuntu, the `-dbgsym` package of \
         the package that installs it, which `dpkg -S {p}` names)"
    ))
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
}
