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
# 3. The installed programs start as installed, and after the prefix is moved
#    (RUNPATH $ORIGIN/../lib; they used to fail to find libgradcomm.so.0).
run_installed() {
  local prefix=$1
  env -u LD_LIBRARY_PATH "$prefix/bin/gradcomm-info" > "$work/info.out" ||
    { cat "$work/info.out"; echo "installed gradcomm-info did not run from $prefix"; exit 1; }
  grep -q "^gradcomm 0\." "$work/info.out"
  if [ -x "$prefix/bin/gradcomm-perf" ]; then
    env -u LD_LIBRARY_PATH "$prefix/bin/gradcomm-perf" --local 2 -b 8 -e 1K -f 4 -n 1 -w 1 > "$work/perf.out" ||
      { cat "$work/perf.out"; echo "installed gradcomm-perf did not run from $prefix"; exit 1; }
    grep -q "Out of bounds values : 0 OK" "$work/perf.out"
  fi
}
run_installed "$work/prefix"
mv "$work/prefix" "$work/moved-prefix"
run_installed "$work/moved-prefix"
echo "installed programs: ok"
echo "install check: ok"
