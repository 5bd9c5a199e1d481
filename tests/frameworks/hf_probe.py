"""What a user's program does with a Hugging Face cache, run in a fresh
process so that HF_HOME / HF_HUB_CACHE / HF_HUB_OFFLINE (read once, when
huggingface_hub is imported) are the caller's:

  - transformers: AutoTokenizer and AutoModel.from_pretrained(REPO_ID), timed,
    then the embeddings of a few sentences (mean pooling, as
    sentence-transformers does for this model);
  - safetensors: safe_open(framework="np") and (framework="pt") read every
    tensor, and safetensors.torch.load_file loads the file;
  - huggingface_hub: hf_hub_download resolves the file in the cache, and
    scan_cache_dir() describes the cache.

    python hf_probe.py OUT_DIR [REPO_ID]

Writes OUT_DIR/embeddings.safetensors (the embeddings and the last hidden
state, to compare with torch.equal) and OUT_DIR/report.json (digests of
every tensor read, the scan, the load time). One torch thread, so two runs
compute in the same order and can be compared bit for bit.
"""
import hashlib
import json
import os
import sys
import time

SENTENCES = [
    "ptwmfs serves compressed weights back byte for byte.",
    "The quick brown fox jumps over the lazy dog.",
    "A read-only mount needs the hub client offline.",
]
REPO_ID = "sentence-transformers/all-MiniLM-L6-v2"


def tensor_digest(t):
    """sha256 of a tensor's bytes (torch or numpy)."""
    if hasattr(t, "detach"):
        import torch
        t = t.detach().contiguous()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        t = t.numpy()
    return hashlib.sha256(t.tobytes()).hexdigest()


def scan_summary(info):
    """scan_cache_dir()'s answer as plain data, paths relative to the cache
    so that two caches at different places compare equal."""
    root = None
    repos = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        root = os.path.dirname(str(repo.repo_path))
        revisions = []
        for rev in sorted(repo.revisions, key=lambda r: r.commit_hash):
            files = sorted((f.file_name, os.path.relpath(str(f.file_path), root), os.path.relpath(str(f.blob_path), root),
                            f.size_on_disk) for f in rev.files)
            revisions.append({"commit_hash": rev.commit_hash, "refs": sorted(rev.refs), "nb_files": rev.nb_files,
                              "size_on_disk": rev.size_on_disk, "files": files})
        repos.append({"repo_id": repo.repo_id, "repo_type": repo.repo_type, "size_on_disk": repo.size_on_disk,
                      "nb_files": repo.nb_files, "refs": sorted(repo.refs), "revisions": revisions})
    return {"size_on_disk": info.size_on_disk, "repos": repos, "warnings": [str(w) for w in info.warnings]}


def main():
    out = sys.argv[1]
    repo_id = sys.argv[2] if len(sys.argv) > 2 else REPO_ID
    os.makedirs(out, exist_ok=True)
    import torch
    torch.set_num_threads(1)
    import huggingface_hub
    import safetensors
    import safetensors.torch
    import transformers
    from huggingface_hub import constants

    report = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                           "safetensors": safetensors.__version__, "huggingface_hub": huggingface_hub.__version__},
              "hub_cache": constants.HF_HUB_CACHE, "offline": constants.HF_HUB_OFFLINE}

    started = time.perf_counter()
    tokenizer = transformers.AutoTokenizer.from_pretrained(repo_id)
    model = transformers.AutoModel.from_pretrained(repo_id)
    model.eval()
    report["load_seconds"] = time.perf_counter() - started
    batch = tokenizer(SENTENCES, padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    embeddings = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9), dim=1)
    safetensors.torch.save_file({"embeddings": embeddings.contiguous(), "last_hidden_state": hidden.contiguous()},
                                os.path.join(out, "embeddings.safetensors"))
    report["embedding_shape"] = list(embeddings.shape)
    report["cosine_0_1"] = float(embeddings[0] @ embeddings[1])

    path = huggingface_hub.hf_hub_download(repo_id, "model.safetensors")
    report["model_file"] = os.path.relpath(path, constants.HF_HUB_CACHE)
    report["model_blob"] = os.path.relpath(os.path.realpath(path), os.path.realpath(constants.HF_HUB_CACHE))
    for framework in ["np", "pt"]:
        with safetensors.safe_open(path, framework=framework) as f:
            report[f"safe_open_{framework}"] = {name: tensor_digest(f.get_tensor(name)) for name in f.keys()}
            report["metadata"] = f.metadata()
    report["load_file"] = {name: tensor_digest(t) for name, t in safetensors.torch.load_file(path).items()}
    report["scan"] = scan_summary(huggingface_hub.scan_cache_dir())
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
