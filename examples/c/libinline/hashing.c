/* A program's own shared library built `gcc -g -O1 -fPIC -shared`: each static helper called
 * once is inlined into the exported `lib_hash`. `mix` runs for a non-empty word, `complain`
 * only for an empty one. Recorded by `trace run`, the tree shows the helper that ran under
 * lib_hash, marked [inlined], with its source, and not the other (tests/native_lib_inline.rs).
 * The NULL test first keeps both helpers' code out of lib_hash's first bytes (with `*s == 0`
 * alone gcc loads mix's 5381 there, before the branch: that code runs on both paths). */
#include <stdio.h>
#include "hashing.h"

static unsigned mix(const char *s) {
    unsigned h = 5381;
    while (*s)
        h = h * 33 + (unsigned char)*s++;
    return h;
}

static unsigned complain(const char *what) {
    fprintf(stderr, "empty: %s\n", what);
    return 0;
}

unsigned lib_hash(const char *s) {
    if (s == NULL || *s == 0)
        return complain("nothing to hash");
    return mix(s);
}
