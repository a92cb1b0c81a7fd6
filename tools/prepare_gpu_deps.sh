#!/usr/bin/env bash
# Run HERE (the development machine) before a GPU session: copies what the GPU
# machine lacks into .deps/ (git-ignored), to be named in the device tool's
# `carry`: GoogleTest sources, Google Benchmark's headers and library, and the
# header-only nlohmann-json and CLI11 with their CMake packages.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .deps
mkdir -p .deps/benchmark/include .deps/benchmark/lib
cp -r /usr/src/googletest .deps/googletest
cp -r /usr/include/benchmark .deps/benchmark/include/
cp -L /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian .deps/benchmark/lib/libbenchmark.so.1debian
ln -s libbenchmark.so.1debian .deps/benchmark/lib/libbenchmark.so
for pkg in nlohmann_json:nlohmann CLI11:CLI; do
  name=${pkg%%:*} headers=${pkg##*:}
  mkdir -p ".deps/$name/share/cmake" ".deps/$name/include"
  cp -r "/usr/share/cmake/$name" ".deps/$name/share/cmake/"
  cp -r "/usr/include/$headers" ".deps/$name/include/"
done
du -sh .deps
