/* The program over libfields.so (fields.c): it counts its argument's fields, exit status 1
 * for a refused line. */
#include "fields.h"

int main(int argc, char **argv) {
    return lib_fields(argc > 1 ? argv[1] : "a,b") < 0;
}
