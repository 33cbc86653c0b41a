/* The library of `wcount` (a program whose code lives in a library named after it, as
 * Debian's jq lives in libjq): tests/distro_programs.rs builds both, moves the library's debug
 * information to a separate file and strips both, as a distribution does. */
#include <ctype.h>
#include <stddef.h>

/* Static: in no dynamic symbol table, only in the debug file's symbol table. */
static int is_word_start(const char *s, size_t i) {
    return !isspace((unsigned char)s[i]) && (i == 0 || isspace((unsigned char)s[i - 1]));
}

__attribute__((noinline)) size_t wc_count_words(const char *s) {
    size_t n = 0;
    for (size_t i = 0; s[i]; i++) {
        if (is_word_start(s, i)) {
            n++;
        }
    }
    return n;
}
