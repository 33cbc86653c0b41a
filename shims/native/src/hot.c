/* The native shim's hot path: __cyg_profile_func_enter/exit for the common case.
 *
 * Why C: the per-thread state must be reachable without a call. Rust's `thread_local!` in a
 * cdylib uses the general-dynamic TLS model (a call to __tls_get_addr on every access, 8% of a
 * traced program's instructions); stable Rust cannot ask for another model. Here the state is
 * `static __thread` with the initial-exec model: one %fs-relative access. That model requires
 * the library to be loaded at program start-up, which LD_PRELOAD does (its TLS block is part of
 * the static TLS of every thread); the shim must not be loaded with dlopen (glibc would refuse it
 * with "cannot allocate memory in static TLS block").
 *
 * Everything that is not the common case goes to Rust (hooks.rs, thread.rs), which owns the stream writer,
 * the process-wide function table and all system calls:
 *   - the thread's first event (mode UNINIT); events while the shim itself runs (BUSY) or
 *     does not record (OFF) are dropped (an entry while BUSY asks Rust first, which makes
 *     the thread record again if a siglongjmp left the slow path: recover_busy);
 *   - an event that finds the write window held by a fast path (a signal handler's event
 *     inside it: dropped; or a fast path that a handler left with siglongjmp: Rust takes the
 *     window over, window.rs);
 *   - a function address missing from this thread's two-way id cache (or whose id does not
 *     fit an entry: 63 + 2^21 functions or more, id_code);
 *   - a full window, a return that does not match the shadow stack (longjmp), a clock that is
 *     not yet calibrated (or not the TSC);
 *   - an entry whose frame is at or above the innermost open frame's (frames.rs: that frame
 *     has returned without an exit event, after a longjmp or an exception unwound it).
 * The events are encoded exactly as trace_format::event::encode_call/encode_return do, with
 * the constants of trace_format::event: slt_format.h is generated from them by build.rs (the
 * SLT_KIND_*, SLT_INLINE_*, SLT_VARINT_* and SLT_EVENT_MAX macros). The tests in hot.rs check
 * this file's streams byte for byte against the golden corpus (tracer/format/tests/golden/)
 * and against the Rust writer.
 */
#include <stdint.h>
#include <string.h>

#include "slt_format.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#define SLT_HIDDEN __attribute__((visibility("hidden")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Modes of a thread (slt_thread.mode). UNINIT must be 0: TLS starts zeroed. */
#define SLT_UNINIT 0u
#define SLT_ACTIVE 1u
#define SLT_BUSY 2u
#define SLT_OFF 3u
#define SLT_FILTERED 4u /* outside the recorded calls (filter.rs): every event is Rust's */

#define SLT_STACK_CAP 1024u
/* The id cache: SLT_CACHE_SETS sets of two entries (two-way set-associative). Direct-mapped
 * with 512 entries, a program that calls 512 functions in no particular order (a dispatch
 * table: examples/c/fptrs.c) missed often on hash collisions, each miss a trip through Rust;
 * two ways of 2048 sets miss on nothing but each function's first call there (the measured
 * miss rates per size: docs/performance.md, "Figures behind the code's choices"). A hit in the
 * first way costs what the direct-mapped cache cost; the second way is looked at only when
 * the first misses. The cache (64 KiB) is on the heap, allocated with the thread's state
 * (thread.rs), not in this TLS block: glibc carves the static TLS out of every thread's stack,
 * and refuses a thread whose requested stack cannot hold it (with a 16 KiB cache in the
 * block, pthread_create with a PTHREAD_STACK_MIN stack failed with EINVAL). */
#define SLT_CACHE_BITS 11u
#define SLT_CACHE_SETS (1u << SLT_CACHE_BITS)
#define SLT_CACHE_SIZE (2u * SLT_CACHE_SETS)
/* Frame repair in the fast path (dead_exact, below). */
#define SLT_FAST_CLOSE 32u
/* A call this far below the innermost frame may run on another stack (a coroutine resumed):
 * frames.rs decides (OTHER_STACK_SPAN there, checked by a test in hot.rs). */
#define SLT_FAR_BELOW (1ull << 20)
#define SLT_ROOT_BIT (1ull << 63) /* filter.rs ROOT_BIT */
/* The return addresses of the open calls: the second half of `cfas` (thread.rs RETS). */
#define SLT_RETS(t) ((t)->cfas + SLT_STACK_CAP)

