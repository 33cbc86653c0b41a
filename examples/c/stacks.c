/* stacks.c - calls that run on stacks other than the thread's: two coroutines on stacks of
 * their own, side by side (makecontext/swapcontext), and a signal handler on an alternate
 * signal stack (sigaltstack). Entry patching sees no return, and a frame on another stack
 * says nothing about the frames of the thread's stack (docs/native-recording.md, "Other
 * stacks"). What the tree must show: main -> generator -> produce xVALUES and main -> counter
 * -> tick xVALUES (each coroutine's calls under it, however often main switched back to it),
 * main -> consume x2*VALUES (never under a coroutine's frames), main -> signal_source ->
 * on_usr1 -> in_handler, and main -> after_signal (never under the handler's frames).
 *   stacks [VALUES] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

static ucontext_t main_ctx, gen_ctx, cnt_ctx;
static volatile int value, count;
static volatile sig_atomic_t handled;

static void produce(int i)
{
    value = i * i;
}

static void generator(void)
{
    for (int i = 1;; i++) {
        produce(i);
        swapcontext(&gen_ctx, &main_ctx);
    }
}

static void tick(int i)
{
    count = i;
}

static void counter(void)
{
    for (int i = 1;; i++) {
        tick(i);
        swapcontext(&cnt_ctx, &main_ctx);
    }
}

static void consume(int v)
{
    printf("got %d\n", v);
}

static void in_handler(void)
{
    handled++;
}

static void on_usr1(int sig)
{
    (void)sig;
    in_handler();
}

static void signal_source(void)
{
    raise(SIGUSR1);
}

static void after_signal(void)
{
    printf("handled %d\n", (int)handled);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 3;

    /* Two stacks allocated one after the other: neighbours in memory. */
    size_t size = 256 * 1024;
    ucontext_t *ctxs[2] = {&gen_ctx, &cnt_ctx};
    for (int k = 0; k < 2; k++) {
        getcontext(ctxs[k]);
        ctxs[k]->uc_stack.ss_sp = malloc(size);
        ctxs[k]->uc_stack.ss_size = size;
        ctxs[k]->uc_link = &main_ctx;
        if (!ctxs[k]->uc_stack.ss_sp)
            return 1;
    }
    makecontext(&gen_ctx, generator, 0);
    makecontext(&cnt_ctx, counter, 0);
    for (int i = 0; i < n; i++) {
        swapcontext(&main_ctx, &gen_ctx);
        consume(value);
        swapcontext(&main_ctx, &cnt_ctx);
        consume(count);
    }

    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_size = 256 * 1024;
    ss.ss_sp = malloc(ss.ss_size);
    if (!ss.ss_sp || sigaltstack(&ss, NULL) != 0)
        return 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &sa, NULL);
    signal_source();
    after_signal();
    return 0;
}
