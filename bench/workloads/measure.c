/* measure.c - run a command and report its wall time, CPU time and peak memory, for bench/run.
 *
 *   measure COMMAND [ARGS...]
 *
 * The command's stdout goes to /dev/null, its stderr is passed through. On exit, prints
 * "<wall ns> <peak RSS KiB> <exit status> <CPU ns>" on stdout. The CPU time is user + system
 * time of the command and the descendants it waited for (ru_utime + ru_stime from wait4): on
 * a shared machine it moves much less than the wall time. The peak RSS is ru_maxrss from wait4:
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
    long long cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
    printf("%lld %ld %d %lld\n", ns, ru.ru_maxrss, code, cpu);
    return 0;
}
