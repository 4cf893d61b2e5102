#!/usr/bin/env bash
# Add Helion's wheels to .whl/ for the GPU machine (run from the repo root, after
# ../shared/tools/gpu-wheels.sh has made the rest of .whl/). The GPU image has torch 2.11,
# triton 3.6 and Helion's other needs (numpy, psutil, rich, scikit-learn, typing-extensions);
# helion 1.2.0 is the newest that imports with torch 2.11 (1.5.1 does not), and filecheck is
# the one requirement the image lacks. Both are pure-Python wheels (about 1.4 MB together).
#   bash scripts/gpu/helion-wheels.sh
set -euo pipefail
dest=.whl
mkdir -p "$dest" .git/info
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$dest" helion==1.2.0 filecheck==1.0.6
du -sh "$dest"
