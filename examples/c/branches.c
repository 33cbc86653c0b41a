/* Which lines ran, for native code (tests/native_lines.rs): classify takes one branch of
   its `if`, and `trace run --lines` sees that the other one's lines did not run. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static int classify(int x) {
  int r = x + 1;
  if (x > 1000) {
    r = x * 2;
    r += x / 3;
    printf("large: %d\n", r);
    r -= 7;
  } else {
    r -= 3;
    printf("small: %d\n", r);
    r *= 2;
  }
  return r;
}

int main(int argc, char **argv) {
  int x = argc > 1 ? atoi(argv[1]) : 5;
  printf("%d\n", classify(x));
  return x == 42 ? 3 : 0;
}
