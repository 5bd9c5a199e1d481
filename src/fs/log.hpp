// Daemon messages: to stderr while in the foreground, to syslog once the
// daemon has detached (its stderr is then /dev/null).
#pragma once

namespace ptwmfs {

// Route our messages and libfuse's to syslog from now on.
void log_to_syslog();

// printf-style; one line, "ptwmfs: " prepended, newline appended.
[[gnu::format(printf, 1, 2)]] void log_error(const char* format, ...);
[[gnu::format(printf, 1, 2)]] void log_info(const char* format, ...);

}  // namespace ptwmfs