/* Keep in sync with `SltThread` in hot.rs (#[repr(C)]). */
struct slt_cache_entry {
    uint64_t addr;
    /* Bits 0-7: the length of the call event's tag and id bytes; 8-39: those bytes (id_code);
     * 40-63: the CFA offset from the hook's sp (0: unknown). */
    uint64_t code;
};

#define SLT_CFA_OFF_MAX (1ull << 24)
#define SLT_CODE(e) ((e)->code & 0xFFFFFFFFFFull)
#define SLT_CFA_OFF(e) ((e)->code >> 40)

struct slt_thread {
    /* The first five fields are trace_format::writer::RawCursor. */
    uint8_t *pos;        /* next byte of the mapped window to write */
    uint8_t *limit;      /* an event may start at pos while pos < limit; see "THE hot-path rule" */
    uint64_t last_ns;    /* time of the previous event (delta base) */
    uint64_t calls;      /* call events written */
    uint64_t returns;    /* return events written */
    uint64_t depth;      /* open calls (may exceed SLT_STACK_CAP) */
    uint64_t *stack;     /* addresses of the first SLT_STACK_CAP open calls */
    void *rust;          /* thread.rs ThreadState */
    uint32_t mode;
    uint32_t pad;
    struct slt_cache_entry *cache; /* SLT_CACHE_SIZE entries; NULL until the thread's first event */
    /* Frame repair (frames.rs): the canonical frame address (the stack pointer before the
     * call) of the first SLT_STACK_CAP open calls, 0 where unknown; then (SLT_RETS) the
     * return address each of them found at CFA - 8 when it was entered, 0 where unknown. */
    uint64_t *cfas;
    /* The stack pointer of the slow path that runs (mode BUSY) at its shallowest, 0: none;
     * thread.rs's recover_busy. */
    uint64_t busy_sp;
    /* The thread's own stack, [stack_lo, stack_lo + stack_span) (span 0: unknown, or no entry
     * of the process is patched), set when the thread starts recording: top_slot_reused
     * reads frames' slots only there. */
    uint64_t stack_lo;
    uint64_t stack_span;
};

/* Keep in sync with trace_format::clock::TscCalibration (#[repr(C)]). */
struct slt_calibration {
    uint64_t base_tsc;
    uint64_t base_ns;
    uint64_t mult;
};

static __thread struct slt_thread slt_tls __attribute__((tls_model("initial-exec")));

/* The TSC calibration in use, or NULL (then Rust's clock is asked). Set by hot.rs with an
 * atomic release store, read here with an atomic acquire load (a plain mov on x86-64): the
 * fields it points to are written before it is published and never change. */
SLT_HIDDEN const struct slt_calibration *slt_calibration;

static inline const struct slt_calibration *calibration(void)
{
    return __atomic_load_n(&slt_calibration, __ATOMIC_ACQUIRE);
}

/* Slow paths, in hooks.rs. */
extern void slt_enter_slow(struct slt_thread *t, uint64_t addr, uint64_t sp);
extern void slt_exit_slow(struct slt_thread *t, uint64_t addr, uint64_t sp);
extern uint64_t slt_now_slow(void);

SLT_HIDDEN struct slt_thread *slt_thread_state(void)
{
    return &slt_tls;
}

SLT_HIDDEN uint64_t slt_cache_size(void)
{
    return SLT_CACHE_SIZE;
}

SLT_HIDDEN uint64_t slt_far_below(void)
{
    return SLT_FAR_BELOW;
}

SLT_HIDDEN uint64_t slt_thread_size(void)
{
    return sizeof(struct slt_thread);
}

/* The first entry of the set of `addr` (the second is the next one). */
static inline struct slt_cache_entry *cache_set(struct slt_thread *t, uint64_t addr)
{
    return &t->cache[2u * (uint32_t)((addr * 0x9E3779B97F4A7C15ull) >> (64 - SLT_CACHE_BITS))];
}

static inline uint64_t id_code(uint64_t id);

/* Only hooks.rs's slow path calls this, while it holds the window (mode BUSY): no fast path
 * uses the cache meanwhile (a handler's fast path reads it but cannot take the window).
 * `id`: the function's id in the low 32 bits, the CFA offset in the high 32 (0: unknown). The
 * new entry goes first; the first one moves to the second way (unless it is `addr` itself,
 * refreshed). A function whose id or offset does not fit an entry is not cached (and no
 * longer found if it was). */
