#!/usr/bin/env bash
# Usage: check_gradcomm_info.sh GRADCOMM_INFO VERSION — gradcomm-info's options (issue 18:
# it used to ignore --help, --version and --json) and its plain "no GPU" wording (it used
# to print CUDA's "driver version is insufficient" on a machine with no driver at all).
set -uo pipefail
info=$1 version=$2
fail() { echo "FAIL: $*"; exit 1; }
has() { grep -qF -- "$2" <<< "$1" || fail "$3: no '$2' in: $1"; }

for h in --help -h; do
  out=$("$info" $h) || fail "$h exited $?"
  has "$out" "Usage: gradcomm-info [--json] [--version] [--help]" "$h"
done
for v in --version -V; do
  out=$("$info" $v) || fail "$v exited $?"
  [ "$out" = "gradcomm-info $version" ] || fail "$v printed '$out', not 'gradcomm-info $version'"
done
# A bad option or a stray argument: exit 2 and the usage on stderr, nothing on stdout.
for bad in --bogus "-x" "extra"; do
  out=$("$info" $bad 2> /dev/null); rc=$?
  [ $rc -eq 2 ] || fail "'$bad' exited $rc, not 2"
  [ -z "$out" ] || fail "'$bad' wrote to stdout: $out"
  has "$("$info" $bad 2>&1)" "Usage: gradcomm-info" "'$bad'"
done
# --json: one object with the facts of the text report, the same version.
json=$("$info" --json) || fail "--json exited $?"
python3 - "$version" "$json" <<'PY' || fail "--json: $json"
import json, sys
d = json.loads(sys.argv[2])
for key in ("gradcomm", "cuda_built", "cuda_runtime", "cuda_driver", "nccl", "gpus", "no_gpu_reason"):
    assert key in d, key
assert d["gradcomm"] == sys.argv[1], d["gradcomm"]
assert isinstance(d["gpus"], list)
assert (d["no_gpu_reason"] is None) == bool(d["gpus"]), d
PY
# Without a GPU the text says so in words, with the reason, and the JSON gives the same reason.
text=$("$info") || fail "gradcomm-info exited $?"
has "$text" "gradcomm $version" "the text report"
if python3 -c "import json,sys; sys.exit(0 if json.load(sys.stdin)['gpus'] == [] else 1)" <<< "$json"; then
  reason=$(python3 -c "import json,sys; print(json.load(sys.stdin)['no_gpu_reason'])" <<< "$json")
  has "$text" "GPUs: none, $reason" "no GPU"
  grep -q "^CUDA driver version is insufficient" <<< "$reason" && fail "the raw CUDA error instead of 'no GPU': $reason"
  built=$(python3 -c "import json,sys; print(json.load(sys.stdin)['cuda_built'])" <<< "$json")
  if [ "$built" = False ]; then
    has "$reason" "gradcomm was built without CUDA (GRADCOMM_CUDA=OFF)" "a host-only build"
  elif [ -z "$(command -v nvidia-smi)" ]; then
    has "$reason" "no NVIDIA driver is installed" "no driver"
  fi
fi
echo "gradcomm-info options: ok"
