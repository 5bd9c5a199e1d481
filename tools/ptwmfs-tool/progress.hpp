// A one-line progress bar on stderr, drawn only when stderr is a terminal.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ptwm::tool {

class Progress {
public:
    Progress();
    void update(const std::string& label, uint64_t done, uint64_t total);
    void finish();  // clears the line

private:
    bool enabled_;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point last_{};
};

std::string human_bytes(uint64_t bytes);

}  // namespace ptwm::tool