SLT_HIDDEN void slt_cache_put(struct slt_thread *t, uint64_t addr, uint64_t id)
{
    if (!t->cache)
        return;
    struct slt_cache_entry *e = cache_set(t, addr);
    uint64_t code = id_code(id & 0xFFFFFFFFull), off = id >> 32;
    if (code == 0 || off >= SLT_CFA_OFF_MAX) {
        for (int i = 0; i < 2; i++)
            if (e[i].addr == addr)
                e[i].addr = UINT64_MAX;
        return;
    }
    if (e[0].addr != addr)
        e[1] = e[0];
    e[0].addr = addr;
    e[0].code = code | (off << 40);
}

/* Forget every id (a new thread, or a forked child whose ids start again): no address
 * matches UINT64_MAX. */
SLT_HIDDEN void slt_cache_clear(struct slt_thread *t)
{
    if (!t->cache)
        return;
    for (uint32_t i = 0; i < SLT_CACHE_SIZE; i++) {
        t->cache[i].addr = UINT64_MAX;
        t->cache[i].code = 0;
    }
}

/* ns from a TSC read, as trace_format::clock::now_ns computes it. */
static inline uint64_t tsc_ns(const struct slt_calibration *c, uint64_t tsc)
{
    uint64_t base = c->base_tsc;
    uint64_t d = tsc > base ? tsc - base : 0;
    return c->base_ns + (uint64_t)(((unsigned __int128)d * c->mult) >> 32);
}

static inline uint64_t read_tsc(void)
{
#if defined(__x86_64__)
    return __rdtsc();
#else
    return 0;
#endif
}

