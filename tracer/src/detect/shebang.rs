//! A script's `#!` line and `env`'s command line, read as the kernel and GNU env read them.

use super::*;

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
pub(super) fn shebang_is_python(sb: &Shebang) -> bool {
    script_interpreter(sb).is_some_and(|(prog, _)| is_python_name(Path::new(&prog).file_name().unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
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
}
