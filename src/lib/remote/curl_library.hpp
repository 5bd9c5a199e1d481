// libcurl, loaded when the first remote request needs it. Linked in, its
// 35 shared libraries (TLS, HTTP/2, GSSAPI, LDAP, ...) were mapped and
// relocated at every start of ptwmfs-tool and ptwmfs, some 5 ms, ten
// times zstd's whole start-up, for the local packs and mounts that never
// open a connection. The headers are libcurl's own; only the calls go
// through this table.
#pragma once

#include <curl/curl.h>

namespace ptwm::remote {

struct CurlLibrary {
    decltype(&curl_easy_init) easy_init;
    decltype(&curl_easy_cleanup) easy_cleanup;
    decltype(&curl_easy_reset) easy_reset;
    decltype(&curl_easy_setopt) easy_setopt;
    decltype(&curl_easy_getinfo) easy_getinfo;
    decltype(&curl_easy_perform) easy_perform;
    decltype(&curl_easy_strerror) easy_strerror;
    decltype(&curl_easy_header) easy_header;
    decltype(&curl_slist_append) slist_append;
    decltype(&curl_slist_free_all) slist_free_all;
};

// Loads libcurl.so.4 and runs curl_global_init once, on the first call
// (thread-safe). Throws Error, saying that s3:// and https:// stores need
// libcurl, when it is missing or lacks a function (libcurl older than 7.83).
const CurlLibrary& curl();

}  // namespace ptwm::remote