/* The clock as the hooks read it. */
static uint64_t now_ns(void)
{
    const struct slt_calibration *c = calibration();
    return c ? tsc_ns(c, read_tsc()) : slt_now_slow();
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= (1ull << SLT_VARINT_BITS)) {
        *p++ = (uint8_t)v | SLT_VARINT_MORE;
        v >>= SLT_VARINT_BITS;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* The general encoder (ids of any size): what trace_format::event::encode_call writes. The
 * fast paths write a call with the id's bytes kept in the cache (encode_cached_call). */
static inline uint8_t *encode_call(uint8_t *p, uint64_t id, uint64_t dt)
{
    if (LIKELY(id <= SLT_INLINE_MAX)) {
        *p++ = (uint8_t)((id << SLT_TAG_SHIFT) | SLT_KIND_CALL);
    } else {
        *p++ = (uint8_t)((SLT_INLINE_ESCAPE << SLT_TAG_SHIFT) | SLT_KIND_CALL);
        p = put_varint(p, id - (SLT_INLINE_MAX + 1));
    }
    return put_varint(p, dt);
}

/* The varint bytes of an escaped id that a cache entry keeps (with the tag: 4 bytes). */
#define SLT_CACHED_ID_BYTES 3u

/* A call event's tag and id bytes, as the cache keeps them (struct slt_cache_entry): the
 * length in the low byte, then the bytes (the inline tag, or the escape tag and a varint of
 * up to three bytes); 0 when the id needs more (an id of 63 + 2^21 or more: such a function
 * is not cached and its events are Rust's). */
static inline uint64_t id_code(uint64_t id)
{
    if (id <= SLT_INLINE_MAX)
        return (((id << SLT_TAG_SHIFT) | SLT_KIND_CALL) << 8) | 1;
    uint64_t v = id - (SLT_INLINE_MAX + 1);
    if (v >> (SLT_CACHED_ID_BYTES * SLT_VARINT_BITS))
        return 0;
    uint64_t bytes = (SLT_INLINE_ESCAPE << SLT_TAG_SHIFT) | SLT_KIND_CALL;
    unsigned n = 1;
    while (v >= (1ull << SLT_VARINT_BITS)) {
        bytes |= ((v & (SLT_VARINT_MORE - 1)) | SLT_VARINT_MORE) << (8 * n++);
        v >>= SLT_VARINT_BITS;
    }
    bytes |= v << (8 * n++);
    return (bytes << 8) | n;
}

/* A call through its cached code: the tag and id bytes are stored at once, without a branch
 * on their length (a program that calls many functions in no particular order would
 * mispredict a branch on the id's width on every other call), then the position moves by
 * that length. The stored word's bytes past the length are zero, so a stream cut just after
 * this event still ends in zeros; the delta overwrites them anyway. (An event may start at
 * pos while pos < limit: SLT_EVENT_MAX bytes of room.) */
static inline uint8_t *encode_cached_call(uint8_t *p, uint64_t code, uint64_t dt)
{
    uint64_t bytes = (uint32_t)(code >> 8);
    memcpy(p, &bytes, sizeof bytes);
    return put_varint(p + (code & 0xff), dt);
}

static inline uint8_t *encode_return(uint8_t *p, uint64_t dt)
{
    if (LIKELY(dt <= SLT_INLINE_MAX)) {
        *p++ = (uint8_t)((dt << SLT_TAG_SHIFT) | SLT_KIND_RETURN);
        return p;
    }
    *p++ = (uint8_t)((SLT_INLINE_ESCAPE << SLT_TAG_SHIFT) | SLT_KIND_RETURN);
    return put_varint(p, dt - (SLT_INLINE_MAX + 1));
}

/* Delta to the previous event, as StreamWriter computes it: 0 for an earlier time, which
 * then does not become the base. */
static inline uint64_t delta(struct slt_thread *t, uint64_t ts)
{
    uint64_t last = t->last_ns;
    uint64_t later = ts > last;
    t->last_ns = later ? ts : last;
    return later ? ts - last : 0;
}

/* The fast paths below need: a recording thread (the limit is a window address only while
 * the mode is ACTIVE and no path holds it, so `pos < limit` also checks both; see "THE
 * hot-path rule"), room in the window, and (entry) the function in the
 * cache or (exit) the function on top of the shadow stack, or deeper than the stack
 * remembers. With a TSC calibration they call nothing (no stack frame); without one they ask
 * Rust's clock. Anything else is a tail call to Rust. */

/* Commit order (window.rs rebuilds the cursor from the stream when a fast path was left
 * half-way by siglongjmp): the event's bytes and its shadow-stack slot first, then the
 * position, which makes the event part of the stream (one store); the counters after it. */
static inline void record_call(struct slt_thread *t, uint64_t addr, uint64_t code, uint64_t cfa, uint8_t *p, uint64_t ns)
{
    uint64_t d = t->depth;
    if (LIKELY(d < SLT_STACK_CAP)) {
        t->stack[d] = addr;
        t->cfas[d] = cfa;
        /* The return address the call just pushed at CFA - 8 (slt_python_entry): `cfa` is 0
         * or the entered function's CFA (its distance from the hook's sp measured from the
         * unwind tables by frames.rs), so CFA - 8 is its return-address slot, on this
         * thread's stack and mapped while the function runs. */
        SLT_RETS(t)[d] = cfa ? *(const uint64_t *)(cfa - 8) : 0;
    }
    uint8_t *end = encode_cached_call(p, code, delta(t, ns));
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->pos = end;
    t->depth = d + 1;
    t->calls++;
}

static inline void record_return(struct slt_thread *t, uint64_t d, uint8_t *p, uint64_t ns)
{
    uint8_t *end = encode_return(p, delta(t, ns));
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t->pos = end;
    t->depth = d - 1;
    t->returns++;
}

/* The fast paths without a TSC calibration (yet, or ever): the clock is Rust's. Out of line,
 * so that the fast paths stay without a stack frame. */
static void give_limit(struct slt_thread *t, uint8_t *lim);

static __attribute__((noinline)) void enter_slow_clock(struct slt_thread *t, uint64_t addr, uint64_t code, uint64_t cfa, uint8_t *p, uint8_t *lim)
{
    record_call(t, addr, code, cfa, p, slt_now_slow());
    give_limit(t, lim);
}

static __attribute__((noinline)) void exit_slow_clock(struct slt_thread *t, uint64_t d, uint8_t *p, uint8_t *lim)
{
    record_return(t, d, p, slt_now_slow());
    give_limit(t, lim);
}

/* THE hot-path rule, kept here and nowhere else (thread.rs calls slt_take_limit/slt_give_limit
 * and asks slt_limit_owner; window.rs decides when a holder is gone). The `limit` word says
 * who may write the thread's window:
 *   - a window address (positive as a signed number: user-space addresses are below 2^47):
 *     free; the thread records (mode ACTIVE);
 *   - NULL: nobody records (mode not ACTIVE), or a Rust path of the shim holds the window;
 *   - a MARKER, ~sp (negative): the path whose frame is at stack pointer `sp` writes now
 *     (a fast path, or thread.rs handing the cursor over).
 * The fast paths test `pos < limit` as SIGNED numbers, so NULL and every marker fail it like
 * a full window. While a path holds the window, an event of a signal handler that
 * interrupts it finds no room and, as the window is held, is dropped (wants_slow) instead of
 * being written over. A handler that runs just before the window is taken records its events
 * whole: the path reads the position and the shadow stack only after it took the window.
 *
 * Why a marker and not NULL: a handler may leave with siglongjmp and never return into the
 * fast path it interrupted; the window would then stay held and the thread record nothing
 * more. With the marker, an event that finds the window held learns who holds it: code that
 * runs while a fast path is interrupted is nested in that fast path, on the same stack below
 * its frame (a signal frame is pushed below the interrupted stack pointer) or on the
 * alternate signal stack; an event at or above the holder's stack pointer, not on the
 * alternate stack, shows the holder is gone (window.rs: owner_gone). The marker costs the
 * fast path no memory access: the take's cmpxchg stores a register either way (it stored a
 * zero), plus a `not` to form it and a sign test before the take (a held window is left as
 * it is).
 *
 * Taking it must be ONE instruction: with a load and a store, a handler that runs between
 * them may move the window (a full window, a stream that stops) and the interrupted path
 * would then write through the old limit into unmapped or reused memory. Only this thread
 * ever writes its `limit` (signal handlers included, since they run on this thread), so
 * atomicity against signals is enough: on x86-64 an unlocked `cmpxchg` (a single
 * instruction, interrupts are taken between instructions; a locked `xchg` would cost ~20
 * cycles per event for a guarantee against other CPUs that nobody needs); elsewhere
 * __atomic_compare_exchange_n.
 *
 * `free_only`: the fast paths take only a free window (a held one stays as it is: its
 * holder's marker must survive until that holder gives it back, or is found gone); Rust
 * takes whatever is there, and learns from the old value whether it took over a window that
 * a fast path left (window.rs: take_over). */
static inline __attribute__((always_inline)) uint8_t *take_limit(struct slt_thread *t, uint8_t *mark, int free_only)
{
    uint8_t *expected = t->limit;
    for (;;) {
        if (free_only && (intptr_t)expected <= 0)
            return expected; /* held (or not recording): not taken */
#if defined(__x86_64__)
        uint8_t *seen = expected;
        /* if (limit == rax) limit = mark; else rax = limit; as one instruction. */
        __asm__ volatile("cmpxchgq %2, %1" : "+a"(seen), "+m"(t->limit) : "r"(mark) : "cc", "memory");
        if (seen == expected)
            return expected;
        expected = seen; /* a handler moved it between the read and the cmpxchg */
#else
        if (__atomic_compare_exchange_n(&t->limit, &expected, mark, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            __atomic_signal_fence(__ATOMIC_SEQ_CST);
            return expected;
        }
#endif
    }
}

/* Whether a take got the window (and must give it back). */
static inline int taken(uint8_t *lim)
{
    return (intptr_t)lim > 0;
}

static inline uint8_t *marker(uint64_t sp)
{
    return (uint8_t *)~sp;
}

/* Give the limit back (or a new one, after the position and the rest of the cursor are in
 * place): the stores before it are done, for a handler, before the limit is visible. */
static inline __attribute__((always_inline)) void give_limit(struct slt_thread *t, uint8_t *lim)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&t->limit, lim, __ATOMIC_RELAXED);
}

