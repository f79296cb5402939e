#!/usr/bin/env bash
# The catalog benchmark as the README reports it: for one entry count, layout and latency
# profile, a freshly seeded catalog per operation, every write operation over the levels
# of concurrency, then cold and warm reads. Appends JSON lines for `tarn-concurrency chart`.
#
#   benches/scripts/catalog-bench.sh ROOT PROFILE ENTRIES LAYOUT [LEVELS] [LEVEL_OPS]
#   benches/scripts/catalog-bench.sh /tmp/catalog-bench s3-standard 1000 paged
#
# ROOT is a directory or URL the catalogs go under (one per run); the JSON lines go to
# ROOT/results.jsonl. Set WRITE_OPS / READ_OPS / READ_LEVELS to narrow the run (empty:
# none of them), INDICES=off for a manifest without indices.
set -euo pipefail
root=${1:?root}; profile=${2:?profile}; entries=${3:?entries}; layout=${4:?layout}
levels=${5:-1,2,5,10,20,50,100,200}; level_ops=${6:-60}
write_ops=${WRITE_OPS-create-namespace create-table declare-table drop-table rename-table}
read_ops=${READ_OPS-open describe-table list-tables list-namespaces search}
read_levels=${READ_LEVELS:-1,10,50}
indices=${INDICES:-on}
bin=${TARN_CONCURRENCY:-target/release/tarn-concurrency}
mkdir -p "$root" 2>/dev/null || true
json="$root/results.jsonl"
run=$(date +%s)
seed() { # a fresh catalog of $entries
  local url="$root/$1"
  "$bin" catalog-seed --url "$url" --entries "$entries" --layout "$layout" \
    --indices "$indices" >&2
  echo "$url"
}
for op in $write_ops; do
  url=$(seed "w-$layout-$entries-$op-$run")
  "$bin" catalog-write --url "$url" --op "$op" --levels "$levels" --level-ops "$level_ops" \
    --profile "$profile" --json "$json"
done
if [ -n "${read_ops// /}" ]; then
  url=$(seed "r-$layout-$entries-$run")
  for op in $read_ops; do
    "$bin" catalog-cold-read --url "$url" --op "$op" --levels "$read_levels" \
      --level-ops 60 --profile "$profile" --json "$json"
    if [ "$op" != open ]; then
      "$bin" catalog-warm-read --url "$url" --op "$op" --levels "$read_levels" \
        --level-ops 60 --profile "$profile" --json "$json"
    fi
  done
fi
