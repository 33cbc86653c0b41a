/* shapes.c - shape implementations, dispatched through function pointers. */
#include "shapes.h"

static const double PI = 3.14159265358979323846;

static double
circle_area(const struct shape *s)
{
    return PI * s->a * s->a;
}

static double
circle_perimeter(const struct shape *s)
{
    return 2.0 * PI * s->a;
}

static double rect_area(const struct shape *s)
{
    return s->a * s->b;
}

static double rect_perimeter(const struct shape *s)
{
    return 2.0 * (s->a + s->b);
}

static const struct shape_ops circle_ops = {"circle", circle_area, circle_perimeter};
static const struct shape_ops rect_ops = {"rect", rect_area, rect_perimeter};

struct shape shape_circle(double r)
{
    struct shape s = {&circle_ops, r, 0.0};
    return s;
}

struct shape shape_rect(double w, double h)
{
    struct shape s = {&rect_ops, w, h};
    return s;
}

/* A square is a rectangle with equal sides. */
struct shape shape_square(double side)
{
    return shape_rect(side, side);
}

double shape_area(const struct shape *s)
{
    return s->ops->area(s);
}

double shape_perimeter(const struct shape *s)
{
    return s->ops->perimeter(s);
}

const char *shape_kind(const struct shape *s)
{
    return s->ops->kind;
}