/* The same, for Rust (thread.rs: the slow paths', set_mode and push): take whatever is there, leaving
 * the marker of thread.rs's frame at `sp`; returns the old value. */
SLT_HIDDEN uint8_t *slt_take_limit(struct slt_thread *t, uint64_t sp)
{
    return take_limit(t, marker(sp), 0);
}

SLT_HIDDEN void slt_give_limit(struct slt_thread *t, uint8_t *lim)
{
    give_limit(t, lim);
}

/* The stack pointer of the path that holds the window, from a `limit` value: 0 when the
 * value is a window address or NULL (no path holds it with a marker), or when the holder's
 * stack pointer was not known (sp 0 gives the marker ~0). */
SLT_HIDDEN uint64_t slt_limit_owner(const uint8_t *lim)
{
    return (intptr_t)lim < 0 ? ~(uint64_t)lim : 0;
}

/* Not the fast path: the thread's first event, or Rust's part. In mode ACTIVE: a window
 * that was free (a cache miss, a full window, dead frames) or one held by a marker, which
 * Rust looks at (a signal handler's event inside a fast path: dropped; a fast path left by
 * siglongjmp: taken over). An entry while BUSY goes to Rust too (is_entry), which drops it
 * unless the BUSY path is gone (siglongjmp). */
static inline int wants_slow(struct slt_thread *t, uint8_t *lim, int is_entry)
{
    return t->mode == SLT_UNINIT || t->mode == SLT_FILTERED || (t->mode == SLT_ACTIVE && lim != 0) || (is_entry && t->mode == SLT_BUSY);
}

/* Whether an entry at `cfa` may not nest under the innermost open frame: that frame has
 * returned (its CFA is at or below the new one on the same stack), or the call runs far below
 * it, perhaps on another stack (a coroutine switched back to). Then dead_exact or frames.rs
 * decides. One unsigned comparison: top - cfa - 1 wraps for top <= cfa. */
