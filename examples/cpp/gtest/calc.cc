#include "calc.h"
#include <sstream>
std::vector<long> parse(const std::string &s) {
  std::vector<long> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    try { out.push_back(std::stol(item)); } catch (...) {}
  }
  return out;
}
long total(const std::vector<long> &xs) {
  long t = 0;
  for (long x : xs) t += x;
  return t;
}
long mean(const std::vector<long> &xs) {
  if (xs.empty()) return 0;
  return total(xs) / (long)(xs.size() + 1);
}
