#include "log.hpp"

#include <fuse_log.h>
#include <syslog.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <string>

#include "ptwm/base/utf8.hpp"

namespace ptwmfs {
namespace {

std::atomic<bool> use_syslog{false};

void write_line(int priority, const char* format, va_list args) {
    // Names in messages come from the store directory and its files: a
    // control byte in one is shown as \xHH, never sent to a terminal or a
    // log raw.
    va_list again;
    va_copy(again, args);
    const int length = vsnprintf(nullptr, 0, format, args);
    std::string line(length > 0 ? static_cast<size_t>(length) : 0, '\0');
    vsnprintf(line.data(), line.size() + 1, format, again);
    va_end(again);
    const std::string shown = ptwm::printable(line);
    if (use_syslog) {
        syslog(priority, "%s", shown.c_str());
        return;
    }
    // One buffered write per message so lines from worker threads do not interleave.
    fprintf(stderr, "ptwmfs: %s\n", shown.c_str());
}

void libfuse_log(enum fuse_log_level level, const char* format, va_list args) {
    if (use_syslog) {
        vsyslog(static_cast<int>(level), format, args);
    } else {
        vfprintf(stderr, format, args);
    }
}

}  // namespace

void log_to_syslog() {
    openlog("ptwmfs", LOG_PID, LOG_DAEMON);
    use_syslog = true;
    fuse_set_log_func(libfuse_log);
}

void log_error(const char* format, ...) {
    va_list args;
    va_start(args, format);
    write_line(LOG_ERR, format, args);
    va_end(args);
}

void log_info(const char* format, ...) {
    va_list args;
    va_start(args, format);
    write_line(LOG_INFO, format, args);
    va_end(args);
}

}  // namespace ptwmfs
