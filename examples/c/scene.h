/* scene.h - a scene is a list of shapes parsed from a spec string. */
#ifndef SCENE_H
#define SCENE_H

#include "shapes.h"

#define SCENE_MAX 64

struct scene {
    int count;
    struct shape shapes[SCENE_MAX];
};

int scene_parse(struct scene *sc, const char *spec);
double scene_total_area(const struct scene *sc, int from, int to);
void scene_print(const struct scene *sc);

#endif
