// Mirroring a directory tree: directories are recreated, symlinks are copied
// as the links they are, and each regular file is handed to a callback that
// writes its counterpart. (pack also hands over the files behind links that
// lead out of the tree: see LinksOut.)
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "ptwm/base/file_io.hpp"

namespace ptwm::tool {

namespace fs = std::filesystem;

// Called with the source file and the destination path it would keep if
// copied unchanged; the callback writes whatever it wants in its place.
using FileAction = std::function<void(const fs::path& src, const fs::path& dst)>;

// What mirror_tree does with a link to a regular file outside the tree
// (links_to_a_file_outside): copy it (kept), or hand its target to the
// callback under the link's name (followed). `followed_to_stores` (unpack)
// also hands over the store a link out of the tree leads to
// (store_behind_link_outside), as if it lay in the link's place: the
// callback gets STORE and LINK.ptwm.
enum class LinksOut { kept, followed, followed_to_stores };

void mirror_tree(const fs::path& src, const fs::path& dst, const FileAction& on_file,
                 LinksOut links_out = LinksOut::kept);

// Whether `link`, below `root`, is a symbolic link that points outside
// `root` (by its own target, not the end of a chain) to a regular file: a Hugging Face snapshot's links into ../../blobs when the snapshot
// directory (what snapshot_download returns) is what is packed. Copied as a
// link it would dangle in the packed tree, so pack packs or copies its
// target in its place, and verify compares that with the link's target.
bool links_to_a_file_outside(const fs::path& root, const fs::path& link);

// The store `link`, below `root`, leads to outside `root`: its target is
// gone and TARGET.ptwm is a regular file. A snapshot directory of a packed
// Hugging Face cache links into ../../blobs, where each safetensors blob
// became ETAG.ptwm: unpacking the snapshot alone decodes those stores in
// the links' place, as pack packed the blobs in their place, instead of
// writing links that would dangle. Empty when there is no such store.
fs::path store_behind_link_outside(const fs::path& root, const fs::path& link);
// The same without the condition on where the target lies: the store
// TARGET.ptwm of a link whose target is gone, or empty.
fs::path store_behind_dangling_link(const fs::path& link);

// A directory output that appears whole or not at all. When `dst` does not
// exist yet, the tree is written into a hidden sibling (.NAME.tmp.XXXXXX)
// that commit() syncs (one syncfs(2) for all its files) and renames to
// `dst`; destroyed uncommitted (an error, an interrupt), it removes the
// sibling. Into an existing `dst` the tree is
// written in place, file by file, each atomically (a rename cannot replace
// a directory that holds files).
// The sibling is locked (flock) while the run lives: a run killed before it
// could remove its sibling leaves it unlocked, and the next StagedDirectory
// for the same `dst` removes it (remove_abandoned_temporaries).
class StagedDirectory {
public:
    explicit StagedDirectory(fs::path dst);
    ~StagedDirectory();
    StagedDirectory(const StagedDirectory&) = delete;
    StagedDirectory& operator=(const StagedDirectory&) = delete;

    // Where the tree is written.
    const fs::path& path() const { return staging_.empty() ? dst_ : staging_; }
    // How the files written into path() are to be synced: by commit(), all
    // at once, when they are staged; each by itself when written in place.
    Durability durability() const { return staging_.empty() ? Durability::kFsync : Durability::kByCaller; }
    void commit();

private:
    fs::path dst_, staging_;
    int staging_lock_ = -1;  // an open descriptor of staging_, flock'ed
};

// Throws Error when `dst` is `src` or lies inside it: mirroring would walk
// into its own output (and pack or unpack it again, down to PATH_MAX).
void require_outside(const fs::path& src, const fs::path& dst);

// Throws Error when `dst` names the file `src` itself (through another
// path or a link): its output would replace its own input.
void require_other_file(const fs::path& src, const fs::path& dst);

// Removes the hidden temporaries of `output` (its .NAME.tmp.XXXXXX siblings,
// files or staged directories) that no live run holds locked: each is what
// a run killed outright (SIGKILL, the OOM killer, a power cut) had written,
// up to a whole store or tree, hidden from ls and removed by nothing else;
// the mount would show a file's as a plain file, and unpack copy it. Says
// so on stderr. (A run of a release before these locks, writing the same
// output at that moment, would lose its temporary: two runs writing one
// output at once clobber each other anyway.)
void remove_abandoned_temporaries(const fs::path& output);

// Copy a regular file's bytes to `dst` atomically (temporary file + rename),
// keeping its permission bits and modification time.
void copy_file_atomic(const fs::path& src, const fs::path& dst, Durability durability = Durability::kFsync);

// Every regular file and every symlink below `root` (links are listed, never
// followed), sorted by path: what a packed tree or its originals hold.
std::vector<fs::path> files_and_links(const fs::path& root);

}  // namespace ptwm::tool
