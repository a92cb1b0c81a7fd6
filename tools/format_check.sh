#!/usr/bin/env bash
# Checks that every C, C++ and CUDA file git tracks is formatted as .clang-format
# says (clang-format 14, the distribution's; tools/install_deps.sh installs it).
# Lists the files that are not and how to fix them. Usage: tools/format_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp' '*.cu' '*.cuh')
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "format_check: ${#bad[@]} of ${#files[@]} files are not clang-formatted:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "fix: clang-format -i ${bad[*]}" >&2
  exit 1
fi
echo "format_check: ${#files[@]} files formatted ($(clang-format --version | grep -oE '[0-9]+\.[0-9.]+' | head -1))"
