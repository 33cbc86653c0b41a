#pragma once
#include <vector>
#include <string>
std::vector<long> parse(const std::string &s);
long total(const std::vector<long> &xs);
long mean(const std::vector<long> &xs);
