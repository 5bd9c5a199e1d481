// What every ptwmfs-tool subcommand shares: its entry point signature, the
// argument reader, and exit codes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ptwm::tool {

enum Exit : int { kOk = 0, kFailed = 1, kBadUsage = 2 };

// Thrown for a malformed command line; main prints it with the usage line.
struct UsageError {
    std::string message;
};

// A minimal getopt-like reader: flags and options may come anywhere among
// the positional arguments; "--" ends option parsing.
class Args {
public:
    explicit Args(std::vector<std::string> args) : args_(std::move(args)) {}
    bool flag(const std::string& long_name, const std::string& short_name = "");
    // The value of --name=V, --name V or -x V; nullopt-like empty when absent.
    bool option(const std::string& long_name, const std::string& short_name, std::string& value);
    // What is left once flags and options are taken; unknown options are errors.
    std::vector<std::string> positionals(size_t min, size_t max);

private:
    std::vector<std::string> args_;
};

uint64_t parse_count(const std::string& text, const std::string& what);
// --threads N: 0 (all cores, as without the option) to kMaxThreads.
unsigned parse_threads(const std::string& text);

int pack_main(Args& args);
int unpack_main(Args& args);
int verify_main(Args& args);
int inspect_main(Args& args);

}  // namespace ptwm::tool
