// shapes.cpp - shape implementations and a parser that throws on bad input.
#include "shapes.hpp"

#include <sstream>
#include <stdexcept>

namespace geo {

double Circle::area() const
{
    return 3.14159265358979 * r_ * r_;
}

double Rect::area() const
{
    return w_ * h_;
}

std::string Rect::name() const
{
    return w_ == h_ ? "square" : "rect";
}

static std::unique_ptr<Shape> parse_one(const std::string &tok)
{
    if (tok.size() < 2)
        throw std::invalid_argument("shape spec too short: '" + tok + "'");
    double a = std::stod(tok.substr(1));
    switch (tok[0]) {
    case 'c':
        return std::make_unique<Circle>(a);
    case 's':
        return std::make_unique<Rect>(a, a);
    case 'r': {
        auto x = tok.find('x');
        if (x == std::string::npos)
            throw std::invalid_argument("rect needs WxH: '" + tok + "'");
        return std::make_unique<Rect>(a, std::stod(tok.substr(x + 1)));
    }
    default:
        throw std::invalid_argument("unknown shape kind in '" + tok + "'");
    }
}

std::vector<std::unique_ptr<Shape>> parse_shapes(const std::string &spec)
{
    std::vector<std::unique_ptr<Shape>> out;
    std::stringstream ss(spec);
    std::string tok;
    while (std::getline(ss, tok, ','))
        out.push_back(parse_one(tok));
    return out;
}

}  // namespace geo
