// unwind.cpp - exceptions caught several frames above the throw. With clang's
// -finstrument-functions (and with entry-only recording) the unwound frames never report an
// exit; the true call tree is main -> run_job -> stage1 -> stage2 -> stage3 per job,
// stage1 -> recover when stage3 throws a recoverable error, and main -> report when it
// throws a fatal one.
//   unwind [JOBS]
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

struct Recoverable : std::runtime_error {
    using std::runtime_error::runtime_error;
};

static int stage3(int job)
{
    if (job % 4 == 1)
        throw Recoverable("soft failure in job " + std::to_string(job));
    if (job % 4 == 3)
        throw std::runtime_error("hard failure in job " + std::to_string(job));
    return job * 2;
}

static int stage2(int job)
{
    return stage3(job) + 1;
}

static int recover(const Recoverable &e)
{
    // A large frame: see jumps.c.
    volatile char buf[1024];
    buf[0] = static_cast<char>(e.what()[0]);
    return buf[0] == 's' ? -1 : -2;
}

static int stage1(int job)
{
    try {
        return stage2(job);
    } catch (const Recoverable &e) {
        return recover(e);
    }
}

static int run_job(int job)
{
    return stage1(job);
}

static void report(const std::exception &e)
{
    volatile char buf[2048];
    buf[0] = 0;
    std::printf("error: %s%s\n", e.what(), const_cast<const char *>(buf));
}

int main(int argc, char **argv)
{
    int jobs = argc > 1 ? std::atoi(argv[1]) : 8;
    int sum = 0;
    for (int job = 0; job < jobs; job++) {
        try {
            sum += run_job(job);
        } catch (const std::exception &e) {
            report(e);
        }
    }
    std::printf("sum %d\n", sum);
    return 0;
}
