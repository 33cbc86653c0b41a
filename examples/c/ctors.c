/* Constructors and destructors run by the C runtime around main: setup() runs before
 * main, teardown() and at_exit() after it. In the recorded tree every one of them is a root
 * beside main, never its caller (tests/native_patch.rs). */
#include <stdio.h>
#include <stdlib.h>

static int total;

__attribute__((noinline)) void add(int n) { total += n; }

__attribute__((noinline)) void report(const char *when) { printf("%s: %d\n", when, total); }

__attribute__((constructor)) static void setup(void) {
    add(1);
    add(2);
}

__attribute__((destructor)) static void teardown(void) { report("teardown"); }

static void at_exit(void) { report("at_exit"); }

int main(void) {
    atexit(at_exit);
    add(3);
    report("main");
    return 0;
}
