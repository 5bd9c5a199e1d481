#include "ptwm/base/error.hpp"

#include <cerrno>
#include <cstring>
#include <exception>

#include "ptwm/base/cancellation.hpp"

namespace ptwm {

void throw_errno(const std::string& path, const std::string& what) {
    const int err = errno;
    throw Error(path + ": " + what + ": " + std::strerror(err));
}

SharedError SharedError::current() {
    SharedError shared;
    try {
        throw;
    } catch (const Error& e) {
        shared.error_ = e.clone();
    } catch (const Cancelled& e) {
        shared.cancelled_by_ = e.signal();
    } catch (const std::exception& e) {
        shared.error_ = std::make_shared<Error>(e.what());
    } catch (...) {
        shared.error_ = std::make_shared<Error>("unknown error");
    }
    return shared;
}

void SharedError::raise() const {
    if (cancelled_by_ != 0) throw Cancelled(cancelled_by_);
    if (error_) error_->throw_copy();
    throw Error("no error was recorded");  // a caller's bug: raise() of an empty one
}

}  // namespace ptwm
