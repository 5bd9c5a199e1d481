#include "ptwm/remote/uploader.hpp"

#include <mutex>
#include <vector>

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

}  // namespace

void upload_file(ObjectStore& store, const RemoteUrl& object, const std::string& local_path, const UploadOptions& opt) {
    if (!object.is_s3()) throw Error(object.text + ": uploads go to s3:// URLs only");
    const File file = File::open_read(local_path);
    const uint64_t size = file.size();
    HttpClient& client = store.client();
    if (size <= opt.part_bytes) {
        std::vector<uint8_t> bytes(size);
        file.read_exact(0, bytes);
        store.put(object, bytes);
        if (opt.on_sent) opt.on_sent(size);
        return;
    }
    const HttpRequest base = store.request("POST", object);
    const std::string created = client.send_ok(with_query(base, "uploads=")).body;
    const std::string upload_id = xml_field(created, "UploadId");
    if (upload_id.empty()) throw Error(object.text + ": the server started no multipart upload: " + created);
    const std::string id_query = "uploadId=" + escape_key(upload_id);
    const size_t parts = static_cast<size_t>((size + opt.part_bytes - 1) / opt.part_bytes);
    std::vector<std::string> etags(parts);
    try {
        parallel_for(parts, opt.parallel_parts, [&](size_t i) {
            const uint64_t at = i * opt.part_bytes;
            std::vector<uint8_t> bytes(std::min(opt.part_bytes, size - at));
            file.read_exact(at, bytes);
            HttpRequest r = with_query(store.request("PUT", object), "partNumber=" + std::to_string(i + 1) + "&" + id_query);
            r.body = bytes;
            const HttpResponse resp = client.send_ok(r);
            if (resp.etag.empty()) throw Error(object.text + ": part " + std::to_string(i + 1) + " got no ETag");
            etags[i] = resp.etag;
            if (opt.on_sent) opt.on_sent(bytes.size());
        });
        std::string xml = "<CompleteMultipartUpload>";
        for (size_t i = 0; i < parts; ++i)
            xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + etags[i] + "</ETag></Part>";
        xml += "</CompleteMultipartUpload>";
        HttpRequest done = with_query(base, id_query);
        done.body = {reinterpret_cast<const uint8_t*>(xml.data()), xml.size()};
        const HttpResponse resp = client.send_ok(done);
        // S3 may answer 200 and still report an error in the body.
        if (resp.body.find("<Error>") != std::string::npos)
            throw Error(object.text + ": completing the multipart upload failed: " + xml_field(resp.body, "Code") + " " +
                        xml_field(resp.body, "Message"));
    } catch (...) {
        try {
            // Abort: no partial object, no stray parts (after an interrupt too).
            HttpRequest abort = with_query(store.request("DELETE", object), id_query);
            abort.runs_when_cancelled = true;
            client.send(abort);
        } catch (...) {
        }
        throw;
    }
}

}  // namespace ptwm::remote
