/* A call that passes arguments on the stack, made after a call that returned through a tail
 * call: with entry patching (no exits), the new call's frame is below the dead ones. */
#include <stdio.h>
#include <stdlib.h>

typedef void *(*alloc_fn)(void *opaque, size_t n);
struct manager {
    alloc_fn alloc;
    void *opaque;
};

/* At -O2 a tail call: `mov %rsi,%rdi; jmp malloc`. */
__attribute__((noinline)) void *default_alloc(void *opaque, size_t n)
{
    (void)opaque;
    return malloc(n);
}

__attribute__((noinline)) void *allocate(struct manager *m, size_t n)
{
    void *p = m->alloc(m->opaque, n);
    if (!p)
        exit(1);
    return p;
}

/* Nine arguments: three go on the stack. */
__attribute__((noinline)) long weigh(long a, long b, long c, long d, long e, long f, long g, long h, long i)
{
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i;
}

int main(int argc, char **argv)
{
    (void)argv;
    struct manager m = {default_alloc, NULL};
    long *v = allocate(&m, 4 * sizeof(long));
    for (int k = 0; k < 3; k++)
        v[k] = weigh(argc, k, 3, 4, 5, 6, argc + k, 8, 9);
    printf("%ld %ld %ld\n", v[0], v[1], v[2]);
    free(v);
    return 0;
}
