// Two one-line static predicates that gcc -O2 folds into classify's branches, leaving no
// inlined instance of them in the debug information: no inline probe can see them run, and
// the prompt says so (tests/native_inline.rs).
#include <stdio.h>
#include <stdlib.h>

static int is_even(int n) { return (n & 1) == 0; }
static int is_negative(int n) { return n < 0; }

__attribute__((noinline)) int classify(int n)
{
    if (is_negative(n))
        return -1;
    if (is_even(n))
        return n * n;
    return n + 1;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        printf("%d\n", classify(atoi(argv[i])));
    return 0;
}
