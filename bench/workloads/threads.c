/* threads.c - multi-threaded, call-heavy C workload for bench/run.py.
 *
 *   threads [THREADS] [ITERATIONS]      (defaults: 4 threads, 200000 iterations each)
 *
 * Each thread runs ITERATIONS rounds of a small non-recursive call tree (a parser-like
 * pipeline: tokenize -> classify -> checksum, about 16 calls) plus a short recursion, so the
 * trace mixes wide trees, repeated calls under one parent and recursion. Built with the same
 * flags as examples/c: -finstrument-functions -g -O0 -fno-omit-frame-pointer -pthread. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long mix(long h, long v)
{
    return (h * 31) ^ v;
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static int is_alpha(int c)
{
    return (c | 32) >= 'a' && (c | 32) <= 'z';
}

static int classify(int c)
{
    if (is_digit(c))
        return 1;
    if (is_alpha(c))
        return 2;
    return 0;
}

static long tokenize(const char *s, long h)
{
    for (int i = 0; s[i]; i++)
        h = mix(h, classify(s[i]));
    return h;
}

static long depth(int n)
{
    return n == 0 ? 1 : 1 + depth(n - 1);
}

static long checksum(long h, int i)
{
    return mix(h, depth(i & 3));
}

static long round_of(int i, long h)
{
    static const char *words[] = {"ab1", "c2"};
    h = tokenize(words[i & 1], h);
    return checksum(h, i);
}

struct job {
    long iterations;
    long result;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    long h = 0;
    for (long i = 0; i < j->iterations; i++)
        h = round_of((int)i, h);
    j->result = h;
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    long iterations = argc > 2 ? atol(argv[2]) : 200000;
    if (threads < 1 || threads > 256 || iterations < 0) {
        fprintf(stderr, "usage: threads [THREADS 1..256] [ITERATIONS]\n");
        return 2;
    }
    pthread_t tid[256];
    struct job jobs[256];
    for (int t = 0; t < threads; t++) {
        jobs[t].iterations = iterations;
        if (pthread_create(&tid[t], NULL, worker, &jobs[t]) != 0) {
            perror("pthread_create");
            return 1;
        }
    }
    long total = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        total += jobs[t].result;
    }
    printf("%d threads x %ld iterations: %ld\n", threads, iterations, total);
    return 0;
}
