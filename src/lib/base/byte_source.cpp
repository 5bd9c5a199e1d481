#include "ptwm/base/byte_source.hpp"

#include "ptwm/base/error.hpp"

namespace ptwm {

void ByteSource::read_exact(uint64_t offset, std::span<uint8_t> out) const {
    const size_t done = read_up_to(offset, out);
    if (done < out.size())
        throw Error(name() + ": truncated: " + std::to_string(out.size()) + " bytes expected at offset " +
                    std::to_string(offset) + ", it ends at " + std::to_string(offset + done));
}

LocalFileSource::LocalFileSource(File file) : file_(std::move(file)), size_(file_.size()) {}

std::unique_ptr<LocalFileSource> LocalFileSource::open(const std::string& path) {
    return std::make_unique<LocalFileSource>(File::open_read(path));
}

size_t LocalFileSource::read_up_to(uint64_t offset, std::span<uint8_t> out) const {
    return file_.read_up_to(offset, out);
}

}  // namespace ptwm
