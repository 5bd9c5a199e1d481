#include "progress.hpp"

#include <unistd.h>

#include <cstdio>

#include "ptwm/base/utf8.hpp"

namespace ptwm::tool {

Progress::Progress() : enabled_(::isatty(STDERR_FILENO) == 1) {}

void Progress::update(const std::string& label, uint64_t done, uint64_t total) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    constexpr int kWidth = 30;
    const double share = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
    const int filled = static_cast<int>(share * kWidth);
    std::fprintf(stderr, "\r\033[K[%.*s%*s] %3d%% %s", filled, "##############################", kWidth - filled, "",
                 static_cast<int>(share * 100), printable(label).c_str());
    std::fflush(stderr);
    drawn_ = true;
}

void Progress::finish() {
    if (drawn_) std::fputs("\r\033[K", stderr);
    drawn_ = false;
}

std::string human_bytes(uint64_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, ++u;
    char buf[32];
    std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", v, units[u]);
    return buf;
}

}  // namespace ptwm::tool
