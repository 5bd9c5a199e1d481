// ptwmfs-tool: make, unmake, check and look into ptwmfs stores. Each
// subcommand lives in its own file; this only dispatches.
#include <malloc.h>
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "command.hpp"
#include "ptwm/base/cancellation.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/base/utf8.hpp"
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
    "  inspect STORE [--json] [--chunks]\n"
    "                          per tensor and plane: decomposition, codec, sizes, entropy bound\n"
    "\n"
    "'ptwmfs-tool COMMAND --help' tells more; see also ptwmfs-tool(1), ptwmfs(1), ptwmfs-store(5).\n";

void on_signal(int signal) { ptwm::request_cancellation(signal); }

// SIGINT, SIGTERM and SIGHUP ask the work under way to stop: it throws
// ptwm::Cancelled at its next step, and the unwinding removes temporary
// files and aborts multipart uploads. Once only: a second signal has its
// default effect. A signal the caller left ignored (nohup, a background
// job) stays ignored.
void stop_on_signals() {
    struct sigaction stop {};
    stop.sa_handler = on_signal;
    stop.sa_flags = SA_RESETHAND | SA_RESTART;
    sigemptyset(&stop.sa_mask);
    for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
        struct sigaction old {};
        if (sigaction(signal, nullptr, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(signal, &stop, nullptr);
    }
}

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
    stop_on_signals();
    try {
        if (command == "pack") return pack_main(args);
        if (command == "unpack") return unpack_main(args);
        if (command == "verify") return verify_main(args);
        if (command == "inspect") return inspect_main(args);
        std::fprintf(stderr, "ptwmfs-tool: unknown command '%s'\n\n%s", ptwm::printable(command).c_str(), kUsageText);
        return kBadUsage;
    } catch (const UsageError& e) {
        std::fprintf(stderr, "ptwmfs-tool %s: %s (see 'ptwmfs-tool %s --help')\n", command.c_str(),
                     ptwm::printable(e.message).c_str(),
                     command.c_str());
        return kBadUsage;
    } catch (const ptwm::Cancelled& e) {
        std::fprintf(stderr, "\nptwmfs-tool %s: %s: stopped, nothing half-written left\n", command.c_str(),
                     ptwm::printable(e.what()).c_str());
        return 128 + e.signal();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ptwmfs-tool %s: error: %s\n", command.c_str(), ptwm::printable(e.what()).c_str());
        return kFailed;
    }
}
