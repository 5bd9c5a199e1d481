#include "store_open.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ptwm/base/error.hpp"
#include "ptwm/remote/http_source.hpp"
#include "ptwm/store/store_names.hpp"
#include "tree.hpp"

namespace ptwm::tool {

const char* const kRemoteHelp =
    "  s3:// and https:// sources (credentials and region: the AWS variables and ~/.aws):\n"
    "      --s3-endpoint URL  S3 endpoint (default $AWS_ENDPOINT_URL, else AWS; path-style)\n"
    "      --region R         S3 region (default $AWS_REGION, ~/.aws/config, us-east-1)\n"
    "      --profile P        profile in ~/.aws/credentials and config (default $AWS_PROFILE)\n"
    "      --remote-timeout S give up a request after S seconds of retries (default 60)\n";

bool is_url(const std::string& text) {
    if (const std::string scheme = remote::unsupported_url_scheme(text); !scheme.empty())
        throw Error(text + ": " + scheme + ":// is not a scheme ptwmfs reads (s3://, https:// and http:// are)");
    return remote::is_remote_url(text);
}

bool printed_help(Args& args, const char* help) {
    if (!args.flag("help", "h")) return false;
    std::fputs(help, stdout);
    std::fputs(kRemoteHelp, stdout);
    return true;
}

RemoteOptions remote_options(Args& args) {
    RemoteOptions o;
    std::string value;
    const auto given = [&](const char* name) {
        if (!args.option(name, "", value)) return false;
        if (o.first_given.empty()) o.first_given = std::string("--") + name;
        return true;
    };
    if (given("s3-endpoint")) o.s3.endpoint = value;
    if (given("region")) o.s3.region = value;
    if (given("profile")) o.s3.profile = value;
    if (given("remote-timeout")) {
        o.retry.timeout_seconds = static_cast<double>(parse_count(value, "--remote-timeout"));
        if (o.retry.timeout_seconds < 1) throw UsageError{"--remote-timeout takes 1 second or more"};
    }
    return o;
}

void refuse_unused(const RemoteOptions& options, const std::vector<std::string>& operands) {
    if (options.first_given.empty()) return;
    for (const std::string& operand : operands)
        if (is_url(operand)) return;
    throw UsageError{options.first_given + " is for s3:// and https:// URLs, and none is given"};
}

namespace {

remote::RemoteUrl must_parse(const std::string& url) {
    auto u = remote::parse_remote_url(url);
    if (!u) throw Error(url + ": not an s3:// or https:// URL");
    return *u;
}

// Tools read each byte once, front to back: large blocks, no disk cache.
remote::HttpSourceOptions tool_source_options() {
    remote::HttpSourceOptions o;
    o.block_bytes = 8u << 20;
    o.memory_blocks = 8;
    o.allow_offline = false;
    return o;
}

}  // namespace

bool url_names_store(const std::string& url) { return is_store_name(must_parse(url).leaf()); }

std::string local_store_path(const std::string& path) {
    const fs::path store = store_behind_dangling_link(path);
    return store.empty() ? path : store.string();
}

std::unique_ptr<StoreReader> open_store(const std::string& path_or_url, const RemoteOptions& options) {
    if (!is_url(path_or_url)) return StoreReader::open(local_store_path(path_or_url));
    const remote::RemoteUrl url = must_parse(path_or_url);
    auto store = std::make_shared<remote::ObjectStore>(url, options.s3, options.retry);
    return StoreReader::open(remote::HttpSource::open(store, url, nullptr, tool_source_options()));
}

std::unique_ptr<StoreReader> RemoteTree::open_store(const std::string& relative) const {
    return StoreReader::open(remote::HttpSource::open(store, store->object(relative), nullptr, tool_source_options()));
}

void RemoteTree::read(const std::string& relative, uint64_t size,
                      const std::function<void(uint64_t, std::span<const uint8_t>)>& sink) const {
    const remote::HttpSourceOptions options = tool_source_options();
    const auto source = remote::HttpSource::open(store, store->object(relative), nullptr, options);
    remote::read_whole(*source, size, options.block_bytes, sink);
}

std::vector<uint8_t> RemoteTree::get(const std::string& relative, uint64_t size) const {
    std::vector<uint8_t> bytes(size);
    read(relative, size, [&](uint64_t at, std::span<const uint8_t> b) { std::copy(b.begin(), b.end(), bytes.begin() + at); });
    return bytes;
}

RemoteTree open_remote_tree(const std::string& url_text, const RemoteOptions& options) {
    RemoteTree t;
    t.store = std::make_shared<remote::ObjectStore>(must_parse(url_text), options.s3, options.retry);
    std::vector<uint8_t> bytes;
    try {
        bytes = remote::ManifestVersion::fetch(*t.store, t.version);
    } catch (const remote::RemoteError& e) {
        if (e.object_missing())  // (a missing bucket is said as such)
            throw Error(url_text + ": no packed tree here (no " + remote::kManifestName + "; " +
                        (url_text.rfind("s3://", 0) == 0 ? "'ptwmfs-tool pack SRC " + url_text + "'"
                                                         : "'ptwmfs-tool pack --manifest SRC DIR'") +
                        " writes one)");
        throw;
    }
    t.manifest = remote::Manifest::parse(bytes, t.version.where.text);
    return t;
}

void RemoteTree::require_unchanged() const {
    if (const auto now = version.change(*store))
        throw Error(store->root().text + ": the tree was packed again while it was read (" + version.where.text +
                    " is " + *now + "), so what was read may mix two trees: run again once the pack is done");
}

}  // namespace ptwm::tool
