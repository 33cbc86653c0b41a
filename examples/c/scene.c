/* scene.c - parsing a scene spec like "c1,r2x3,s4" and summing areas recursively. */
#include <stdio.h>
#include <stdlib.h>
#include "scene.h"

static double parse_number(const char **p)
{
    char *end;
    double v = strtod(*p, &end);
    *p = end;
    return v;
}

static int parse_shape(const char **p, struct shape *out)
{
    char kind = **p;
    (*p)++;
    if (kind == 'c') {
        *out = shape_circle(parse_number(p));
    } else if (kind == 'r') {
        double w = parse_number(p);
        if (**p != 'x')
            return -1;
        (*p)++;
        *out = shape_rect(w, parse_number(p));
    } else if (kind == 's') {
        *out = shape_square(parse_number(p));
    } else {
        return -1;
    }
    return 0;
}

int scene_parse(struct scene *sc, const char *spec)
{
    const char *p = spec;
    sc->count = 0;
    while (*p && sc->count < SCENE_MAX) {
        if (parse_shape(&p, &sc->shapes[sc->count]) != 0) {
            fprintf(stderr, "bad shape spec near '%s'\n", p);
            return -1;
        }
        sc->count++;
        if (*p == ',')
            p++;
    }
    return sc->count;
}

/* Divide and conquer: the area of shapes [from, to). */
double scene_total_area(const struct scene *sc, int from, int to)
{
    if (to - from == 1)
        return shape_area(&sc->shapes[from]);
    int mid = from + (to - from) / 2;
    return scene_total_area(sc, from, mid) + scene_total_area(sc, mid, to);
}

void scene_print(const struct scene *sc)
{
    for (int i = 0; i < sc->count; i++) {
        const struct shape *s = &sc->shapes[i];
        printf("%-6s area=%8.3f perimeter=%8.3f\n", shape_kind(s), shape_area(s), shape_perimeter(s));
    }
}
