// Where a store's bytes come from. The store reader needs only "fill this
// buffer from offset O" and the object's size; a local file is one source,
// and an object store (HTTP range reads behind a disk cache) can be another,
// without the reader, the chunk cache or the daemon knowing which.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "ptwm/base/file_io.hpp"

namespace ptwm {

class ByteSource {
public:
    virtual ~ByteSource() = default;
    // The name messages give: a path or a URL.
    virtual const std::string& name() const = 0;
    // The object's size in bytes, fixed for the source's life.
    virtual uint64_t size() const = 0;
    // Fill `out` from `offset` up to the end of the object; returns the bytes
    // read (fewer only at the end). Throws Error naming the object and offset
    // on an I/O failure. Safe to call from several threads at once.
    virtual size_t read_up_to(uint64_t offset, std::span<uint8_t> out) const = 0;
    // Fill `out` from `offset` or throw Error (truncated, or an I/O failure).
    void read_exact(uint64_t offset, std::span<uint8_t> out) const;
};

// A local file read with pread.
class LocalFileSource final : public ByteSource {
public:
    explicit LocalFileSource(File file);
    static std::unique_ptr<LocalFileSource> open(const std::string& path);
    const std::string& name() const override { return file_.path(); }
    uint64_t size() const override { return size_; }
    size_t read_up_to(uint64_t offset, std::span<uint8_t> out) const override;
    const File& file() const { return file_; }

private:
    File file_;
    uint64_t size_;
};

}  // namespace ptwm
