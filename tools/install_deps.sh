#!/usr/bin/env bash
# Installs what gradcomm's build and tests need and the machine lacks (Debian
# packages). Does nothing when everything is present; nvcc and NCCL come with the
# CUDA toolkit and are only checked (configure names what is missing).
set -euo pipefail

need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v nm >/dev/null || need+=(binutils)
command -v python3 >/dev/null || need+=(python3)
[ -f /usr/lib/x86_64-linux-gnu/cmake/GTest/GTestConfig.cmake ] || [ -d /usr/src/googletest ] || need+=(libgtest-dev)
[ -f /usr/lib/x86_64-linux-gnu/cmake/benchmark/benchmarkConfig.cmake ] || need+=(libbenchmark-dev)
[ -f /usr/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake ] || need+=(nlohmann-json3-dev)
[ -f /usr/share/cmake/CLI11/CLI11Config.cmake ] || need+=(libcli11-dev)
[ -f /usr/include/xxhash.h ] || need+=(libxxhash-dev)  # the divergence check's host hash (header-only)
command -v mpirun >/dev/null || need+=(openmpi-bin)  # the launcher tests (mpirun without MASTER_ADDR)
[ -f /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] || need+=(libopenmpi-dev)  # the MPI bootstrap plugin
command -v slurmd >/dev/null || need+=(slurm-wlm)  # launchers.real_slurm (a private single-node cluster)
command -v tc >/dev/null || need+=(iproute2)        # tools/netlab: network namespaces and tc (its tests)
command -v pgrep >/dev/null || need+=(procps)       # tools/netlab's tests look for leftover processes
command -v clang-format >/dev/null || need+=(clang-format)  # tools/format_check.sh
command -v ccache >/dev/null || need+=(ccache)              # later builds on the machine reuse objects

if [ ${#need[@]} -gt 0 ]; then
  echo "install_deps: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}"
fi

if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install_deps: nvcc not found: install the CUDA toolkit (gradcomm builds CUDA code even without a GPU)" >&2
  exit 1
fi
