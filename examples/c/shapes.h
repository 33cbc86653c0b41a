/* shapes.h - a tiny shape library (built as libshapes.so) with a hand-written vtable. */
#ifndef SHAPES_H
#define SHAPES_H

struct shape;

struct shape_ops {
    const char *kind;
    double (*area)(const struct shape *s);
    double (*perimeter)(const struct shape *s);
};

struct shape {
    const struct shape_ops *ops;
    double a, b;
};

struct shape shape_circle(double r);
struct shape shape_rect(double w, double h);
struct shape shape_square(double side);
double shape_area(const struct shape *s);
double shape_perimeter(const struct shape *s);
const char *shape_kind(const struct shape *s);

#endif
