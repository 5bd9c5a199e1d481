// A plain file of a remote tree (config, tokenizer, an ONNX or pickled model
// beside the safetensors) as the mount serves it: by range, through an
// HttpSource opened on its first read. Its bytes come as reads ask for them
// (1 MiB blocks by range GET behind the disk cache, fetched ahead for a
// sequential reader), so a file of any size opens at once, serves its first
// page after one block, and holds a bounded share of memory. It had been
// fetched whole into an in-memory file on every open: a 5 GB file took
// 5 GB of RAM and its whole download before its first byte.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "ptwm/base/byte_source.hpp"
#include "shared_attempt.hpp"

namespace ptwmfs {

class RemotePlainFile {
public:
    using SourceOpener = std::function<std::shared_ptr<const ptwm::ByteSource>()>;

    // `name` is the object's URL for messages; `size` the manifest's.
    RemotePlainFile(std::string name, uint64_t size, SourceOpener open_source);

    const std::string& name() const { return name_; }

    // Fills `out` from `offset`, fewer bytes only at the end of the file.
    // Opens the source first if need be (concurrent first readers share
    // one attempt: its source, or its error). Throws Error naming the object: a failed request (the next
    // read tries again), an object whose size is no longer the manifest's,
    // or ObjectChanged for one replaced since it was opened.
    size_t read(uint64_t offset, std::span<uint8_t> out) const;

private:
    std::shared_ptr<const ptwm::ByteSource> source() const;

    std::string name_;
    uint64_t size_;
    SourceOpener open_source_;
    mutable SharedAttempt<std::shared_ptr<const ptwm::ByteSource>> opening_;  // first readers merge on it
    mutable std::mutex source_mutex_;  // guards source_ (short holds only)
    mutable std::shared_ptr<const ptwm::ByteSource> source_;  // opened once, kept
    mutable std::string changed_;  // why it cannot be opened any more (touched by one attempt at a time)
};

}  // namespace ptwmfs
