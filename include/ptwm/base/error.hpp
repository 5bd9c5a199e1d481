// Errors of the ptwm library: every message names the file (and tensor,
// chunk or offset where there is one) and says what is wrong.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

namespace ptwm {

// Bad input or a failed system call: the operation cannot go on.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}

    // A copy made anew, of this error's own class: its message in a string
    // of its own, so that no copy shares anything with another. Every class
    // below overrides both (SharedError says why).
    virtual std::shared_ptr<const Error> clone() const { return std::make_shared<Error>(what()); }
    [[noreturn]] virtual void throw_copy() const { throw Error(what()); }
};

// Stored data that does not decode to what its checksum promises. The FUSE
// daemon turns this into EIO for the one read that touched it and keeps
// serving everything else.
class CorruptData : public Error {
public:
    explicit CorruptData(const std::string& what) : Error(what) {}
    std::shared_ptr<const Error> clone() const override { return std::make_shared<CorruptData>(what()); }
    [[noreturn]] void throw_copy() const override { throw CorruptData(what()); }
};

// "path: message" with errno's text appended, for failed system calls.
[[noreturn]] void throw_errno(const std::string& path, const std::string& what);

// One failure that several threads take: the readers that waited for one
// fetch or one decode. Each throws a copy of its own, made anew, of the
// class that was thrown (so their catch clauses tell CorruptData from a
// failed request as the first thread's did), never one exception object
// rethrown on several threads: std::exception_ptr and the message string
// of std::runtime_error count their owners inside libstdc++, where
// ThreadSanitizer cannot see it, and the last owner's delete looked like a
// race with another thread's what().
class SharedError {
public:
    SharedError() = default;
    // The exception being handled (call it in a catch block). One that is
    // not an Error or Cancelled becomes an Error with its message.
    static SharedError current();

    explicit operator bool() const { return error_ != nullptr || cancelled_by_ != 0; }
    [[noreturn]] void raise() const;

private:
    std::shared_ptr<const Error> error_;
    int cancelled_by_ = 0;  // a Cancelled, by this signal
};

}  // namespace ptwm
