// ptwmfs-tool: make, unmake, check and look into ptwmfs stores. Each
// subcommand lives in its own file; this only dispatches.
#include <malloc.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "command.hpp"
#include "ptwm/base/error.hpp"
#include "ptwmfs_version.h"

namespace {

constexpr const char* kUsageText =
    "usage: ptwmfs-tool COMMAND [OPTIONS] ARGS\n"
    "\n"
    "commands:\n"
    "  pack SRC DST            compress a .safetensors file or a model directory into stores\n"
    "  unpack SRC DST          restore the byte-identical originals from a store or directory\n"
    "  verify SRC [--against ORIGINAL]\n"
    "                          decode everything and check every checksum\n"
    "  inspect STORE [--json]  per tensor and plane: decomposition, codec, sizes, entropy bound\n"
    "\n"
    "'ptwmfs-tool COMMAND --help' tells more; see also ptwmfs-tool(1), ptwmfs(1), ptwmfs-store(5).\n";

}  // namespace

int main(int argc, char** argv) {
    using namespace ptwm::tool;
    // Chunk buffers of a few hundred KiB come and go thousands of times.
    // By default glibc maps each one afresh (or trims the heap back after
    // it), and every page of it faults again when next used: a fifth of a
    // small file's pack time on this VM. A short-lived tool can keep them.
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_TOP_PAD, 16 << 20);
    if (argc < 2) {
        std::fputs(kUsageText, stderr);
        return kBadUsage;
    }
    const std::string command = argv[1];
    if (command == "--help" || command == "-h" || command == "help") {
        std::fputs(kUsageText, stdout);
        return kOk;
    }
    if (command == "--version" || command == "-V") {
        std::printf("ptwmfs-tool %s\n", PTWMFS_VERSION);
        return kOk;
    }
    Args args({argv + 2, argv + argc});
    try {
        if (command == "pack") return pack_main(args);
        if (command == "unpack") return unpack_main(args);
        if (command == "verify") return verify_main(args);
        if (command == "inspect") return inspect_main(args);
        std::fprintf(stderr, "ptwmfs-tool: unknown command '%s'\n\n%s", command.c_str(), kUsageText);
        return kBadUsage;
    } catch (const UsageError& e) {
        std::fprintf(stderr, "ptwmfs-tool %s: %s (see 'ptwmfs-tool %s --help')\n", command.c_str(), e.message.c_str(),
                     command.c_str());
        return kBadUsage;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ptwmfs-tool %s: error: %s\n", command.c_str(), e.what());
        return kFailed;
    }
}
