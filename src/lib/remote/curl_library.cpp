#include "remote/curl_library.hpp"

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "ptwm/base/error.hpp"

namespace ptwm::remote {
namespace {

CurlLibrary load() {
    constexpr const char* kName = "libcurl.so.4";
    // Never unloaded: handles and their connections live until exit.
    void* lib = dlopen(kName, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr)
        throw Error(std::string("s3:// and https:// stores need libcurl (") + kName + "), which cannot be loaded: " + dlerror());
    auto bind = [&](auto& fn, const char* symbol) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
        if (fn == nullptr)
            throw Error(std::string(kName) + " has no " + symbol + ": s3:// and https:// stores need libcurl 7.83 or later");
    };
    CurlLibrary c{};
    decltype(&curl_global_init) global_init = nullptr;
    bind(global_init, "curl_global_init");
    bind(c.easy_init, "curl_easy_init");
    bind(c.easy_cleanup, "curl_easy_cleanup");
    bind(c.easy_reset, "curl_easy_reset");
    bind(c.easy_setopt, "curl_easy_setopt");
    bind(c.easy_getinfo, "curl_easy_getinfo");
    bind(c.easy_perform, "curl_easy_perform");
    bind(c.easy_strerror, "curl_easy_strerror");
    bind(c.easy_header, "curl_easy_header");
    bind(c.slist_append, "curl_slist_append");
    bind(c.slist_free_all, "curl_slist_free_all");
    if (global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw Error("libcurl: curl_global_init failed");
    return c;
}

}  // namespace

const CurlLibrary& curl() {
    // A throw leaves it uninitialised: the next call tries again.
    static const CurlLibrary library = load();
    return library;
}

}  // namespace ptwm::remote
