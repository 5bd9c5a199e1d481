// Which version of a packed tree's manifest a reader started from, and
// whether the server still holds it.
//
// Pack writes the manifest last and deletes it before it replaces any
// object (uploader.hpp), and every range GET of an object asks for the ETag
// its HEAD found (If-Match). So every object whose HEAD came before a HEAD
// of the manifest that still finds this version belongs to the tree read.
// An object first opened after the tree was packed again would otherwise
// be read from the new tree beside the old tree's objects (shard 1 of one
// checkpoint, shard 2 of the next), with no error. The mount asks after
// each object's first HEAD; unpack and verify once, after the last.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ptwm/remote/http_client.hpp"
#include "ptwm/remote/object_store.hpp"

namespace ptwm::remote {

struct ManifestVersion {
    RemoteUrl where;
    std::string etag, last_modified;

    // false where the server sends neither header: nothing to compare.
    bool known() const { return !etag.empty() || !last_modified.empty(); }

    // GETs the manifest of the tree at `store`'s root: its bytes, and this
    // version from the answer's headers. RemoteError as ObjectStore::get.
    static std::vector<uint8_t> fetch(ObjectStore& store, ManifestVersion& version);

    // nullopt while the server holds this version (or cannot tell, known()
    // false); otherwise what the manifest is now, in words: "gone (a pack is
    // replacing the tree)" or "another version (ETAG)". RemoteError when the
    // HEAD fails (transient() for a server that cannot be reached).
    std::optional<std::string> change(ObjectStore& store) const;
};

}  // namespace ptwm::remote
