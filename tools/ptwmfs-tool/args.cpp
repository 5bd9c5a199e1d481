#include <cctype>

#include "command.hpp"

#include "ptwm/base/parallel.hpp"

namespace ptwm::tool {

bool Args::flag(const std::string& long_name, const std::string& short_name) {
    bool found = false;
    for (auto it = args_.begin(); it != args_.end();) {
        if (*it == "--") break;
        if (*it == "--" + long_name || (!short_name.empty() && *it == "-" + short_name)) {
            it = args_.erase(it);
            found = true;
        } else {
            ++it;
        }
    }
    return found;
}

bool Args::option(const std::string& long_name, const std::string& short_name, std::string& value) {
    bool found = false;
    for (auto it = args_.begin(); it != args_.end();) {
        if (*it == "--") break;
        const std::string with_eq = "--" + long_name + "=";
        if (it->rfind(with_eq, 0) == 0) {
            value = it->substr(with_eq.size());
            it = args_.erase(it);
            found = true;
        } else if (*it == "--" + long_name || (!short_name.empty() && *it == "-" + short_name)) {
            if (it + 1 == args_.end()) throw UsageError{"option " + *it + " needs a value"};
            value = *(it + 1);
            it = args_.erase(it, it + 2);
            found = true;
        } else if (!short_name.empty() && it->size() > 2 && it->rfind("-" + short_name, 0) == 0 && (*it)[1] != '-') {
            value = it->substr(2);  // -j4
            it = args_.erase(it);
            found = true;
        } else {
            ++it;
        }
    }
    return found;
}

std::vector<std::string> Args::positionals(size_t min, size_t max) {
    std::vector<std::string> out;
    bool options_done = false;
    for (const auto& a : args_) {
        if (!options_done && a == "--") {
            options_done = true;
            continue;
        }
        if (!options_done && a.size() > 1 && a[0] == '-') throw UsageError{"unknown option '" + a + "'"};
        out.push_back(a);
    }
    if (out.size() < min) throw UsageError{"missing arguments"};
    if (out.size() > max) throw UsageError{"too many arguments: '" + out[max] + "'"};
    return out;
}

uint64_t parse_count(const std::string& text, const std::string& what) {
    uint64_t v = 0;
    if (text.empty()) throw UsageError{what + " needs a number"};
    for (char c : text) {
        if (!std::isdigit(static_cast<unsigned char>(c))) throw UsageError{what + " needs a number, not '" + text + "'"};
        v = v * 10 + static_cast<uint64_t>(c - '0');
        if (v > (1ull << 40)) throw UsageError{what + " is too large"};
    }
    return v;
}

unsigned parse_threads(const std::string& text) {
    const uint64_t n = parse_count(text, "--threads");
    if (n > kMaxThreads) throw UsageError{"--threads takes 0 (all cores) to " + std::to_string(kMaxThreads) + ", not " + text};
    return static_cast<unsigned>(n);
}

}  // namespace ptwm::tool