static inline int top_is_dead(const struct slt_thread *t, uint64_t cfa)
{
    uint64_t d = t->depth;
    return cfa != 0 && d - 1 < SLT_STACK_CAP && t->cfas[d - 1] != 0 && t->cfas[d - 1] - cfa - 1 >= SLT_FAR_BELOW - 1;
}

/* Whether an entry at `cfa` below the innermost open frame may find that frame returned all
 * the same (frames.rs returned_above decides, in the slow path): a caller can move its stack
 * pointer down between two calls (gcc pushes a call's stack arguments), so the next call starts
 * below the frames of the calls that returned. The sign: that frame's return-address slot (its
 * CFA - 8) no longer holds the address its call pushed there (the pushed arguments overwrote
 * it). Read only when that CFA lies on the thread's own stack: a thread's stack stays mapped
 * while the thread lives, so a slot that held a return address once can be read. Two loads and
 * a compare beside top_is_dead's; the slow path also looks at the new call's return address. */
static inline int top_slot_reused(const struct slt_thread *t, uint64_t cfa)
{
    uint64_t d = t->depth, span = t->stack_span;
    if (span == 0 || cfa == 0 || d - 1 >= SLT_STACK_CAP)
        return 0;
    uint64_t f = t->cfas[d - 1];
    return f - t->stack_lo < span && *(const uint64_t *)(f - 8) != SLT_RETS(t)[d - 1];
}

/* Entry patching sees no exits: most entries close frames (a sibling's, after its return).
 * The common case is closed here, the rest goes to frames.rs: the new call's CFA equals an
 * open frame's exactly (the same caller, at the same stack depth, on the same stack), at most
 * SLT_FAST_CLOSE frames down; that frame and every one above it are dead. Returns how many,
 * or 0 (frames.rs decides: no exact match, a frame without CFA, a `-F` root among them, or a
 * frame above the call's CFA or far below it: on another stack, perhaps a coroutine's that
 * suspend.rs keeps). cfa - f wraps for f > cfa: one comparison for both. */

static inline uint64_t dead_exact(const struct slt_thread *t, uint64_t cfa)
{
    uint64_t d = t->depth;
    if (d > SLT_STACK_CAP)
        return 0;
    for (uint64_t k = d; k-- > 0 && d - k <= SLT_FAST_CLOSE;) {
        uint64_t f = t->cfas[k];
        if (f == 0 || cfa - f >= SLT_FAR_BELOW || (t->stack[k] & SLT_ROOT_BIT))
            return 0;
        if (f == cfa)
            return d - k;
    }
    return 0;
}

/* The time of an event, read before the window is taken (the clock read is the longest part
 * of a fast path: outside the window, a signal that arrives then records its handler's
 * events instead of losing them). 0 without a TSC calibration, and only then (a calibrated
 * time counts from the monotonic clock's origin, long before): the fast path then asks Rust's
 * clock (enter_slow_clock). A handler that records events between this read and the take
 * makes this event's time earlier than the last one: delta() writes 0 for it, as for any
 * time that goes back. */
static inline uint64_t event_ns(const struct slt_calibration *c)
{
    return c ? tsc_ns(c, read_tsc()) : 0;
}

/* `sp`: the hook's stack pointer (0: unknown), read by the caller in hooks.rs. It is at a
 * fixed distance from the instrumented function's CFA for every entry of that function (the
 * hook is called from its prologue, through the same code each time), so frames.rs measures
 * that distance once per function. (Read here, it would cost this function a frame.) It is
 * also the fast path's marker while it writes. */
/* Not recorded by the fast path: give a window taken back, and ask Rust if the event is its
 * (wants_slow). Out of line, so that the fast path keeps no register of its own (no stack
 * frame, no register saved). */
static __attribute__((noinline)) void enter_slow(struct slt_thread *t, uint8_t *lim, uint64_t addr, uint64_t sp)
{
    if (taken(lim))
        give_limit(t, lim);
    if (wants_slow(t, lim, 1))
        slt_enter_slow(t, addr, sp);
}

/* An entry that shows the innermost open frame dead (top_is_dead), with the window taken:
 * the returns of the frames that dead_exact closes and the call are committed together by
 * record_call's one store of `pos` (a jump out before it leaves none of them written: see
 * the hot-path rule); anything else is Rust's. Out of line: its loops need registers that the
 * common case does without. */
