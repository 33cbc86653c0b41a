//! The executor of a [`Plan`]: spawn the target with the planned argv and environment and its
//! own stdin/stdout/stderr, in a process group of its own, forward the signals meant for it
//! while it runs (and end it after a grace period when asked to stop), and wait.

use crate::plan::{EnvChange, Plan};
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use trace_format::ExitStatus;

/// How long the program gets to end after `trace` forwarded a signal asking it to stop
/// (SIGTERM, SIGINT, SIGHUP sent to `trace`), before `trace` kills its process group with
/// SIGKILL and finishes the trace. Whoever stops `trace` (the MCP server's `record`, a CI
/// runner) must wait at least this long plus the time to finish the trace before it gives up.
pub const GRACE_SECS: u32 = 3;

/// How the target ended.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    pub exit: ExitStatus,
    /// From the spawn to the end of the wait.
    pub duration: Duration,
    /// Set when `trace` was asked to stop the run (see [`GRACE_SECS`]).
    pub stopped: Option<trace_format::Stopped>,
}

/// Why the target did not run or could not be waited for.
#[derive(Debug)]
pub enum LaunchError {
    /// The spawn failed (`execvp`'s error).
    Spawn(std::io::Error),
    Wait(std::io::Error),
    /// `trace` was asked to stop (this signal) before the program was started
    /// ([`catch_stop_signals`]): it is not started.
    Stopped(i32),
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

/// Where forwarded signals go: `-pgid` (the program's own process group) or the program's pid
/// (when it shares `trace`'s group, see [`own_group`]); 0 while no program runs.
static TARGET: AtomicI32 = AtomicI32::new(0);
/// The program shares `trace`'s process group (interactive use).
static SAME_GROUP: AtomicBool = AtomicBool::new(false);
/// The first stop signal forwarded (0: none), and whether the grace ran out.
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);
static KILLED: AtomicBool = AtomicBool::new(false);
/// `CLOCK_MONOTONIC` nanoseconds when the first stop signal was forwarded.
static STOP_AT_NS: AtomicU64 = AtomicU64::new(0);
/// The program has ended: a stop signal from then on is too late to matter.
static ENDED: AtomicBool = AtomicBool::new(false);

/// The signals `trace` forwards to the program; the first three also start the grace period.
const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];
const FORWARDED: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

fn monotonic_ns() -> u64 {
    // SAFETY: clock_gettime (async-signal-safe) fills a local timespec.
    unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

/// SIGTERM, SIGINT, SIGHUP, SIGQUIT to `trace`: forwarded to the program (its group). When the
/// program shares `trace`'s group, a signal the kernel sent (the terminal's ^C, ^\, hangup:
/// `si_code` > 0) has reached the whole group already and is not sent twice. The first stop
/// signal arms the grace timer (`alarm`). Only async-signal-safe calls: kill, alarm,
/// clock_gettime, atomics; errno is saved and restored.
extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let target = TARGET.load(Ordering::SeqCst);
    if target == 0 {
        // Before the program is started ([`catch_stop_signals`]): remembered, and the program
        // is then not started. After it ended: nothing left to stop.
        if !ENDED.load(Ordering::SeqCst)
            && STOP_SIGNALS.contains(&sig)
            && STOP_SIGNAL.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst).is_ok()
        {
            STOP_AT_NS.store(monotonic_ns(), Ordering::SeqCst);
        }
        return;
    }
    // SAFETY: the kernel passes a valid siginfo with SA_SIGINFO (null checked anyway).
    let from_kernel = !info.is_null() && unsafe { (*info).si_code } > 0;
    if from_kernel && SAME_GROUP.load(Ordering::SeqCst) {
        return;
    }
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    // SAFETY: kill and alarm are async-signal-safe; errno is put back below.
    unsafe {
        libc::kill(target, sig);
        if STOP_SIGNALS.contains(&sig) && STOP_SIGNAL.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            STOP_AT_NS.store(monotonic_ns(), Ordering::SeqCst);
            libc::alarm(GRACE_SECS);
        }
        *libc::__errno_location() = errno;
    }
}

/// The grace period ran out: SIGKILL the program's group (or the program, when it shares
/// `trace`'s group). kill is async-signal-safe; errno is kept.
extern "C" fn on_alarm(_sig: libc::c_int) {
    let target = TARGET.load(Ordering::SeqCst);
    if target != 0 {
        KILLED.store(true, Ordering::SeqCst);
        // SAFETY: kill is async-signal-safe; errno is restored.
        unsafe {
            let errno = *libc::__errno_location();
            libc::kill(target, libc::SIGKILL);
            *libc::__errno_location() = errno;
        }
    }
}

