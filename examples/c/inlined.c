/* An ordinary build at -O1 inlines each static helper called once into its caller:
 * `checksum` runs (its code inside main), `report_error` does not (no argument is "--fail").
 * Recorded by `trace run`, the tree shows checksum under main, marked [inlined], with its
 * source, and no report_error (tests/native_inline.rs). */
#include <stdio.h>
#include <string.h>

static unsigned checksum(const char *s) {
    unsigned h = 5381;
    while (*s)
        h = h * 33 + (unsigned char)*s++;
    return h;
}

static int report_error(const char *what) {
    fprintf(stderr, "error: %s\n", what);
    return 2;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--fail") == 0)
        return report_error("asked to fail");
    unsigned h = checksum(argc > 1 ? argv[1] : "hello");
    printf("%u\n", h);
    return 0;
}
