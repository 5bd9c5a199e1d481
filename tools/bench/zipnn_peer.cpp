#include "zipnn_peer.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

extern char** environ;

namespace bench {

ZipnnPeer::~ZipnnPeer() { stop(); }

std::optional<std::string> ZipnnPeer::start(const std::string& python, const std::string& script) {
    if (access(python.c_str(), X_OK) != 0) return python + " not found (bash tools/install-deps.sh makes .venv)";
    if (access(script.c_str(), R_OK) != 0) return script + " not found";
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
    if (pipe2(out, O_CLOEXEC) != 0) {
        close(in[0]), close(in[1]);
        return std::string("pipe: ") + std::strerror(errno);
    }
    // A peer that dies must not kill the bench with SIGPIPE: writes then fail.
    signal(SIGPIPE, SIG_IGN);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    std::vector<char*> argv = {const_cast<char*>(python.c_str()), const_cast<char*>(script.c_str()), nullptr};
    const int rc = posix_spawn(&pid_, python.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(in[0]);
    close(out[1]);
    if (rc != 0) {
        pid_ = -1;
        close(in[1]), close(out[0]);
        return "cannot run " + python + ": " + std::strerror(rc);
    }
    to_ = fdopen(in[1], "w");
    from_ = fdopen(out[0], "r");
    try {
        const nlohmann::json hello = call("");
        version_ = hello.value("version", "?");
    } catch (const std::exception& e) {
        stop();
        return e.what();
    }
    return std::nullopt;
}

// Sends one command (none for the greeting) and reads the one JSON line it
// answers; a peer that reports ok: false, dies or answers garbage throws.
nlohmann::json ZipnnPeer::call(const std::string& line) {
    if (!running()) throw std::runtime_error("the ZipNN peer is not running");
    if (!line.empty() && (std::fprintf(to_, "%s\n", line.c_str()) < 0 || std::fflush(to_) != 0)) {
        stop();
        throw std::runtime_error("the ZipNN peer exited");
    }
    std::string answer;
    char buf[4096];
    while (std::fgets(buf, sizeof buf, from_)) {
        answer += buf;
        if (answer.back() == '\n') break;
    }
    if (answer.empty()) {
        stop();
        throw std::runtime_error("the ZipNN peer exited without answering");
    }
    nlohmann::json j = nlohmann::json::parse(answer, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw std::runtime_error("the ZipNN peer answered: " + answer);
    if (!j.value("ok", false)) throw std::runtime_error(j.value("error", answer));
    return j;
}

ZipnnOpen ZipnnPeer::open(const std::string& path) {
    if (path.find('\n') != std::string::npos) throw std::runtime_error("a path with a newline");
    const nlohmann::json j = call("open " + path);
    return {j.at("stored").get<uint64_t>(), j.at("compressed_bytes").get<uint64_t>(), j.at("tensors").get<int>(),
            j.at("compressed_tensors").get<int>()};
}

ZipnnRound ZipnnPeer::round() {
    const nlohmann::json j = call("round");
    return {j.at("compress_s").get<double>(), j.at("compress_cpu_s").get<double>(), j.at("decompress_s").get<double>(),
            j.at("decompress_cpu_s").get<double>()};
}

void ZipnnPeer::stop() {
    if (to_) {
        std::fputs("quit\n", to_);
        std::fclose(to_);
        to_ = nullptr;
    }
    if (from_) {
        std::fclose(from_);
        from_ = nullptr;
    }
    if (pid_ > 0) {
        int status;
        while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
        pid_ = -1;
    }
}

}  // namespace bench