/// SIGTSTP sent to `trace` while the program has its own group: stop the program's group, stop
/// `trace` (so whoever stopped it sees it stopped), and continue the program when `trace` is
/// continued. kill is async-signal-safe.
extern "C" fn on_tstp(_sig: libc::c_int) {
    let target = TARGET.load(Ordering::SeqCst);
    // SAFETY: kill/getpid are async-signal-safe; errno is restored.
    unsafe {
        let errno = *libc::__errno_location();
        if target != 0 {
            libc::kill(target, libc::SIGTSTP);
        }
        libc::kill(libc::getpid(), libc::SIGSTOP);
        if target != 0 {
            libc::kill(target, libc::SIGCONT);
        }
        *libc::__errno_location() = errno;
    }
}

fn set_action(sig: libc::c_int, handler: libc::sighandler_t, siginfo: bool) {
    // SAFETY: installing a disposition; the handlers only make async-signal-safe calls.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        sa.sa_flags = libc::SA_RESTART | if siginfo { libc::SA_SIGINFO } else { 0 };
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

fn set_handler(sig: libc::c_int, handler: libc::sighandler_t) {
    set_action(sig, handler, false);
}

/// The first thing `trace run` does: handle the stop signals (SIGTERM, SIGINT, SIGHUP) from
/// the start, so that one coming while `trace` prepares the run (detecting the target,
/// writing the shims, the trace directory) is remembered and the run ends as a readable
/// "stopped" trace with no program started ([`LaunchError::Stopped`]), instead of killing
/// `trace` half-way. A signal `trace` inherited as ignored stays ignored (`nohup`). Then the
/// three are unblocked: a caller that starts `trace` with them blocked (as `slice mcp` does)
/// closes the last window, between its exec and this call; a signal sent meanwhile waits and
/// is handled here. The program starts with them unblocked.
pub fn catch_stop_signals() {
    for sig in STOP_SIGNALS {
        if !ignored(sig) {
            set_action(sig, on_signal as *const () as libc::sighandler_t, true);
        }
    }
    // SAFETY: sigset manipulation on a local and pthread_sigmask on this (the main) thread,
    // before any other thread exists.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in STOP_SIGNALS {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// Whether `sig` is ignored in this process now. `trace` never sets a signal to ignored, so
/// one ignored here was inherited that way (`nohup` ignores SIGHUP; a shell without job
/// control starts background commands with SIGINT and SIGQUIT ignored). The program inherits
/// it ignored too, and `trace` keeps it so: it neither handles nor forwards such a signal,
/// since forwarding one the program ignores would only start the grace period and then kill
/// a program its user asked to survive it (`nohup trace run -- ...` and a hangup).
fn ignored(sig: libc::c_int) -> bool {
    // SAFETY: reading the current disposition into a local.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
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

/// Whether the program gets its own process group: yes, unless `trace` runs at a terminal:
/// stdin, stdout or stderr is one, or `trace` is the foreground job of its controlling terminal
/// (`trace run -- prog <in >out 2>err` typed at a shell: the program may still open `/dev/tty`,
/// as `getpass` does). Interactive runs keep `trace`'s group, so the shell's job control (^C,
/// ^Z, `fg`, `bg`, reading the terminal) works on the program exactly as without `trace`;
/// everything else (an agent, CI, a script with pipes or files) gets the program in a group
/// of its own, which `trace` signals as a whole and survives: a SIGKILL to it never reaches
/// `trace`.
pub fn own_group() -> bool {
    // SAFETY: isatty on the standard descriptors.
    if (0..3).any(|fd| unsafe { libc::isatty(fd) } == 1) {
        return false;
    }
    // SAFETY: open/tcgetpgrp/getpgrp/close on a descriptor we own; O_NOCTTY never acquires one.
    unsafe {
        let fd = libc::open(c"/dev/tty".as_ptr(), libc::O_RDONLY | libc::O_NOCTTY | libc::O_CLOEXEC);
        if fd < 0 {
            return true;
        }
        let foreground = libc::tcgetpgrp(fd) == libc::getpgrp();
        libc::close(fd);
        !foreground
    }
}

/// Wait until process `pid` (our child) has ended, leaving it to be reaped.
fn wait_unreaped(pid: u32) -> std::io::Result<()> {
    loop {
        // SAFETY: waitid on our own child into a local siginfo.
        let r = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT)
        };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Whether any process of group `pgid` is left.
fn group_alive(pgid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

/// Run the plan's command to its end. The program runs in a process group of its own (see
/// [`own_group`]). SIGTERM, SIGINT, SIGHUP and SIGQUIT sent to `trace` are forwarded to that
/// group; after a stop signal the program has [`GRACE_SECS`] to end, then `trace` kills the
/// group with SIGKILL, and returns so the trace is finished. The program is also killed if
/// `trace` dies first (`PR_SET_PDEATHSIG`): it is never orphaned.
pub fn spawn_and_wait(plan: &Plan) -> Result<Outcome, LaunchError> {
    let mut cmd = command(plan);
    let own = own_group();
    let started = Instant::now();
    // The signals `trace` handles are blocked from before the spawn until the handlers are in
    // place: a SIGTERM in between waits, then reaches the handler and is forwarded, instead of
    // killing `trace` and orphaning the target. (The child gets the mask `trace` had before,
    // restored between fork and exec. Handlers are installed after the spawn because a
    // handler's disposition is reset by exec, but an ignored one would be inherited.)
    let handled = [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP, libc::SIGALRM, libc::SIGTSTP];
    let old_mask = block_signals(&handled);
    {
        use std::os::unix::process::CommandExt;
        if own {
            cmd.process_group(0);
        }
        let child_mask = old_mask;
        // SAFETY: getpid before the fork; between fork and exec only async-signal-safe calls
        // (prctl, getppid, kill, pthread_sigmask) on the closure's copies.
        let parent = unsafe { libc::getpid() };
        unsafe {
            cmd.pre_exec(move || {
                // Killed with `trace`: if `trace` dies (even by SIGKILL), so does the program.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
                if libc::getppid() != parent {
                    libc::kill(libc::getpid(), libc::SIGKILL);
                }
                libc::pthread_sigmask(libc::SIG_SETMASK, &child_mask, std::ptr::null_mut());
                Ok(())
            })
        };
    }
    // Asked to stop before the start (the signals are blocked here, so none comes in between).
    let early = STOP_SIGNAL.load(Ordering::SeqCst);
    if early != 0 {
        restore_signals(&old_mask);
        return Err(LaunchError::Stopped(early));
    }
    KILLED.store(false, Ordering::SeqCst);
    let spawned = cmd.spawn();
    let mut pgid = 0;
    if let Ok(c) = &spawned {
        let pid = c.id() as i32;
        pgid = if own { pid } else { 0 };
        SAME_GROUP.store(!own, Ordering::SeqCst);
        TARGET.store(if own { -pid } else { pid }, Ordering::SeqCst);
        for sig in FORWARDED {
            if !ignored(sig) {
                set_action(sig, on_signal as *const () as libc::sighandler_t, true);
            }
        }
        set_handler(libc::SIGALRM, on_alarm as *const () as libc::sighandler_t);
        if own && !ignored(libc::SIGTSTP) {
            set_handler(libc::SIGTSTP, on_tstp as *const () as libc::sighandler_t);
        }
    }
    restore_signals(&old_mask);
    let mut child = spawned.map_err(LaunchError::Spawn)?;
    // Wait for the end without reaping: until it is reaped, the program's pid (and group id)
    // cannot be reused, so a late forward or grace kill can never reach another process.
    wait_unreaped(child.id()).map_err(LaunchError::Wait)?;
    let stop = STOP_SIGNAL.load(Ordering::SeqCst);
    let old_mask = block_signals(&handled);
    TARGET.store(0, Ordering::SeqCst);
    ENDED.store(true, Ordering::SeqCst);
    // SAFETY: cancelling our own alarm.
    unsafe { libc::alarm(0) };
    restore_signals(&old_mask);
    let status = child.wait().map_err(LaunchError::Wait)?;
    let duration = started.elapsed();
    // Asked to stop: what is left of the program's group (its children) gets the rest of the
    // grace period, then SIGKILL. (A group id is not reused while a member lives.)
    if own && stop != 0 {
        let deadline = STOP_AT_NS.load(Ordering::SeqCst) + u64::from(GRACE_SECS) * 1_000_000_000;
        while group_alive(pgid) && monotonic_ns() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if group_alive(pgid) {
            KILLED.store(true, Ordering::SeqCst);
            // SAFETY: kill on the group we created, which still has members.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
    let stopped = (stop != 0).then(|| trace_format::Stopped { signal: stop, killed: KILLED.load(Ordering::SeqCst) });
    let exit = match (status.code(), status.signal()) {
        (Some(code), _) => ExitStatus { code: Some(code), signal: None, core_dumped: false },
        (None, Some(sig)) => ExitStatus { code: None, signal: Some(sig), core_dumped: status.core_dumped() },
        (None, None) => ExitStatus { code: Some(1), signal: None, core_dumped: false },
    };
    Ok(Outcome { exit, duration, stopped })
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
        // A stop signal that came before the spawn (in this same test: the flag is global):
        // the program is not started.
        let d = tempfile::tempdir().unwrap();
        let ran = d.path().join("ran");
        STOP_SIGNAL.store(libc::SIGTERM, Ordering::SeqCst);
        let o = spawn_and_wait(&plan(&["/bin/sh", "-c", &format!("touch '{}'", ran.display())], vec![]));
        STOP_SIGNAL.store(0, Ordering::SeqCst);
        assert!(matches!(o, Err(LaunchError::Stopped(libc::SIGTERM))));
        assert!(!ran.exists(), "the program was started");
        // The executor changed this test process's dispositions: give them back.
        for sig in [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP, libc::SIGALRM, libc::SIGTSTP] {
            set_handler(sig, libc::SIG_DFL);
        }
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(15), "SIGTERM (15)");
        assert_eq!(signal_name(64), "signal 64");
    }
}
