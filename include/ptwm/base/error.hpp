// Errors of the ptwm library: every message names the file (and tensor,
// chunk or offset where there is one) and says what is wrong.
#pragma once

#include <stdexcept>
#include <string>

namespace ptwm {

// Bad input or a failed system call: the operation cannot go on.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Stored data that does not decode to what its checksum promises. The FUSE
// daemon turns this into EIO for the one read that touched it and keeps
// serving everything else.
class CorruptData : public Error {
public:
    explicit CorruptData(const std::string& what) : Error(what) {}
};

// "path: message" with errno's text appended, for failed system calls.
[[noreturn]] void throw_errno(const std::string& path, const std::string& what);

}  // namespace ptwm
