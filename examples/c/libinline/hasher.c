/* The program over libhashing.so (hashing.c): it prints the hash of its argument. */
#include <stdio.h>
#include "hashing.h"

int main(int argc, char **argv) {
    printf("%u\n", lib_hash(argc > 1 ? argv[1] : "hello"));
    return 0;
}
