#!/usr/bin/env bash
# Usage: check_install.sh BUILD_DIR WORK_DIR CONSUMER_SOURCE EXAMPLE_C
set -euo pipefail
build=$1 work=$2 consumer=$3 example=$4
cmake=${CMAKE_COMMAND:-cmake}
cc=${C_COMPILER:-cc}
rm -rf "$work"
mkdir -p "$work"
"$cmake" --install "$build" --prefix "$work/prefix" >"$work/install.log"

lib=$(ls "$work"/prefix/lib*/libgradcomm.so.0)
test -f "$work/prefix/include/gradcomm/gradcomm.h"

# 1. find_package(gradcomm) from an out-of-tree project.
"$cmake" -S "$consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DGRADCOMM_EXAMPLE_SOURCE="$example" >"$work/consumer-configure.log"
"$cmake" --build "$work/consumer" >"$work/consumer-build.log"
"$work/consumer/consumer" | tee "$work/consumer.out"
grep -q "^gradcomm 0\." "$work/consumer.out"

# 2. pkg-config.
if command -v pkg-config >/dev/null; then
  pcdir=$(dirname "$(ls "$work"/prefix/lib*/pkgconfig/gradcomm.pc)")
  flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs gradcomm)
  # shellcheck disable=SC2086
  "$cc" -std=c99 -Wall -Wextra -Werror -pedantic "$example" $flags -Wl,-rpath,"$(dirname "$lib")" \
    -o "$work/pkgconfig-example"
  "$work/pkgconfig-example" >/dev/null
  echo "pkg-config: ok"
else
  echo "pkg-config not installed; skipped its check"
fi
echo "install check: ok"
