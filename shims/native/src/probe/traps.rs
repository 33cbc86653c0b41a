//! The traps, the handler, the rewind: writing the traps ([`write_traps`]), the `SIGTRAP`
//! handler ([`on_trap`]), disarming groups and roles, and putting a spent probe's bytes back
//! ([`release`]) (the module's description in probe.rs).

use super::*;

/// Write `I`'s trap at each of `addrs` (ascending) but those `defer` says wait for their
/// function's first call ([`first_call`]), one `mprotect` per run of touching pages, which are
/// left writable (see "Writable code" in the module's description; a page where no probe is
/// is made read-and-execute again); the probes, each written one with its original bytes and
/// [`TRAP`] in its state, and their pages, each counting its probes. An address whose bytes
/// already are the trap (the program's own) gets no probe; a deferred one is looked at when
/// its trap is written. Nothing is written where `I` has no trap.
///
/// # Safety
/// Every address lies in the program's mapped executable code, and no other thread runs it
/// (none exists yet, or the object is a library being loaded, whose code cannot run yet).
pub(crate) unsafe fn write_traps<I: Isa>(addrs: &[u64], mut defer: impl FnMut(u64) -> bool) -> Traps {
    let trap = I::TRAP;
    let mut out = Traps { probes: Vec::with_capacity(addrs.len()), pages: Vec::new() };
    if trap.is_empty() {
        return out;
    }
    let runs = addrs.chunk_by(|a, b| b & !4095 <= (a & !4095) + 4096);
    for run in runs {
        let (page, end) = (run[0] & !4095, (run[run.len() - 1] + trap.len() as u64).next_multiple_of(4096));
        let mut written = false;
        // SAFETY: the pages hold the program's code (the contract): readable and executable;
        // written by this thread alone (no other thread runs yet). A deferred probe's bytes
        // are not read now (no cache miss, no copy of its page until its function runs).
        unsafe {
            if libc::mprotect(page as *mut libc::c_void, (end - page) as usize, libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) != 0 {
                continue;
            }
            for &a in run {
                let mut orig = [0; MAX_TRAP];
                let state = if defer(a) {
                    SPENT
                } else {
                    let code = std::slice::from_raw_parts_mut(a as *mut u8, trap.len());
                    if *code == *trap {
                        continue;
                    }
                    orig[..trap.len()].copy_from_slice(code);
                    code.copy_from_slice(trap);
                    written = true;
                    TRAP
                };
                // A trap never crosses a page (`Isa::TRAP`): its page is its first byte's.
                if out.pages.last().is_none_or(|p| p.0 != a & !4095) {
                    out.pages.push(Page(a & !4095, AtomicU32::new(0)));
                }
                let last = out.pages.len() - 1;
                out.pages[last].1.fetch_add(1, Ordering::Relaxed);
                out.probes.push(Probe {
                    addr: a,
                    orig: AtomicU32::new(u32::from_le_bytes(orig)),
                    state: AtomicU8::new(state),
                    page: last as u32,
                    group: NO_GROUP,
                    inline: NO_PROBE,
                    line: NO_PROBE,
                    line_group: NO_GROUP,
                });
            }
            // The run's pages without a probe go back to read-and-execute.
            for p in (page..end).step_by(4096) {
                if out.pages.binary_search_by_key(&p, |q| q.0).is_err() {
                    libc::mprotect(p as *mut libc::c_void, 4096, libc::PROT_READ | libc::PROT_EXEC);
                }
            }
            if written {
                I::code_written(page, (end - page) as usize);
            }
        }
    }
    out
}

/// Install [`on_trap`] for `SIGTRAP`, keeping the disposition it replaces to chain to. It runs
/// with every signal blocked (so its registration of a hit needs no mask calls of its own;
/// [`chain`] gives the program's handler the mask it would have had).
pub(super) fn install_handler() -> bool {
    // Look the wrapped functions up now: `dlsym` is not for signal handlers.
    next_symbol(c"pthread_sigmask", &REAL_PTHREAD_SIGMASK);
    next_symbol(c"sigprocmask", &REAL_SIGPROCMASK);
    let Some(real) = real_sigaction() else { return false };
    // SAFETY: a zeroed sigaction is valid (no handler, empty mask); `real` is libc's
    // `sigaction`, given structures we own.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_trap as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigfillset(&mut sa.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if real(libc::SIGTRAP, &sa, &mut old) != 0 {
            return false;
        }
        CHAINED.store(old.sa_sigaction, Ordering::Release);
        CHAINED_FLAGS.store(old.sa_flags, Ordering::Release);
    }
    INSTALLED.store(true, Ordering::Release);
    true
}

