#include "ptwm/base/error.hpp"

#include <cerrno>
#include <cstring>

namespace ptwm {

void throw_errno(const std::string& path, const std::string& what) {
    const int err = errno;
    throw Error(path + ": " + what + ": " + std::strerror(err));
}

}  // namespace ptwm
