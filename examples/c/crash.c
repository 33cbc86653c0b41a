/* crash.c - does some work, then ends the way argv[1] says:
 *   segv | abort | exit | _exit | term | int | handler | ok
 * "handler" installs its own SIGTERM handler, raises SIGTERM, and exits with status 42 from
 * the handler, to check that a tracer leaves the program's own handlers working. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int depth_sum(int n)
{
    if (n == 0)
        return 0;
    return n + depth_sum(n - 1);
}

static void on_term(int sig)
{
    const char msg[] = "handler: caught SIGTERM\n";
    (void)sig;
    write(1, msg, sizeof msg - 1);
    _exit(42);
}

static void fail(const char *how)
{
    if (strcmp(how, "segv") == 0) {
        volatile int *p = NULL;
        *p = 1;
    } else if (strcmp(how, "abort") == 0) {
        abort();
    } else if (strcmp(how, "exit") == 0) {
        exit(5);
    } else if (strcmp(how, "_exit") == 0) {
        _exit(6);
    } else if (strcmp(how, "term") == 0) {
        raise(SIGTERM);
    } else if (strcmp(how, "int") == 0) {
        /* A shell's background job starts with SIGINT ignored: die of it all the same. */
        signal(SIGINT, SIG_DFL);
        raise(SIGINT);
    } else if (strcmp(how, "handler") == 0) {
        signal(SIGTERM, on_term);
        raise(SIGTERM);
    }
}

static void work(const char *how)
{
    printf("sum: %d\n", depth_sum(5));
    fflush(stdout);
    fail(how);
}

int main(int argc, char **argv)
{
    work(argc > 1 ? argv[1] : "segv");
    return 0;
}
