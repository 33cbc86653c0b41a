/* A program with SIGTRAP handlers of its own (tests/native_inline.rs): under `trace run` the
 * shim's inline probes share SIGTRAP with it, and every trap that is not a probe's (raise, an
 * int3 of its own) still reaches the program's handler, installed with sigaction or signal,
 * and blocking every signal does not block the probes' trap. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile int hits;

static void on_trap(int sig) {
    (void)sig;
    hits++;
}

static int scaled(int x) {
    return x * 3 + hits;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "signal") == 0) {
        signal(SIGTRAP, on_trap);
    } else {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_trap;
        sigaction(SIGTRAP, &sa, NULL);
        struct sigaction now;
        sigaction(SIGTRAP, NULL, &now);
        if (now.sa_handler != on_trap)
            return 3;
    }
    raise(SIGTRAP);
    __asm__ volatile("int3");
    /* Every signal blocked (as a worker thread that leaves signals to another does): a
     * probe's int3 in `scaled` must still reach the shim, not kill the process. */
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    printf("%d %d\n", hits, scaled(argc));
    return 0;
}