static __attribute__((noinline)) void enter_after_dead(struct slt_thread *t, uint64_t addr, uint64_t sp, const struct slt_cache_entry *e, uint8_t *lim, uint64_t ns)
{
    uint64_t cfa = sp + SLT_CFA_OFF(e);
    uint8_t *p = t->pos;
    uint64_t n = dead_exact(t, cfa);
    /* ns is 0 only without a TSC calibration (event_ns): then the clock is Rust's. */
    if (n == 0 || ns == 0 || (uint64_t)(lim - p) <= (n + 1) * SLT_EVENT_MAX) {
        enter_slow(t, lim, addr, sp);
        return;
    }
    for (uint64_t i = 0; i < n; i++)
        p = encode_return(p, delta(t, ns));
    t->returns += n;
    t->depth -= n;
    record_call(t, addr, SLT_CODE(e), cfa, p, ns);
    give_limit(t, lim);
}

/* `sp`: the hook's stack pointer (0: unknown), read by the caller in hooks.rs. It is at a
 * fixed distance from the instrumented function's CFA for every entry of that function (the
 * hook is called from its prologue, through the same code each time), so frames.rs measures
 * that distance once per function. (Read here, it would cost this function a frame.) It is
 * also the fast path's marker while it writes. */
SLT_HIDDEN void slt_enter(void *this_fn, uint64_t sp)
{
    struct slt_thread *t = &slt_tls;
    uint64_t addr = (uint64_t)this_fn;
    uint64_t ns = event_ns(calibration());
    uint8_t *lim = take_limit(t, marker(sp), 1);
    struct slt_cache_entry *e = cache_set(t, addr);
    uint8_t *p = t->pos;
    uint64_t off, cfa;
    if (UNLIKELY(!((intptr_t)p < (intptr_t)lim)))
        goto slow;
    /* The way that holds `addr`, chosen without a branch (which of the two ways a function
     * sits in is as good as random: a branch on it is mispredicted often); then one test. */
    e += e->addr != addr;
    if (UNLIKELY(e->addr != addr))
        goto slow;
    off = SLT_CFA_OFF(e);
    cfa = off ? sp + off : 0;
    if (UNLIKELY(top_is_dead(t, cfa))) {
        enter_after_dead(t, addr, sp, e, lim, ns);
        return;
    }
    if (UNLIKELY(top_slot_reused(t, cfa)))
        goto slow;
    if (UNLIKELY(ns == 0)) {
        enter_slow_clock(t, addr, SLT_CODE(e), cfa, p, lim);
        return;
    }
    record_call(t, addr, SLT_CODE(e), cfa, p, ns);
    give_limit(t, lim);
    return;
slow:
    enter_slow(t, lim, addr, sp);
}

/* `sp`: the hook's stack pointer, as for slt_enter (the marker; 0: unknown). */
SLT_HIDDEN void slt_exit(void *this_fn, uint64_t sp)
{
    struct slt_thread *t = &slt_tls;
    uint64_t addr = (uint64_t)this_fn;
    uint64_t ns = event_ns(calibration());
    uint8_t *lim = take_limit(t, marker(sp), 1);
    uint64_t d = t->depth;
    uint8_t *p = t->pos;
    if (UNLIKELY(!((intptr_t)p < (intptr_t)lim && (d - 1 < SLT_STACK_CAP ? t->stack[d - 1] == addr : d != 0)))) {
        if (taken(lim))
            give_limit(t, lim);
        if (wants_slow(t, lim, 0))
            slt_exit_slow(t, addr, sp);
        return;
    }
    if (UNLIKELY(ns == 0)) {
        exit_slow_clock(t, d, p, lim);
        return;
    }
    record_return(t, d, p, ns);
    give_limit(t, lim);
}

/* Whether the open call `k` (k < depth <= SLT_STACK_CAP) may still be running when Python
 * code starts a call at stack pointer `sp` (slt_python_entry). A running call's frame is above
 * `sp` and its return address is still at its CFA - 8, where the call pushed it. A frame at or
 * below `sp` has returned; one whose slot holds another value has returned too (the stack
 * below its caller was reused). `hi`: the top of the stack `sp` is on (0: unknown): a slot is
 * read only between `sp` and `hi`, memory that is this stack's. Unknown CFAs, `-F` roots and
 * frames far from `sp` (perhaps on another stack) count as running. */
static inline int python_entry_running(const struct slt_thread *t, uint64_t k, uint64_t sp, uint64_t hi)
{
    uint64_t f = t->cfas[k], r = SLT_RETS(t)[k];
    if (f == 0 || r == 0 || (t->stack[k] & SLT_ROOT_BIT))
        return 1;
    if (f <= sp)
        return sp - f >= SLT_FAR_BELOW;
    if (f - sp >= SLT_FAR_BELOW || f > hi || f - 8 < sp)
        return 1;
    return *(const uint64_t *)(f - 8) == r;
}

