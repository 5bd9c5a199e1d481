#include "ptwm/remote/uploader.hpp"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <limits>
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
    std::string id_query() const { return "uploadId=" + escape_key(upload_id); }
};

// One request with a body: part `part` of upload `upload`, or its whole file.
struct Job {
    size_t upload;
    size_t part;
};

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

void abort_upload(ObjectStore& store, const Upload& u) {
    try {
        // No partial object, no stray parts (after an interrupt too).
        HttpRequest r = with_query(store.request("DELETE", u.item->object), u.id_query());
        r.runs_when_cancelled = true;
        store.client().send(r);
    } catch (...) {
    }
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
    try {
        // The multipart uploads are created first, then every part and
        // small file goes up from one queue, `parallel` at a time, then
        // the uploads are completed.
        parallel_for(multipart.size(), parallel, [&](size_t i) { create(store, uploads[multipart[i]]); });
        parallel_for(jobs.size(), parallel, [&](size_t i) { send_job(store, uploads[jobs[i].upload], jobs[i].part, opt); });
        parallel_for(multipart.size(), parallel, [&](size_t i) { complete(store, uploads[multipart[i]]); });
    } catch (...) {
        const std::exception_ptr error = std::current_exception();
        try {
            parallel_for(multipart.size(), parallel, [&](size_t i) {
                const Upload& u = uploads[multipart[i]];
                if (!u.upload_id.empty() && !u.completed) abort_upload(store, u);
            });
        } catch (...) {
        }
        std::rethrow_exception(error);
    }
}

}  // namespace ptwm::remote
