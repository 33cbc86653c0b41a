/* plain.c - built WITHOUT -finstrument-functions: `trace run` must refuse it and say how to
 * rebuild it. */
#include <stdio.h>

int main(void)
{
    puts("plain: not instrumented");
    return 0;
}
