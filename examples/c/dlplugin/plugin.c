/* A plugin built `gcc -g -O1 -fPIC -shared` and loaded by `dlopen` (host.c): its static
 * helpers, each called once, are inlined into the exported `plugin_fn`. `scale` runs for a
 * positive argument, `refuse` only for another. Its second recording shows the helper that ran
 * under plugin_fn, marked [inlined], not the other (tests/native_dlopen_inline.rs), and with
 * `--lines` condenses plugin_fn's refusal (lines 24-27) when it did not run
 * (tests/native_dlopen_lines.rs). The test of `n` first keeps both helpers' code out of
 * plugin_fn's first bytes. */
#include <stdio.h>

static long scale(long n) {
    long s = 0;
    for (long i = 1; i <= n; i++)
        s += i * i * 7;
    return s;
}

static long refuse(long n) {
    fprintf(stderr, "not positive: %ld\n", n);
    return -1;
}

long plugin_fn(long n) {
    if (n <= 0) {
        fprintf(stderr, "plugin: %ld refused\n", n);
        long r = refuse(n);
        fprintf(stderr, "plugin: returns %ld\n", r);
        return r;
    }
    return scale(n);
}