/// The `SIGTRAP` handler (see the module's description).
///
/// Async-signal-safety: it runs with every signal blocked (`install_handler`). It reads the
/// immutable probe table, takes the probes' spin lock without a mask call ([`Held`]: no
/// holder can be this thread, whose holders block every signal), changes atomics, stores the
/// probe's bytes into its page (left writable by `plant`; one `mprotect` when the page's last
/// probe is spent), releases the lock, registers the hit's
/// id (process.rs, under the cold lock, the same work a patched function's first call does
/// in any handler) and records through hot.c's `slt_enter`/`slt_exit`, which are built to run
/// in signal handlers (a patched function called by one reaches them the same way; an event
/// that interrupts the same thread's recording is dropped there). A line probe's hit only
/// stores bytes into the shared mapping of `lines.bin` (atomics, lines.rs) and disarms its
/// line's other rows as an inline group is disarmed. `errno` is kept.
pub(super) extern "C" fn on_trap(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let _errno = ErrnoGuard::save();
    // SAFETY: the kernel passes a valid siginfo and ucontext to an SA_SIGINFO handler.
    let (code, uc) = unsafe { ((*info).si_code, &mut *(ctx as *mut libc::ucontext_t)) };
    if code == Native::TRAP_SI_CODE {
        let at = Native::trap_pc(uc);
        let found = all().find_map(|ps| ps.traps.probes.binary_search_by_key(&at, |p| p.addr).ok().map(|i| (ps, i)));
        // The probe's roles this thread claimed (none: another thread did; its bytes are back
        // by the time the lock is ours), or `None`: no trap of ours was ever written there.
        let claimed = found.and_then(|(ps, i)| {
            let held = Held::lock_blocked();
            let p = &ps.traps.probes[i];
            let s = p.state.load(Ordering::Acquire);
            if s & TRAP == 0 {
                return None;
            }
            let roles = s & ROLES;
            if roles != SPENT {
                p.state.store(TRAP, Ordering::Release);
                // SAFETY: one of `traps`' probes with its trap written, whose last role this
                // thread spent just now, under the lock.
                unsafe { release(&ps.traps, p, Native::TRAP.len(), true, &held) };
            }
            if roles & LINE != 0 {
                if let Some(set) = &ps.lines {
                    set.ran(p.line);
                    set.group_ran(p.line_group, |j| disarm_role(ps, j, LINE, &held));
                    set.block_ran(p.line, |j| disarm_role(ps, j, LINE, &held));
                }
            }
            if roles & INLINE != 0 {
                disarm_group(ps, i as u32, &held);
            }
            Some((ps, p, roles))
        });
        if let Some((ps, p, roles)) = claimed {
            if roles & INLINE != 0 {
                // The interrupted code's stack pointer is the hit's frame address (its CFA
                // offset is HIT_CFA): frames at or below it have returned.
                let frame = Native::trap_sp(uc) - HIT_CFA as u64;
                // Its id now, with the signals blocked already (no mask calls of the cold path's
                // own): `slt_enter` finds it. Noted in `inline.bin` (no system call), or, without
                // it, with a `funcs.jsonl` record. (The probes' lock is not held: the cold lock
                // is taken alone here.)
                let key = p.addr | INLINE_BIT;
                match ps.hits.as_ref().filter(|h| h.usable() && p.inline != NO_PROBE) {
                    Some(h) => crate::process::lookup_or(key, || crate::process::register_noted_blocked(key, |id| h.set(p.inline, id))),
                    None => crate::process::register_blocked(key),
                };
                // SAFETY: hot.c's entry points, for this thread; the address is a number.
                unsafe {
                    crate::hot::slt_enter((p.addr | INLINE_BIT) as *mut libc::c_void, frame);
                    crate::hot::slt_exit((p.addr | INLINE_BIT) as *mut libc::c_void, frame);
                }
            }
            // Run the original instruction (after its bytes are back; until then, trap again).
            Native::set_trap_pc(uc, p.addr);
            return;
        }
    }
    chain(sig, info, ctx);
}

