// main.cpp - the C++ example: virtual calls, a function template, lambdas and an exception.
//   shapes [SPEC]      e.g. shapes c1,r2x3,s2   (a bad spec such as "q1" throws and is caught)
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "shapes.hpp"

template <typename T, typename F>
T sum_by(const std::vector<std::unique_ptr<geo::Shape>> &shapes, F f)
{
    T total{};
    for (const auto &s : shapes)
        total += f(*s);
    return total;
}

static void report(const std::vector<std::unique_ptr<geo::Shape>> &shapes)
{
    for (const auto &s : shapes)
        std::printf("%-7s %8.3f\n", s->name().c_str(), s->area());
    double total = sum_by<double>(shapes, [](const geo::Shape &s) { return s.area(); });
    int named = sum_by<int>(shapes, [](const geo::Shape &s) {
        return s.name() == "square" ? 1 : 0;
    });
    std::printf("total area %.3f, %d square(s)\n", total, named);
}

int main(int argc, char **argv)
{
    std::string spec = argc > 1 ? argv[1] : "c1,r2x3,s2";
    try {
        auto shapes = geo::parse_shapes(spec);
        report(shapes);
    } catch (const std::invalid_argument &e) {
        std::printf("error: %s\n", e.what());
        return 1;
    }
    return 0;
}
