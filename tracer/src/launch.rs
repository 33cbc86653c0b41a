//! The executor of a [`Plan`]: spawn the target with the planned argv and environment and its
//! own stdin/stdout/stderr, forward the signals meant for it while it runs, and wait.

use crate::plan::{EnvChange, Plan};
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};
use trace_format::ExitStatus;

/// How the target ended.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    pub exit: ExitStatus,
    /// From the spawn to the end of the wait.
    pub duration: Duration,
}

/// Why the target did not run or could not be waited for.
#[derive(Debug)]
pub enum LaunchError {
    /// The spawn failed (`execvp`'s error).
    Spawn(std::io::Error),
    Wait(std::io::Error),
}

/// The `Command` the plan describes (the environment is `trace`'s with the plan's changes).
pub fn command(plan: &Plan) -> Command {
    let mut cmd = Command::new(&plan.argv[0]);
    cmd.args(&plan.argv[1..]);
    for (name, change) in &plan.env {
        match change {
            EnvChange::Set(v) => cmd.env(name, v),
            EnvChange::Remove => cmd.env_remove(name),
        };
    }
    cmd
}

/// The pid of the running target, for [`forward_signal`] (0: none).
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_signal(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

fn set_handler(sig: libc::c_int, handler: libc::sighandler_t) {
    // SAFETY: installing a disposition; the handler only calls kill().
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Block `sigs` in this thread; returns the mask to restore.
fn block_signals(sigs: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigset manipulation on local values and pthread_sigmask on this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        old
    }
}

fn restore_signals(old: &libc::sigset_t) {
    // SAFETY: restoring a mask pthread_sigmask gave us.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut()) };
}

/// Run the plan's command to its end. Like `time`, `trace` ignores the terminal's ^C and ^\
/// (they reach the target, in the same process group) and forwards SIGTERM and SIGHUP to it.
pub fn spawn_and_wait(plan: &Plan) -> Result<Outcome, LaunchError> {
    let mut cmd = command(plan);
    let started = Instant::now();
    // The signals `trace` handles are blocked from before the spawn until the handlers are in
    // place: a SIGTERM in between waits, then reaches the handler and is forwarded, instead of
    // killing `trace` and orphaning the target. (The child gets the mask `trace` had before,
    // restored between fork and exec. Handlers are installed after the spawn because an
    // ignored disposition would be inherited across exec.)
    let old_mask = block_signals(&[libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP]);
    {
        use std::os::unix::process::CommandExt;
        let child_mask = old_mask;
        // SAFETY: pthread_sigmask is async-signal-safe, and the closure touches only its copy.
        unsafe {
            cmd.pre_exec(move || {
                libc::pthread_sigmask(libc::SIG_SETMASK, &child_mask, std::ptr::null_mut());
                Ok(())
            })
        };
    }
    let spawned = cmd.spawn();
    if let Ok(c) = &spawned {
        CHILD.store(c.id() as i32, Ordering::Relaxed);
        set_handler(libc::SIGINT, libc::SIG_IGN);
        set_handler(libc::SIGQUIT, libc::SIG_IGN);
        set_handler(libc::SIGTERM, forward_signal as *const () as libc::sighandler_t);
        set_handler(libc::SIGHUP, forward_signal as *const () as libc::sighandler_t);
    }
    restore_signals(&old_mask);
    let mut child = spawned.map_err(LaunchError::Spawn)?;
    let status = child.wait().map_err(LaunchError::Wait)?;
    let duration = started.elapsed();
    CHILD.store(0, Ordering::Relaxed);
    let exit = match (status.code(), status.signal()) {
        (Some(code), _) => ExitStatus { code: Some(code), signal: None, core_dumped: false },
        (None, Some(sig)) => ExitStatus { code: None, signal: Some(sig), core_dumped: status.core_dumped() },
        (None, None) => ExitStatus { code: Some(1), signal: None, core_dumped: false },
    };
    Ok(Outcome { exit, duration })
}

/// Die by `sig` like the target did (without a core dump), so callers see the same status.
pub fn die_by_signal(sig: i32) -> ! {
    // SAFETY: plain system calls on our own process.
    unsafe {
        let rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::setrlimit(libc::RLIMIT_CORE, &rl);
        set_handler(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    std::process::exit(128 + sig)
}

pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => return format!("signal {sig}"),
    };
    format!("{name} ({sig})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::OutputPlan;
    use std::ffi::OsString;

    fn plan(argv: &[&str], env: Vec<(&'static str, EnvChange)>) -> Plan {
        let meta: trace_format::TraceMeta = serde_json::from_str(
            r#"{"format":"slice-trace","version":2,"tool":"t","argv":[],"cwd":"/","target_kind":"other","start_unix_ms":0}"#,
        )
        .unwrap();
        Plan {
            argv: argv.iter().map(OsString::from).collect(),
            program: argv[0].into(),
            env,
            output: OutputPlan { out: "/nonexistent".into(), rec: "/nonexistent".into() },
            meta,
        }
    }

    #[test]
    fn the_command_gets_the_planned_argv_and_environment() {
        let p = plan(
            &["/bin/sh", "-c", "x"],
            vec![("A_VAR", EnvChange::Set("1".into())), ("B_VAR", EnvChange::Remove), ("A_VAR", EnvChange::Set("2".into()))],
        );
        let c = command(&p);
        assert_eq!(c.get_program(), "/bin/sh");
        assert_eq!(c.get_args().collect::<Vec<_>>(), ["-c", "x"]);
        let envs: Vec<_> = c.get_envs().collect();
        assert_eq!(envs, [(std::ffi::OsStr::new("A_VAR"), Some(std::ffi::OsStr::new("2"))), (std::ffi::OsStr::new("B_VAR"), None)]);
    }

    #[test]
    fn exit_status_and_signal_death_are_reported() {
        let o =
            spawn_and_wait(&plan(&["/bin/sh", "-c", "test \"$PLANNED\" = yes && exit 3"], vec![("PLANNED", EnvChange::Set("yes".into()))]))
                .unwrap_or_else(|_| panic!("sh runs"));
        assert_eq!((o.exit.code, o.exit.signal), (Some(3), None), "the planned environment reached the target");
        let o = spawn_and_wait(&plan(&["/bin/sh", "-c", "kill -USR1 $$"], vec![])).unwrap_or_else(|_| panic!("sh runs"));
        assert_eq!((o.exit.code, o.exit.signal), (None, Some(libc::SIGUSR1)));
        assert!(matches!(spawn_and_wait(&plan(&["/nonexistent/program"], vec![])), Err(LaunchError::Spawn(_))));
        // The executor changed this test process's dispositions: give them back.
        for sig in [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP] {
            set_handler(sig, libc::SIG_DFL);
        }
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(15), "SIGTERM (15)");
        assert_eq!(signal_name(64), "signal 64");
    }
}