/* How many of the open calls, innermost first, have returned by a Python call at stack
 * pointer `sp` (python_entry_running): up to the first one that may still run. */
static inline uint64_t python_entry_ended(const struct slt_thread *t, uint64_t d, uint64_t sp, uint64_t hi)
{
    uint64_t n = 0;
    while (n < d && !python_entry_running(t, d - 1 - n, sp, hi))
        n++;
    return n;
}

/* The same count for Rust's slow path (hooks.rs), which holds the window (mode BUSY). */
SLT_HIDDEN uint64_t slt_python_entry_ended(const struct slt_thread *t, uint64_t sp, uint64_t hi)
{
    uint64_t d = t->depth;
    return d > SLT_STACK_CAP || hi == 0 ? 0 : python_entry_ended(t, d, sp, hi);
}

/* A Python call or resume is about to be recorded (the Python shim, `trace run --native-ext`,
 * through hooks.rs's slice_trace_python_entry_ns): the open calls that have returned are
 * closed now, innermost first, up to the first one that may still run (python_entry_running),
 * so that the merge of the two streams (trace_format::pyext) finds each native frame's return
 * before the Python calls that follow it, and none before a callback it makes. Returns the
 * time, which the Python event takes: the returns written here are not later than it. More
 * open calls than the shadow stack holds, or an unknown stack: nothing is closed. A window
 * that a path holds (a signal handler's call into Python inside a fast path): nothing either.
 * A free window with too little room for the returns: nothing is written here and `*full` is
 * set; Rust's slow path (hooks.rs) then writes them in the next window, as an exit does. */
SLT_HIDDEN uint64_t slt_python_entry(uint64_t sp, uint64_t hi, int *full)
{
    struct slt_thread *t = &slt_tls;
    uint64_t ns = event_ns(calibration());
    uint64_t d = t->depth;
    *full = 0;
    if (LIKELY(d == 0))
        return ns ? ns : slt_now_slow();
    if (ns == 0)
        ns = slt_now_slow();
    if (d > SLT_STACK_CAP || hi == 0)
        return ns;
    uint8_t *lim = take_limit(t, marker(sp), 1);
    if (!taken(lim))
        return ns;
    uint8_t *p = t->pos;
    uint64_t n = python_entry_ended(t, d, sp, hi);
    if (n > 0 && (intptr_t)p < (intptr_t)lim && (uint64_t)(lim - p) > n * SLT_EVENT_MAX) {
        for (uint64_t i = 0; i < n; i++)
            p = encode_return(p, delta(t, ns));
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        t->pos = p;
        t->depth = d - n;
        t->returns += n;
    } else if (n > 0) {
        *full = 1;
    }
    give_limit(t, lim);
    return ns;
}

/* ---- For the tests in hot.rs: the same encoders, driven from Rust. ---- */

/* Write `n` events through this file's encoders into the cursor of `t`: kinds[i] is
 * SLT_KIND_CALL for a call of ids[i], SLT_KIND_RETURN for a return; times are absolute.
 * Returns the number written before the window filled. */
SLT_HIDDEN uint64_t slt_test_encode(struct slt_thread *t, const uint8_t *kinds, const uint64_t *ids, const uint64_t *times, uint64_t n)
{
    uint64_t i;
    for (i = 0; i < n; i++) {
        if (!(t->pos < t->limit))
            break;
        if (kinds[i] == SLT_KIND_CALL) {
            /* What the fast paths write (a cached id), else the general encoder. */
            uint64_t code = id_code(ids[i]);
            uint64_t dt = delta(t, times[i]);
            t->pos = code ? encode_cached_call(t->pos, code, dt) : encode_call(t->pos, ids[i], dt);
            t->calls++;
        } else {
            t->pos = encode_return(t->pos, delta(t, times[i]));
            t->returns++;
        }
    }
    return i;
}

/* python_entry_running, for the tests in hot.rs. */
SLT_HIDDEN int slt_test_python_entry_running(const struct slt_thread *t, uint64_t k, uint64_t sp, uint64_t hi)
{
    return python_entry_running(t, k, sp, hi);
}

/* The clock as the hooks read it, for the Python shim (hooks.rs, slice_trace_clock_ns). */
SLT_HIDDEN uint64_t slt_clock_now(void)
{
    return now_ns();
}

SLT_HIDDEN uint64_t slt_test_now(void)
{
    return now_ns();
}
