/* A program's own shared library built `gcc -g -O1 -fPIC -shared`: `lib_fields` counts the
 * comma-separated fields of a line, and refuses one that starts with '-' in a branch of its
 * own. Recorded by `trace run --lines`, the prompt condenses the branch that did not run in
 * lib_fields's source as it does in a program's (tests/native_lib_lines.rs). */
#include <stdio.h>
#include <string.h>
#include "fields.h"

int lib_fields(const char *line) {
    int n = 1;
    if (line[0] == '-') {
        size_t len = strlen(line);
        fprintf(stderr, "refused: %s\n", line);
        n = -(int)len;
        return n;
    }
    for (const char *p = line; *p; p++)
        n += *p == ',';
    printf("fields: %d\n", n);
    return n;
}
