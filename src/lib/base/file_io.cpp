#include "ptwm/base/file_io.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <vector>

#include "ptwm/base/error.hpp"

namespace ptwm {

std::vector<uint8_t> read_whole_file(const std::string& path) {
    const File f = File::open_read(path);
    std::vector<uint8_t> bytes(f.size());
    f.read_exact(0, bytes);
    return bytes;
}

File File::open_read(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw_errno(path, "cannot open");
    return File(fd, path);
}

File::~File() {
    if (fd_ >= 0) ::close(fd_);
}

uint64_t File::size() const {
    struct stat st;
    if (::fstat(fd_, &st) != 0) throw_errno(path_, "cannot stat");
    return static_cast<uint64_t>(st.st_size);
}

size_t File::read_up_to(uint64_t offset, std::span<uint8_t> out) const {
    size_t done = 0;
    while (done < out.size()) {
        const ssize_t r = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
        if (r < 0) {
            if (errno == EINTR) continue;
            throw_errno(path_, "read failed at offset " + std::to_string(offset + done));
        }
        if (r == 0) break;
        done += static_cast<size_t>(r);
    }
    return done;
}

void check_read_complete(const std::string& source, uint64_t offset, size_t wanted, size_t got) {
    if (got < wanted)
        throw Error(source + ": truncated: " + std::to_string(wanted) + " bytes expected at offset " +
                    std::to_string(offset) + ", it ends at " + std::to_string(offset + got));
}

void File::read_exact(uint64_t offset, std::span<uint8_t> out) const {
    check_read_complete(path_, offset, out.size(), read_up_to(offset, out));
}

namespace {
constexpr uint64_t kWritebackBytes = 1u << 20;

}  // namespace

unsigned process_umask() {
    static const unsigned mask = [] {
        unsigned m = 022;
        if (FILE* f = std::fopen("/proc/self/status", "r")) {
            char line[256];
            unsigned v = 0;
            while (std::fgets(line, sizeof line, f) != nullptr)
                if (std::sscanf(line, "Umask: %o", &v) == 1) m = v;
            std::fclose(f);
        }
        return m;
    }();
    return mask;
}

namespace {

// Where an output of `path` goes: through a symlink to its target (a
// link into a hub cache's blobs keeps being one), and never over what is not
// a regular file: renaming over /dev/null or a FIFO would replace it.
std::string output_path(std::string path) {
    struct stat st {};
    // A link to a link is followed too, as open(2) would (40 deep at most);
    // a dangling one gets its target created, as open(O_CREAT) would.
    for (int depth = 0;; ++depth) {
        if (::lstat(path.c_str(), &st) != 0) {
            if (errno == ENOENT) return path;
            throw_errno(path, "cannot stat");
        }
        if (!S_ISLNK(st.st_mode)) break;
        if (depth == 40) throw Error(path + ": too many levels of symbolic links");
        std::vector<char> target(static_cast<size_t>(st.st_size) + 1);
        const ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
        if (n < 0 || static_cast<size_t>(n) >= target.size()) throw_errno(path, "cannot read the symlink");
        const std::string text(target.data(), static_cast<size_t>(n));
        const auto slash = path.rfind('/');
        path = text.front() == '/' || slash == std::string::npos ? text : path.substr(0, slash + 1) + text;
    }
    if (!S_ISREG(st.st_mode))
        throw Error(path + ": exists and is not a regular file (" +
                    (S_ISDIR(st.st_mode) ? "a directory" : "a device, FIFO or socket") +
                    "): outputs are written beside their path and renamed over it, so give the path of a file");
    return path;
}

}  // namespace

std::string hidden_temporary_template(const std::string& path) {
    const auto slash = path.rfind('/');
    const size_t base = slash == std::string::npos ? 0 : slash + 1;
    constexpr std::string_view kSuffix = ".tmp.XXXXXX";
    // Within a name's 255 bytes (NAME_MAX) however long the output's own
    // name: "." and the suffix would put a legal name of 244 bytes or more
    // past it. The name is cut, not the uniqueness (mkstemp's six letters).
    constexpr size_t kNameMax = 255, kKept = kNameMax - 1 - kSuffix.size();
    std::string name = path.substr(0, base);  // (appended, not one + chain: GCC 12 warns a false -Wrestrict on that)
    name += '.';
    name.append(path, base, kKept);
    name += kSuffix;
    return name;
}

AtomicOutput::AtomicOutput(std::string path, unsigned mode, Durability durability)
    : path_(output_path(std::move(path))), durability_(durability) {
    // "new/" names a directory, which no file output can be (the temporary
    // would be "new/.tmp.XXXXXX", and its failure a puzzle).
    if (!path_.empty() && path_.back() == '/') throw Error(path_ + ": no such directory");
    std::string name = hidden_temporary_template(path_);
    fd_ = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd_ < 0) throw_errno(path_, "cannot create a temporary file beside it");
    // Held while this run writes it: ptwmfs-tool removes the temporaries
    // it can lock, those of runs killed before they could remove their own.
    ::flock(fd_, LOCK_EX | LOCK_NB);
    temp_path_ = std::move(name);
    ::fchmod(fd_, mode & ~process_umask());
}

AtomicOutput::~AtomicOutput() {
    if (fd_ >= 0) {
        ::close(fd_);
        ::unlink(temp_path_.c_str());
    }
}

void AtomicOutput::write_at(uint64_t offset, std::span<const uint8_t> data) {
    size_t done = 0;
    while (done < data.size()) {
        const ssize_t r = ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
        if (r < 0) {
            if (errno == EINTR) continue;
            throw_errno(path_, "write failed at offset " + std::to_string(offset + done));
        }
        done += static_cast<size_t>(r);
    }
    unflushed_ += data.size();
    if (unflushed_ >= kWritebackBytes) {
        ::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE);  // the whole file: pages in flight are skipped
        unflushed_ = 0;
    }
}

void AtomicOutput::truncate(uint64_t size) {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) throw_errno(path_, "cannot size");
}

void AtomicOutput::commit() {
    // After the last write (which would set it again), before the sync,
    // which then writes it with the rest. Best effort, as the bytes are
    // what was asked for: a file system that keeps no times fails nothing.
    if (mtime_) {
        const struct timespec times[2] = {{0, UTIME_OMIT}, *mtime_};
        (void)::futimens(fd_, times);
    }
    if (durability_ == Durability::kFsync && ::fsync(fd_) != 0) throw_errno(path_, "cannot sync");
    if (::close(fd_) != 0) {
        fd_ = -1;
        ::unlink(temp_path_.c_str());
        throw_errno(path_, "cannot close");
    }
    fd_ = -1;
    if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
        const int err = errno;
        ::unlink(temp_path_.c_str());
        errno = err;
        throw_errno(path_, "cannot rename into place");
    }
}

}  // namespace ptwm
