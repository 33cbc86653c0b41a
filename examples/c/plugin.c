/* plugin.c - a plugin loaded with dlopen() by the scene example. */
#include "scene.h"

static double weight(const struct shape *s)
{
    return shape_perimeter(s) / 10.0;
}

double plugin_score(const struct scene *sc)
{
    double score = 0.0;
    for (int i = 0; i < sc->count; i++)
        score += weight(&sc->shapes[i]);
    return score;
}

/* Runs inside dlopen(), before the program can look plugin_score up. An uninstrumented
 * build records it only when the plugin is patched before its constructors run. */
static volatile int registered;

static int plugin_register(int n)
{
    for (int i = 0; i < 3; i++)
        n = n * 7 + i;
    return n;
}

__attribute__((constructor)) static void plugin_init(void)
{
    registered = plugin_register(registered);
}
