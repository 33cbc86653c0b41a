/* Counts the words of its arguments with libwcount.so (see libwc.c). */
#include <stdio.h>
#include <stddef.h>

size_t wc_count_words(const char *s);

int main(int argc, char **argv) {
    size_t total = 0;
    for (int i = 1; i < argc; i++) {
        total += wc_count_words(argv[i]);
    }
    printf("%zu\n", total);
    return 0;
}
