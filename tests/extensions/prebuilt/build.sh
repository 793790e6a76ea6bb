#!/bin/sh
# Rebuilds ember_stable_v1_demo.so from ember_stable_v1_demo.cpp against ember's stable
# headers for plain x86-64 (no -march=native), with EMBER_TARGET_VERSION=1 (set in the source).
# The checked-in binary is the compatibility proof: rebuild only if version 1 itself changed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
include="$here/../../../ember/include"
${CXX:-g++} -std=c++17 -O2 -march=x86-64 -mtune=generic -fPIC -shared -fvisibility=hidden \
  -I"$include" "$here/ember_stable_v1_demo.cpp" -o "$here/ember_stable_v1_demo.so"
strip --strip-unneeded "$here/ember_stable_v1_demo.so"
ls -l "$here/ember_stable_v1_demo.so"
