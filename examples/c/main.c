/* main.c - the "scene" example: parse shapes, print them, sum their areas recursively and
 * in worker threads, and optionally run a dlopen()ed plugin (--plugin-ns: loaded with
 * dlmopen() into a link-map namespace of its own, with its own copy of libshapes and libc).
 *
 *   scene [SPEC] [--threads N] [--plugin PATH | --plugin-ns PATH]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "scene.h"

struct job {
    const struct scene *sc;
    int from, to;
    double result;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    j->result = scene_total_area(j->sc, j->from, j->to);
    return NULL;
}

static double parallel_area(const struct scene *sc, int nthreads)
{
    pthread_t tids[16];
    struct job jobs[16];
    int per = (sc->count + nthreads - 1) / nthreads;
    int started = 0;
    for (int i = 0; i < nthreads && i * per < sc->count; i++) {
        int to = (i + 1) * per < sc->count ? (i + 1) * per : sc->count;
        jobs[i] = (struct job){sc, i * per, to, 0.0};
        pthread_create(&tids[i], NULL, worker, &jobs[i]);
        started++;
    }
    double total = 0.0;
    for (int i = 0; i < started; i++) {
        pthread_join(tids[i], NULL);
        total += jobs[i].result;
    }
    return total;
}

static int run_plugin(const char *path, const struct scene *sc, int own_namespace)
{
    void *h = own_namespace ? dlmopen(LM_ID_NEWLM, path, RTLD_NOW) : dlopen(path, RTLD_NOW);
    if (!h) {
        fprintf(stderr, "cannot load plugin: %s\n", dlerror());
        return -1;
    }
    double (*score)(const struct scene *) = (double (*)(const struct scene *))dlsym(h, "plugin_score");
    if (!score) {
        fprintf(stderr, "plugin has no plugin_score\n");
        dlclose(h);
        return -1;
    }
    printf("plugin score: %.3f\n", score(sc));
    return 0;
}

int main(int argc, char **argv)
{
    const char *spec = "c1,r2x3,s4,c0.5,r1x1";
    const char *plugin = NULL;
    int own_namespace = 0;
    int nthreads = 2;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            nthreads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--plugin") == 0 && i + 1 < argc)
            plugin = argv[++i];
        else if (strcmp(argv[i], "--plugin-ns") == 0 && i + 1 < argc) {
            plugin = argv[++i];
            own_namespace = 1;
        }
        else
            spec = argv[i];
    }
    if (nthreads < 1 || nthreads > 16)
        nthreads = 2;
    struct scene sc;
    if (scene_parse(&sc, spec) <= 0)
        return 2;
    scene_print(&sc);
    printf("total area: %.3f\n", scene_total_area(&sc, 0, sc.count));
    printf("parallel area (%d threads): %.3f\n", nthreads, parallel_area(&sc, nthreads));
    if (plugin && run_plugin(plugin, &sc, own_namespace) != 0)
        return 3;
    return 0;
}
