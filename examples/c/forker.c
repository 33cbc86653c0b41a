/* forker.c - the parent forks a child; the child does its own work and exits with status 7
 * (or, with "exec", replaces itself with ./fib 10); the parent waits and reports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int square(int x)
{
    return x * x;
}

static int child_work(void)
{
    int s = 0;
    for (int i = 1; i <= 3; i++)
        s += square(i);
    printf("child: sum of squares %d\n", s);
    return 7;
}

static int parent_work(pid_t child)
{
    int status = 0;
    waitpid(child, &status, 0);
    printf("parent: child exited with %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return square(2);
}

static void exec_fib(const char *self)
{
    char path[4096];
    const char *slash = strrchr(self, '/');
    int dirlen = slash ? (int)(slash - self) : 1;
    snprintf(path, sizeof path, "%.*s/fib", dirlen, slash ? self : ".");
    execl(path, path, "10", (char *)NULL);
    perror("execl");
    _exit(127);
}

static int spawn(const char *mode, const char *self)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        if (strcmp(mode, "exec") == 0)
            exec_fib(self);
        exit(child_work());
    }
    return parent_work(pid) == 4 ? 0 : 1;
}

int main(int argc, char **argv)
{
    return spawn(argc > 1 ? argv[1] : "fork", argv[0]);
}
