#!/usr/bin/env bash
# Usage: check_without_nccl.sh LIBGRADCOMM GRADCOMM_INFO GRADCOMM_PERF CORE_TESTS
# A program that uses only the host transports must start and run on a machine
# without NCCL (issue 18: libgradcomm.so needed libnccl.so.2 at load time), and a
# request for NCCL there must fail with a message naming where it looked.
# NCCL is hidden by mounting an empty folder over its own in a private mount
# namespace (root, or a user namespace); where neither is allowed, by pointing
# GRADCOMM_NCCL_LIBRARY at a file that does not exist (weaker: says so).
set -euo pipefail
lib=$1 info=$2 perf=$3 core_tests=$4

# 1. No load-time dependency.
if readelf -d "$lib" | grep -q 'NEEDED.*libnccl'; then
  readelf -d "$lib" | grep NEEDED
  echo "libgradcomm.so needs libnccl at load time"; exit 1
fi

nccl=$("$info" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["nccl"]["path"] or "")')
if [ -z "$nccl" ]; then
  echo "NCCL is not loadable on this machine at all: the checks below run as they are"
  hide=(bash -c)
else
  dir=$(dirname "$(readlink -f "${nccl%% (*}")")
  hidden="mount -t tmpfs gradcomm-hides-nccl '$dir' &&"
  if unshare -m true 2>/dev/null; then
    hide=(unshare -m bash -c)
  elif unshare -rm true 2>/dev/null; then
    hide=(unshare -rm bash -c)
  else
    hide=(env GRADCOMM_NCCL_LIBRARY=/nonexistent/libnccl.so.2 bash -c)
    hidden=""
    echo "no mount namespace here: NCCL is hidden with GRADCOMM_NCCL_LIBRARY=/nonexistent instead"
  fi
  echo "hiding $dir (where $nccl is)"
fi
without_nccl() { "${hide[@]}" "${hidden:-} $*"; }

# 2. The environment report says NCCL is missing and why, and the host runs.
out=$(without_nccl "'$info'")
echo "$out"
grep -q "not loadable (the host and local transports work without it)" <<< "$out" ||
  { echo "gradcomm-info did not report NCCL missing"; exit 1; }
grep -q "Searched, in order" <<< "$out" || { echo "no list of places searched"; exit 1; }

out=$(without_nccl "'$perf' --local 2 -b 8 -e 64K -f 8 -n 2 -w 1")
grep -q "Out of bounds values : 0 OK" <<< "$out" || { echo "$out"; echo "host sweep failed without NCCL"; exit 1; }

# 3. Asking for NCCL fails with gcommNotSupported and the places searched.
code='
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.gcommGetStatusName.restype = ctypes.c_char_p
lib.gcommGetLastError.restype = ctypes.c_char_p
built, loaded = ctypes.c_int(), ctypes.c_int()
status = lib.gcommGetNcclVersion(ctypes.byref(built), ctypes.byref(loaded))
name, message = lib.gcommGetStatusName(status).decode(), lib.gcommGetLastError().decode()
print(name, message)
assert name == "gcommNotSupported" and "Searched, in order" in message and "GRADCOMM_NCCL_LIBRARY" in message
'
without_nccl "python3 -c '$code' '$lib'"
without_nccl "'$core_tests' --gtest_filter='NcclLibrary.*:NcclSearch.*'" > /dev/null
echo "without NCCL: ok"
