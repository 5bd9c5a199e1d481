// Mirroring a directory tree: directories are recreated, symlinks are copied
// as the links they are (never followed), and each regular file is handed
// to a callback that writes its counterpart.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace ptwm::tool {

namespace fs = std::filesystem;

// Called with the source file and the destination path it would keep if
// copied unchanged; the callback writes whatever it wants in its place.
using FileAction = std::function<void(const fs::path& src, const fs::path& dst)>;

void mirror_tree(const fs::path& src, const fs::path& dst, const FileAction& on_file);

// Throws Error when `dst` is `src` or lies inside it: mirroring would walk
// into its own output (and pack or unpack it again, down to PATH_MAX).
void require_outside(const fs::path& src, const fs::path& dst);

// Throws Error when `dst` names the file `src` itself (through another
// path or a link): its output would replace its own input.
void require_other_file(const fs::path& src, const fs::path& dst);

// Copy a regular file's bytes to `dst` atomically (temporary file + rename),
// keeping its permission bits.
void copy_file_atomic(const fs::path& src, const fs::path& dst);

// Every regular file and every symlink below `root` (links are listed, never
// followed), sorted by path: what a packed tree or its originals hold.
std::vector<fs::path> files_and_links(const fs::path& root);

}  // namespace ptwm::tool
