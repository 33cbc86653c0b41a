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
