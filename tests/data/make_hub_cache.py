#!/usr/bin/python3
"""Writes a Hugging Face hub cache for tests, shaped as huggingface_hub
writes it: blobs named by hash, a snapshot of relative links to them (one a
level deeper), a ref, plus the links a packer must keep as they are (a link
to a directory, an absolute link, a dangling link).

    make_hub_cache.py HUB_DIR
"""
import os
import sys

import numpy as np

from make_model import layer_tensors, write_safetensors

REPO = "models--org--name"
REVISION = "0123456789abcdef0123456789abcdef01234567"
WEIGHTS_BLOB = "1" * 64
CONFIG_BLOB = "2" * 40


def make_hub_cache(hub):
    """Returns {path relative to hub: link target} of every link written."""
    repo = os.path.join(hub, REPO)
    blobs = os.path.join(repo, "blobs")
    snapshot = os.path.join(repo, "snapshots", REVISION)
    os.makedirs(blobs)
    os.makedirs(os.path.join(snapshot, "1_Pooling"))
    os.makedirs(os.path.join(repo, "refs"))
    write_safetensors(os.path.join(blobs, WEIGHTS_BLOB), layer_tensors(np.random.default_rng(11), "l", 64, 1),
                      {"format": "pt"})
    with open(os.path.join(blobs, CONFIG_BLOB), "w") as f:
        f.write('{"hidden_size": 64}\n')
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(REVISION)
    links = {
        # The target of the first does not exist in a packed tree (the blob
        # became WEIGHTS_BLOB.ptwm); those of the others do.
        f"snapshots/{REVISION}/model.safetensors": "../../blobs/" + WEIGHTS_BLOB,
        f"snapshots/{REVISION}/config.json": "../../blobs/" + CONFIG_BLOB,
        f"snapshots/{REVISION}/1_Pooling/config.json": "../../../blobs/" + CONFIG_BLOB,
        "latest": f"snapshots/{REVISION}",
        "absolute.json": os.path.abspath(os.path.join(blobs, CONFIG_BLOB)),
        "dangling": "no/such/file",
    }
    for path, target in links.items():
        os.symlink(target, os.path.join(repo, path))
    return {f"{REPO}/{path}": target for path, target in links.items()}


if __name__ == "__main__":
    make_hub_cache(sys.argv[1])
