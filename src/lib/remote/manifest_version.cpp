#include "ptwm/remote/manifest_version.hpp"

#include "ptwm/remote/manifest.hpp"

namespace ptwm::remote {

std::vector<uint8_t> ManifestVersion::fetch(ObjectStore& store, ManifestVersion& version) {
    version.where = store.object(kManifestName);
    const HttpResponse resp = store.client().send_ok(store.request("GET", version.where));
    version.etag = resp.etag;
    version.last_modified = resp.last_modified;
    return {resp.body.begin(), resp.body.end()};
}

std::optional<std::string> ManifestVersion::change(ObjectStore& store) const {
    if (!known()) return std::nullopt;
    const HttpRequest head = store.request("HEAD", where);
    const HttpResponse resp = store.client().send(head);
    if (resp.status == 404) return "gone (a pack is replacing the tree)";
    if (resp.status >= 300) throw store.client().failure(head, resp);
    if ((!etag.empty() && resp.etag != etag) || (!last_modified.empty() && resp.last_modified != last_modified))
        return "another version (" + (resp.etag.empty() ? resp.last_modified : resp.etag) + ")";
    return std::nullopt;
}

}  // namespace ptwm::remote
