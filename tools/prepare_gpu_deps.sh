#!/usr/bin/env bash
# Run HERE (the development machine) before a GPU session: copies what the GPU
# machine lacks into .deps/ (git-ignored), to be named in the device tool's
# `carry`: GoogleTest sources and Google Benchmark's headers and library.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .deps
mkdir -p .deps/benchmark/include .deps/benchmark/lib
cp -r /usr/src/googletest .deps/googletest
cp -r /usr/include/benchmark .deps/benchmark/include/
cp -L /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian .deps/benchmark/lib/libbenchmark.so.1debian
ln -s libbenchmark.so.1debian .deps/benchmark/lib/libbenchmark.so
du -sh .deps
