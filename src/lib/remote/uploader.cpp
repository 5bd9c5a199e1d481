#include "ptwm/remote/uploader.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <set>
#include <vector>

#include "ptwm/base/cancellation.hpp"
#include "ptwm/base/error.hpp"
#include "ptwm/base/file_io.hpp"
#include "ptwm/base/parallel.hpp"

namespace ptwm::remote {
namespace {

// Sub-resources as "?name=value": libcurl's SigV4 signs the query as written,
// and S3's canonical form of a bare "?uploads" is "uploads=".
HttpRequest with_query(HttpRequest r, const std::string& query) {
    r.url += "?" + query;
    return r;
}

// A key or marker as a query value: every byte but the unreserved ones
// percent-encoded, '/' too (SigV4's canonical form).
std::string query_value(const std::string& text) {
    std::string out;
    for (const char c : escape_key(text)) out += c == '/' ? std::string("%2F") : std::string(1, c);
    return out;
}

constexpr size_t kWhole = std::numeric_limits<size_t>::max();

// One object on its way up.
struct Upload {
    const UploadItem* item = nullptr;
    uint64_t size = 0;
    uint64_t part_bytes = 0;  // 0: one PUT
    size_t parts = 0;
    std::string upload_id;  // once created: it is aborted unless completed
    bool completed = false;
    std::vector<std::string> etags;
    std::string id_query() const { return "uploadId=" + query_value(upload_id); }
};

// One request with a body: part `part` of upload `upload`, or its whole file.
struct Job {
    size_t upload;
    size_t part;
};

std::string xml_text(std::string s) {
    static const std::pair<const char*, const char*> kEntities[] = {
        {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&#39;", "'"}, {"&#34;", "\""}, {"&amp;", "&"}};
    for (const auto& [entity, c] : kEntities)
        for (size_t at = 0; (at = s.find(entity, at)) != std::string::npos; at += 1) s.replace(at, std::strlen(entity), c);
    return s;
}

void warn(const UploadOptions& opt, const std::string& message) {
    if (opt.on_warning) {
        opt.on_warning(message);
    } else {
        std::fprintf(stderr, "ptwmfs: warning: %s\n", message.c_str());
    }
}

void abort_upload(ObjectStore& store, const RemoteUrl& object, const std::string& upload_id) {
    try {
        // No partial object, no stray parts (after an interrupt too).
        HttpRequest r = with_query(store.request("DELETE", object), "uploadId=" + query_value(upload_id));
        r.runs_when_cancelled = true;
        store.client().send(r);
    } catch (...) {
    }
}

// Uploads the server made whose answer never came back: a create answered
// and then its connection reset, so that the create went again (libcurl
// itself sends it again when a kept-alive connection dies so, unseen
// here) and made a second one; or a create that failed after the server
// had made its upload. Nothing would ever complete or abort them. Once
// every upload this run knows of is completed or aborted, an upload still
// in progress for one of its keys is such (or was left by an earlier run
// killed outright): aborted. One listing (ListMultipartUploads, under the
// keys' common prefix), in pages of 1,000. Throws when it is refused.
void abort_leftover_uploads(ObjectStore& store, const std::vector<const RemoteUrl*>& objects) {
    std::set<std::string> keys;
    std::string prefix = objects.front()->path;
    for (const RemoteUrl* o : objects) {
        keys.insert(o->path);
        prefix.resize(std::mismatch(prefix.begin(), prefix.end(), o->path.begin(), o->path.end()).first - prefix.begin());
    }
    RemoteUrl bucket = *objects.front();
    bucket.path.clear();
    std::string key_marker, id_marker;
    for (int page = 0; page < 1000; ++page) {
        // The query's names in order, as SigV4 signs them.
        std::string query;
        if (!key_marker.empty()) query += "key-marker=" + query_value(key_marker) + "&";
        query += "prefix=" + query_value(prefix) + "&";
        if (!id_marker.empty()) query += "upload-id-marker=" + query_value(id_marker) + "&";
        query += "uploads=";
        HttpRequest r = with_query(store.request("GET", bucket), query);
        r.what = "s3://" + bucket.bucket + "/" + prefix + ": listing the multipart uploads in progress";
        r.runs_when_cancelled = true;  // clean-up
        const std::string xml = store.client().send_ok(r).body;
        for (size_t at = 0; (at = xml.find("<Upload>", at)) != std::string::npos;) {
            const size_t end = xml.find("</Upload>", at);
            if (end == std::string::npos) break;
            const std::string upload = xml.substr(at, end - at);
            at = end;
            const std::string key = xml_text(xml_field(upload, "Key"));
            const std::string id = xml_text(xml_field(upload, "UploadId"));
            if (keys.count(key) && !id.empty()) {
                RemoteUrl object = bucket;
                object.path = key;
                object.text = "s3://" + bucket.bucket + "/" + key;
                abort_upload(store, object, id);
            }
        }
        key_marker = xml_text(xml_field(xml, "NextKeyMarker"));
        id_marker = xml_text(xml_field(xml, "NextUploadIdMarker"));
        if (xml_field(xml, "IsTruncated") != "true" || (key_marker.empty() && id_marker.empty())) return;
    }
}

void create(ObjectStore& store, Upload& u) {
    const RemoteUrl& object = u.item->object;
    throw_if_cancelled();  // none is started once interrupted
    HttpRequest r = with_query(store.request("POST", object), "uploads=");
    // Its answer is read even when an interrupt comes while it is on its
    // way (the transfer is not cut, the answer not dropped): the upload the
    // server made is then known, and aborted rather than left open.
    r.runs_when_cancelled = true;
    const std::string created = store.client().send_ok(r).body;
    const std::string id = xml_field(created, "UploadId");
    if (id.empty()) throw Error(object.text + ": the server started no multipart upload: " + created);
    u.upload_id = id;  // from here on, aborted unless completed
    throw_if_cancelled();
}

void send_job(ObjectStore& store, Upload& u, size_t part, const UploadOptions& opt) {
    const RemoteUrl& object = u.item->object;
    const File file = File::open_read(u.item->local_path);
    if (part == kWhole) {
        std::vector<uint8_t> bytes(u.size);
        file.read_exact(0, bytes);
        store.put(object, bytes);
        if (opt.on_sent) opt.on_sent(bytes.size());
        return;
    }
    const uint64_t at = part * u.part_bytes;
    std::vector<uint8_t> bytes(std::min(u.part_bytes, u.size - at));
    file.read_exact(at, bytes);
    HttpRequest r = with_query(store.request("PUT", object), "partNumber=" + std::to_string(part + 1) + "&" + u.id_query());
    r.body = bytes;
    const HttpResponse resp = store.client().send_ok(r);
    if (resp.etag.empty()) throw Error(object.text + ": part " + std::to_string(part + 1) + " got no ETag");
    u.etags[part] = resp.etag;
    if (opt.on_sent) opt.on_sent(bytes.size());
}

void complete(ObjectStore& store, Upload& u) {
    const RemoteUrl& object = u.item->object;
    std::string xml = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < u.parts; ++i)
        xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + u.etags[i] + "</ETag></Part>";
    xml += "</CompleteMultipartUpload>";
    HttpRequest done = with_query(store.request("POST", object), u.id_query());
    done.body = {reinterpret_cast<const uint8_t*>(xml.data()), xml.size()};
    const HttpResponse resp = store.client().send_ok(done);
    // S3 may answer 200 and still report an error in the body.
    if (resp.body.find("<Error>") != std::string::npos)
        throw Error(object.text + ": completing the multipart upload failed: " + xml_field(resp.body, "Code") + " " +
                    xml_field(resp.body, "Message"));
    u.completed = true;
}

}  // namespace

uint64_t multipart_part_bytes(uint64_t size, uint64_t wanted) {
    if (wanted == 0) throw Error("a part size of 0 bytes");
    const auto parts = [size](uint64_t part) { return size / part + (size % part != 0); };
    if (parts(wanted) <= kMaxUploadParts) return wanted;
    constexpr uint64_t kMiB = 1ull << 20;
    const uint64_t least = parts(kMaxUploadParts);  // bytes a part, at kMaxUploadParts parts
    const uint64_t part = (least / kMiB + (least % kMiB != 0)) * kMiB;
    if (part > kMaxPartBytes)
        throw Error(std::to_string(size) + " bytes is more than S3's multipart upload holds (" +
                    std::to_string(kMaxUploadParts) + " parts of at most 5 GiB)");
    return part;
}

void upload_files(ObjectStore& store, const std::vector<UploadItem>& items, const UploadOptions& opt) {
    std::vector<Upload> uploads;
    std::vector<size_t> multipart;  // indices into uploads
    std::vector<Job> jobs;          // every file's parts in order: a large file alone takes every slot
    for (const UploadItem& item : items) {
        if (!item.object.is_s3()) throw Error(item.object.text + ": uploads go to s3:// URLs only");
        Upload u;
        u.item = &item;
        u.size = std::filesystem::file_size(item.local_path);
        if (u.size <= opt.part_bytes) {
            jobs.push_back({uploads.size(), kWhole});
        } else {
            try {
                u.part_bytes = multipart_part_bytes(u.size, opt.part_bytes);
            } catch (const Error& e) {
                throw Error(item.object.text + ": " + e.what());
            }
            u.parts = static_cast<size_t>((u.size + u.part_bytes - 1) / u.part_bytes);
            u.etags.resize(u.parts);
            multipart.push_back(uploads.size());
            for (size_t p = 0; p < u.parts; ++p) jobs.push_back({uploads.size(), p});
        }
        uploads.push_back(std::move(u));
    }
    const unsigned parallel = std::max(1u, opt.parallel);
    const uint64_t retries_before = store.client().stats().retries.load();
    std::atomic<bool> create_failed{false};
    // Last, however the upload ended (the error it ended with, if any, is
    // the one thrown): the leftover uploads of these keys are aborted. A
    // listing refused (no s3:ListBucketMultipartUploads) is said when a
    // create failed or a request was retried, the signs of a lost answer.
    const auto sweep = [&] {
        if (multipart.empty()) return;
        std::vector<const RemoteUrl*> objects;
        for (const size_t i : multipart) objects.push_back(&uploads[i].item->object);
        try {
            abort_leftover_uploads(store, objects);
        } catch (const std::exception& e) {
            if (create_failed || store.client().stats().retries.load() != retries_before)
                warn(opt, std::string(e.what()) +
                              ": a multipart upload whose answer was lost may be left open (the listing needs "
                              "s3:ListBucketMultipartUploads; a lifecycle rule that aborts incomplete multipart "
                              "uploads removes such)");
        }
    };
    try {
        // The multipart uploads are created first, then every part and
        // small file goes up from one queue, `parallel` at a time, then
        // the uploads are completed.
        parallel_for(multipart.size(), parallel, [&](size_t i) {
            try {
                create(store, uploads[multipart[i]]);
            } catch (...) {
                create_failed = true;
                throw;
            }
        });
        parallel_for(jobs.size(), parallel, [&](size_t i) { send_job(store, uploads[jobs[i].upload], jobs[i].part, opt); });
        parallel_for(multipart.size(), parallel, [&](size_t i) { complete(store, uploads[multipart[i]]); });
    } catch (...) {
        const std::exception_ptr error = std::current_exception();
        try {
            parallel_for(multipart.size(), parallel, [&](size_t i) {
                const Upload& u = uploads[multipart[i]];
                if (!u.upload_id.empty() && !u.completed) abort_upload(store, u.item->object, u.upload_id);
            });
        } catch (...) {
        }
        sweep();
        std::rethrow_exception(error);
    }
    sweep();
}

}  // namespace ptwm::remote
