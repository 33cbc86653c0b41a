/* fib.c - call-heavy: naive recursive Fibonacci plus many tiny calls (used by benchmarks).
 *   fib [N] [ROUNDS] */
#include <stdio.h>
#include <stdlib.h>

static long fib(int n)
{
    if (n < 2)
        return n;
    return fib(n - 1) + fib(n - 2);
}

static long add(long a, long b)
{
    return a + b;
}

static long sum_to(int n)
{
    long s = 0;
    for (int i = 0; i < n; i++)
        s = add(s, i);
    return s;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 20;
    int rounds = argc > 2 ? atoi(argv[2]) : 1;
    long total = 0;
    for (int r = 0; r < rounds; r++)
        total += fib(n) + sum_to(n * 100);
    printf("fib(%d) = %ld, total = %ld\n", n, fib(n), total);
    return 0;
}