/// The other probes of the inline group of probe `i` (if any), and every probe of the groups
/// around it (its parent's, theirs, ...: that code ran, since this code is inside it): their
/// inline role spent, and their bytes put back when that was their last role, so that they
/// never trap (the hit of `i` stands for them; a probe whose function has not run yet gets no
/// trap then). A group already spent stops the walk (its parents were spent with it).
pub(super) fn disarm_group(ps: &Probes, i: u32, held: &Held) {
    disarm_groups(ps, ps.traps.probes[i as usize].group, i, held);
}

/// [`disarm_group`] for the probes of `group` but probe `except` (none: `NO_PROBE`).
pub(super) fn disarm_groups(ps: &Probes, mut group: u32, except: u32, held: &Held) {
    // A walk as long as the groups are many at most (a damaged list cannot loop it).
    for _ in 0..=ps.parents.len() {
        if group == NO_GROUP {
            return;
        }
        if let Some((_, spent)) = ps.parents.get(group as usize) {
            if spent.swap(true, Ordering::AcqRel) {
                return;
            }
        }
        let from = ps.groups.partition_point(|g| g.0 < group);
        for &(_, j) in ps.groups[from..].iter().take_while(|g| g.0 == group) {
            if j != except {
                disarm_role(ps, j, INLINE, held);
            }
        }
        group = ps.parents.get(group as usize).map_or(NO_GROUP, |p| p.0);
    }
}

/// Spend role `role` of probe `j` (if it is still armed with it); when that was its last,
/// its bytes go back if its trap was written ([`release`]). Async-signal-safe: atomics, and
/// [`release`].
pub(super) fn disarm_role(ps: &Probes, j: u32, role: u8, held: &Held) {
    let Some(q) = ps.traps.probes.get(j as usize) else { return };
    let before = q.state.load(Ordering::Acquire);
    if before & role == 0 {
        return;
    }
    q.state.store(before & !role, Ordering::Release);
    if before & ROLES == role {
        // SAFETY: one of the probes of `ps.traps`, whose last role this thread spent just now,
        // under the lock.
        unsafe { release(&ps.traps, q, Native::TRAP.len(), before & TRAP != 0, held) };
    }
}

/// Probe `p` of `traps` is spent: if its trap was written (`had_trap`), put its first `len`
/// bytes back with a plain store (its page is writable: it counts `p`); count it off its page,
/// which becomes read-and-execute again when that was its last armed probe (no trap is ever
/// written into it again: every probe there is spent).
///
/// # Safety
/// `p` is one of `traps`' probes, whose last role the caller spent under the lock (`_held`),
/// once.
pub(crate) unsafe fn release(traps: &Traps, p: &Probe, len: usize, had_trap: bool, _held: &Held) {
    if had_trap {
        let orig = p.orig.load(Ordering::Acquire).to_le_bytes();
        // SAFETY: the trap's bytes are in a page of the program's code left writable and
        // executable while it counts this probe (the contract: not yet counted off); a thread
        // running them meanwhile either still traps (and is rewound to try again) or runs the
        // original instruction: the other bytes of the page do not change.
        unsafe {
            for (i, &b) in orig[..len].iter().enumerate() {
                std::ptr::write_volatile((p.addr + i as u64) as *mut u8, b);
            }
        }
        Native::code_written(p.addr, len);
    }
    let page = &traps.pages[p.page as usize];
    if page.1.fetch_sub(1, Ordering::AcqRel) == 1 {
        // Every probe of the page is spent and its bytes are back: no store into it follows.
        // SAFETY: the page is the program's code, mapped; mprotect is async-signal-safe.
        unsafe { libc::mprotect(page.0 as *mut libc::c_void, 4096, libc::PROT_READ | libc::PROT_EXEC) };
    }
}
