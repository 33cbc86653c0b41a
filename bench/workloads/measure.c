/* measure.c - run a command and report its wall time and peak memory, for bench/run.
 *
 *   measure COMMAND [ARGS...]
 *
 * The command's stdout goes to /dev/null, its stderr is passed through. On exit, prints
 * "<wall ns> <peak RSS KiB> <exit status>" on stdout. The peak RSS is ru_maxrss from wait4:
 * the largest resident set among the command and the descendants it waited for. This small
 * launcher exists because a child inherits the high-water mark of the process it was forked
 * from: measured from a Python harness directly, every command would weigh at least as much
 * as the harness. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: measure COMMAND [ARGS...]\n");
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        perror("measure: fork");
        return 1;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 1);
        execvp(argv[1], argv + 1);
        perror(argv[1]);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) {
        perror("measure: wait4");
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long long ns = (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    printf("%lld %ld %d\n", ns, ru.ru_maxrss, code);
    return 0;
}
