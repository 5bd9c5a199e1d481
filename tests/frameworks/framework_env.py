"""Where the framework tests get their PyPI packages: the virtual
environment tools/install-deps.sh makes (SOURCE_ROOT/.venv, or $PTWMFS_VENV),
with tests/requirements.txt installed over Debian's torch and numpy.

meson starts the tests with Debian's python3; `use_venv()` re-executes the
test under the environment's python. When install-deps found PyPI out of
reach it left .venv/.pypi-unreachable: the test then exits 77, which meson
reports as skipped, printing why. A missing environment is an error, not a
skip: it means install-deps was not run.
"""
import os
import sys

SOURCE_ROOT = os.environ.get("PTWMFS_SOURCE_ROOT",
                             os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
VENV = os.environ.get("PTWMFS_VENV") or os.path.join(SOURCE_ROOT, ".venv")
PYTHON = os.path.join(VENV, "bin", "python")
SKIPPED = 77  # meson's exit status for a skipped test


def pypi_unreachable():
    """install-deps' note when PyPI could not be reached, else None."""
    try:
        with open(os.path.join(VENV, ".pypi-unreachable")) as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def use_venv():
    """Run the calling script under the environment's python (re-exec), or
    exit: 77 (skipped) when PyPI could not be reached, 1 when there is no
    environment."""
    reason = pypi_unreachable()
    if reason:
        print(f"SKIPPED: {reason}. Rerun tools/install-deps.sh with PyPI reachable.", flush=True)
        sys.exit(SKIPPED)
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.access(PYTHON, os.X_OK):
        sys.exit(f"no virtual environment at {VENV}: run `bash tools/install-deps.sh` (it installs "
                 f"tests/requirements.txt there)")
    os.execv(PYTHON, [PYTHON, *sys.argv])
