/* Two inlined helpers that end in the same call: gcc -O2 keeps one copy of it (cross-jumping),
 * which the debug information gives to one of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct table {
    int kind;
    size_t size;
    unsigned short *slots;
    unsigned int *counts;
};

static inline void prepare_short(struct table *t, int one_shot, size_t input)
{
    size_t partial = t->size >> 6;
    if (one_shot && input <= partial) {
        for (size_t i = 0; i < input; i++)
            t->slots[i] = 0;
    } else {
        memset(t->slots, 0xff, t->size * sizeof(t->slots[0]));
    }
}

static inline void prepare_long(struct table *t, int one_shot, size_t input)
{
    size_t partial = t->size >> 6;
    if (one_shot && input <= partial) {
        for (size_t i = 0; i < input; i++)
            t->counts[i] = 0;
    } else {
        memset(t->slots, 0xff, t->size * sizeof(t->slots[0]));
    }
}

__attribute__((noinline)) void prepare(struct table *t, int one_shot, size_t input)
{
    switch (t->kind) {
    case 1:
        prepare_short(t, one_shot, input);
        break;
    case 2:
        prepare_long(t, one_shot, input);
        break;
    default:
        break;
    }
    t->counts[0] += 1;
}

int main(int argc, char **argv)
{
    struct table t;
    t.kind = argc > 1 ? atoi(argv[1]) : 1;
    t.size = 4096;
    t.slots = calloc(t.size, sizeof(t.slots[0]));
    t.counts = calloc(t.size, sizeof(t.counts[0]));
    prepare(&t, argc > 2, 100);
    printf("%d %u %u\n", t.kind, t.slots[0], t.counts[0]);
    return 0;
}
