// shapes.hpp - a small class hierarchy with virtual calls.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace geo {

class Shape {
public:
    virtual ~Shape() = default;
    virtual double area() const = 0;
    virtual std::string name() const = 0;
};

class Circle : public Shape {
public:
    explicit Circle(double r) : r_(r) {}
    double area() const override;
    std::string name() const override { return "circle"; }

private:
    double r_;
};

class Rect : public Shape {
public:
    Rect(double w, double h) : w_(w), h_(h) {}
    double area() const override;
    std::string name() const override;

private:
    double w_, h_;
};

std::vector<std::unique_ptr<Shape>> parse_shapes(const std::string &spec);

}  // namespace geo
