#!/bin/bash
# Two `cargo xtask test` runs at once from two clones of this checkout's
# commit, sharing the kernel cache (~/.cache/tierkit or $TIERKIT_CACHE):
# both must pass (Documentation/dev-tools/xtask.md, "Two runs at once").
#
#   scripts/two-runs.sh                       # cargo xtask test --topology numa --no-host-tests
#   scripts/two-runs.sh cargo xtask test ...  # another command, run in both clones
#
# Each clone is built first, one after the other (`cargo xtask build`), so
# that the two runs then start together and their guests overlap. The
# clones go in a temporary directory that is removed at the end unless
# KEEP=1; their logs are copied next to this checkout's run output, in
# target/tierkit/two-runs/{a,b}.log. Exit status 0 only if both runs
# passed.
set -euo pipefail

src=$(git rev-parse --show-toplevel)
rev=$(git -C "$src" rev-parse HEAD)
if [ $# -gt 0 ]; then
    cmd=("$@")
else
    cmd=(cargo xtask test --topology numa --no-host-tests)
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tierkit-two-runs.XXXXXX")
out="$src/target/tierkit/two-runs"
mkdir -p "$out"
cleanup() {
    if [ "${KEEP:-0}" = 1 ]; then
        echo "two-runs: clones kept in $tmp"
    else
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT

for x in a b; do
    git clone -q "$src" "$tmp/$x"
    git -C "$tmp/$x" checkout -q --detach "$rev"
    # The uncommitted state of this checkout is not in the clones.
done
echo "two-runs: $rev in $tmp/a and $tmp/b; command: ${cmd[*]}"
for x in a b; do
    echo "two-runs: building $x"
    (cd "$tmp/$x" && cargo xtask build > "$out/build-$x.log" 2>&1) || {
        echo "two-runs: the build of $x failed; see $out/build-$x.log"
        exit 1
    }
done

start=$(date +%s)
pids=()
for x in a b; do
    (cd "$tmp/$x" && "${cmd[@]}" > "$out/$x.log" 2>&1) &
    pids+=($!)
done
status=0
for i in 0 1; do
    x=$([ $i = 0 ] && echo a || echo b)
    if wait "${pids[$i]}"; then rc=0; else rc=$?; fi
    [ "$rc" = 0 ] || status=1
    echo "two-runs: $x exit=$rc: $(tail -n 1 "$out/$x.log")"
    grep -h "waiting for" "$out/$x.log" | sed "s/^/two-runs: $x: /" || true
done
echo "two-runs: both ended after $(($(date +%s) - start)) s; logs in $out"
exit $status
