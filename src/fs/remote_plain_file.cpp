#include "remote_plain_file.hpp"

#include "ptwm/remote/http_client.hpp"
#include "ptwm/remote/http_source.hpp"

namespace ptwmfs {

RemotePlainFile::RemotePlainFile(std::string name, uint64_t size, SourceOpener open_source)
    : name_(std::move(name)), size_(size), open_source_(std::move(open_source)) {}

std::shared_ptr<const ptwm::ByteSource> RemotePlainFile::source() const {
    auto opened_now = [this] {
        std::lock_guard lock(source_mutex_);
        return source_;
    };
    if (auto source = opened_now()) return source;
    // Concurrent first readers wait for one attempt and share its outcome.
    return opening_.run([&] {
        if (auto source = opened_now()) return source;  // opened by the attempt before this one
        // Replaced on the server since the mount (it, or its tree): no later
        // attempt would find the version the mount shows.
        if (!changed_.empty()) throw ptwm::remote::ObjectChanged(changed_);
        std::shared_ptr<const ptwm::ByteSource> opened;
        try {
            opened = open_source_();
        } catch (const ptwm::remote::ObjectChanged& e) {
            changed_ = e.what();
            throw;
        }
        // The mount shows the manifest's size (kept closed: a remount shows the new one).
        ptwm::remote::require_manifest_size(*opened, size_);
        std::lock_guard lock(source_mutex_);
        return source_ = std::move(opened);
    });
}

size_t RemotePlainFile::read(uint64_t offset, std::span<uint8_t> out) const {
    if (offset >= size_) return 0;  // past the end: nothing to fetch, not even a HEAD
    return source()->read_up_to(offset, out);
}

}  // namespace ptwmfs
