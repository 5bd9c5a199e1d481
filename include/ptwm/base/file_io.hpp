// Small RAII wrappers over POSIX files: positional reads that either fill the
// buffer or throw, and an output file that only appears under its name once
// it is complete (temporary file + rename).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ptwm {

// Throws Error naming `source` when a positional read of `wanted` bytes at
// `offset` got only `got` (the source ends there): the one wording of a
// truncated read, for files and every other byte source.
void check_read_complete(const std::string& source, uint64_t offset, size_t wanted, size_t got);

// The whole file at `path` (benchmarks and tests: files that fit in memory).
std::vector<uint8_t> read_whole_file(const std::string& path);

class File {
public:
    static File open_read(const std::string& path);
    File(File&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
    File& operator=(File&&) = delete;
    ~File();

    int fd() const { return fd_; }
    const std::string& path() const { return path_; }
    uint64_t size() const;
    // Fill `out` from `offset` or throw Error naming the file and offset.
    void read_exact(uint64_t offset, std::span<uint8_t> out) const;
    // Fill `out` from `offset` up to the end of the file; returns the bytes
    // read (fewer only at the end). Throws Error on an I/O failure.
    size_t read_up_to(uint64_t offset, std::span<uint8_t> out) const;
    // Give up ownership of the descriptor (the caller closes it).
    int release() {
        const int fd = fd_;
        fd_ = -1;
        return fd;
    }

private:
    File(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
    int fd_;
    std::string path_;
};

// The process's umask, read from /proc once (umask(2) reads it only by
// setting it, which would race with threads creating files).
unsigned process_umask();

// The hidden temporary an output of `path` is written as before it is
// renamed into place, beside it: "dir/NAME" -> "dir/.NAME.tmp.XXXXXX", a
// template for mkostemp(3) or mkdtemp(3). One spelling for a file
// (AtomicOutput) and a staged tree (the tool's StagedDirectory), so that
// whatever an interrupted run leaves is hidden and named the same way.
std::string hidden_temporary_template(const std::string& path);

// When a finished output reaches the disk.
enum class Durability {
    kFsync,     // commit() syncs the file before the rename: on the disk once it has its name
    kByCaller,  // commit() only renames: the file sits in a tree that the
                // caller syncs whole (a staged tree's one syncfs before its
                // own rename), or in one that needs no sync (a temporary tree
                // uploaded, then deleted). An fsync a file costs a journal
                // commit each: 3.5 ms a file here, 0.8 s for 201 small files.
};

// Written as a hidden temporary beside `path`; commit() syncs (see
// Durability) and renames it into place. Destroyed uncommitted (an error
// on the way), it removes the temporary: a failed write never leaves a
// partial file under `path`.
// A `path` that is a symlink is written through to its target (the link
// stays; a dangling link's target is created); one that is a device, FIFO,
// socket or directory is refused (Error),
// never renamed over. `mode` is taken less the process's umask, as open(2)
// would.
class AtomicOutput {
public:
    explicit AtomicOutput(std::string path, unsigned mode = 0666, Durability durability = Durability::kFsync);
    AtomicOutput(const AtomicOutput&) = delete;
    AtomicOutput& operator=(const AtomicOutput&) = delete;
    ~AtomicOutput();

    // Every MiB written, also starts the disk's writeback of what is there
    // without waiting, so that commit's fsync finds most of the file on the
    // disk already (a 1.4 GB store's fsync took 0.53 s of a 7 s pack
    // otherwise). Every 16 MiB, as it was first, left stores of a few MB
    // whole to the fsync: 9-18 ms of a 3.3 MB store's, 5.5-7 ms with this
    // (the rest is the journal's commit). A hint: errors show at commit.
    void write_at(uint64_t offset, std::span<const uint8_t> data);
    void truncate(uint64_t size);
    // The modification time commit() gives the file: that of the file it
    // was made from (`of`, its stat), as cp -p and gzip keep it. A Hugging
    // Face cache's scan (huggingface-cli scan-cache's LAST_MODIFIED) reads
    // it from the blobs; without this every packed or unpacked blob looked
    // written a moment ago. (Not the access time: reading the source to
    // make this file was an access, and the source's own now says so.)
    void keep_modification_time(const struct stat& of) { mtime_ = of.st_mtim; }
    void commit();
    const std::string& path() const { return path_; }

private:
    std::string path_;
    std::string temp_path_;
    int fd_ = -1;
    Durability durability_;
    uint64_t unflushed_ = 0;  // bytes written since the last writeback was started
    std::optional<struct timespec> mtime_;  // keep_modification_time
};

}  // namespace ptwm
