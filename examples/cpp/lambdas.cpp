// A lambda that the standard library's std::for_each inlines, at -O2: the lambda's code runs
// inside main (an inline probe says it ran) and calls report (a recorded call that
// analyzer/src/native/callsites.rs places under the lambda). `slice tree --stdlib` shows one
// node of the lambda, with report under it (tests/native_inline.rs).
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

__attribute__((noinline)) void report(const std::string &key, int value)
{
    std::printf("%s %d\n", key.c_str(), value);
}

int main(int argc, char **argv)
{
    std::map<std::string, int> counts;
    for (int i = 1; i < argc; i++) {
        counts[argv[i]] += 1;
    }
    std::for_each(counts.begin(), counts.end(), [](const auto &kv) { report(kv.first, kv.second); });
    return 0;
}
