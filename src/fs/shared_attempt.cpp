#include "shared_attempt.hpp"

#include "ptwm/base/error.hpp"
#include "ptwm/remote/http_client.hpp"

namespace ptwmfs {

SharedFailure SharedFailure::current() {
    SharedFailure f;
    try {
        throw;
    } catch (const ptwm::remote::ObjectChanged& e) {
        f.kind_ = Kind::object_changed;
        f.what_ = e.what();
    } catch (const ptwm::remote::RemoteError& e) {
        f.kind_ = Kind::remote_error;
        f.what_ = e.what();
        f.status_ = e.status();
        f.transient_ = e.transient();
    } catch (const ptwm::CorruptData& e) {
        f.kind_ = Kind::corrupt_data;
        f.what_ = e.what();
    } catch (const std::exception& e) {
        f.what_ = e.what();
    } catch (...) {
        f.what_ = "unknown error";
    }
    return f;
}

void SharedFailure::raise() const {
    switch (kind_) {
    case Kind::object_changed: throw ptwm::remote::ObjectChanged(what_);
    case Kind::remote_error: throw ptwm::remote::RemoteError(what_, status_, transient_);
    case Kind::corrupt_data: throw ptwm::CorruptData(what_);
    case Kind::error: break;
    }
    throw ptwm::Error(what_);
}

}  // namespace ptwmfs
