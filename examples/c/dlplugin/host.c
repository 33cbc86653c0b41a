/* Loads the plugin named by argv[1] with dlopen and calls its `plugin_fn` with argv[2]
 * (plugin.c; tests/native_dlopen_inline.rs). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: host PLUGIN N\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    long (*fn)(long) = (long (*)(long))dlsym(h, "plugin_fn");
    if (!fn) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    printf("%ld\n", fn(atol(argv[2])));
    dlclose(h);
    return 0;
}
