/* jumps.c - an error path through setjmp/longjmp: deep3 jumps back to main, skipping the
 * exits of deep3, deep2 and deep1. The true call tree is main -> deep1 -> deep2 -> deep3
 * (once per job) and main -> handle (once per failed job).
 *   jumps [JOBS] */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static jmp_buf on_error;

static int check(int job)
{
    return job % 3 != 1;
}

static void deep3(int job)
{
    char scratch[64];
    snprintf(scratch, sizeof scratch, "job %d", job);
    if (!check(job))
        longjmp(on_error, job + 1);
    printf("%s ok\n", scratch);
}

static void deep2(int job)
{
    deep3(job);
}

static void deep1(int job)
{
    deep2(job);
}

static void handle(int code)
{
    /* A larger frame than deep1's: a rule comparing stack pointers after the prologue
     * (instead of at entry) would nest this call under the dead deep1. */
    volatile char buf[512];
    buf[0] = (char)code;
    printf("job %d failed\n", code - 1 + buf[0] - (char)code);
}

int main(int argc, char **argv)
{
    int jobs = argc > 1 ? atoi(argv[1]) : 6;
    for (volatile int job = 0; job < jobs; job++) {
        int code = setjmp(on_error);
        if (code == 0)
            deep1(job);
        else
            handle(code);
    }
    return 0;
}
