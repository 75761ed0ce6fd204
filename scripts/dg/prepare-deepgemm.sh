#!/usr/bin/env bash
# Build a side-by-side copy of DeepGEMM (the CUDA original) in an ignored folder of the project, for same-run
# comparisons on the GPU machine. Needs local git mirrors of three repositories:
#   github:deepseek-ai/DeepGEMM  github:NVIDIA/cutlass  github:fmtlib/fmt
# each as MIRROR/owner+name/repo (a bare git directory); set MIRROR to the folder that holds the
# owner+name folders. Writes .dg/DeepGEMM (about 30 MB) and .dg/tools (these scripts); ignores /.dg/ through
# .git/info/exclude. Carry ".dg" in device calls.
set -euo pipefail
M=${MIRROR:?set MIRROR to the folder holding the fetched owner+name mirrors}
DEST=${1:-.dg}
rm -rf $DEST/DeepGEMM && mkdir -p $DEST/DeepGEMM/third-party/cutlass $DEST/DeepGEMM/third-party/fmt
git -C $M/deepseek-ai+DeepGEMM/repo archive HEAD | tar -x -C $DEST/DeepGEMM
# (git may report an "invalid object" for a large media file of cutlass outside include/: the mirror omits it; harmless)
git -C $M/NVIDIA+cutlass/repo archive f3fde58372d33e9a5650ba7b80fc48b3b49d40c8 include | tar -x -C $DEST/DeepGEMM/third-party/cutlass
git -C $M/fmtlib+fmt/repo archive 553ec11ec06fbe0beebfbb45f9dc3c9eabd83d28 include | tar -x -C $DEST/DeepGEMM/third-party/fmt
# The GPU machine gets the checkout and carried folders: take these tools along inside .dg/.
mkdir -p $DEST/tools && cp "$(dirname "$0")"/*.py "$(dirname "$0")"/build-deepgemm-on-device.sh $DEST/tools/
grep -qx '/.dg/' .git/info/exclude 2>/dev/null || echo '/.dg/' >> .git/info/exclude
du -sh $DEST
