#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/fuzz_targets) for a while, one at a time at the lowest
# CPU priority, then minimises its corpus (fuzz/corpus/<target>). Inputs that crash are
# copied to fuzz/regressions/<target>/, which tests/fuzz_corpus.rs replays on stable.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      default: 600 s, every target
#
# Needs the nightly toolchain and cargo-fuzz (installed when missing). The crate has no
# `unsafe`, so by default targets build without a sanitizer (FUZZ_SANITIZER=none): what we
# hunt is panics, unbounded allocations and hangs, and an ASan build is ~10x slower to build
# and ~2x slower to run. FUZZ_SANITIZER=address restores it. Per-target figures
# (executions, seconds, crashes) are appended to fuzz/logs/summary.tsv.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-600}
shift || true
# Each input may use at most this much memory (RSS, and any single allocation).
limit_mb=${FUZZ_LIMIT_MB:-2048}
export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-$PWD/fuzz/target}
sanitizer=${FUZZ_SANITIZER:-none}

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
fi

# Seeds, when a corpus is empty: the pypaimon fixture table's files and the decoder
# tests' messages (written by the `fuzz_seeds_decode_to_changes` unit test).
seed() {
    local target=$1 dir=fuzz/corpus/$1 fixture=tests/fixtures/pypaimon/db.db/orders
    mkdir -p "$dir"
    [ -n "$(ls -A "$dir")" ] && return
    case $target in
        snapshot) cp "$fixture"/snapshot/snapshot-* "$dir"/ ;;
        schema) cp "$fixture"/schema/schema-* "$dir"/ ;;
        manifest) cp "$fixture"/manifest/* "$dir"/ ;;
        data_file) find "$fixture" -name '*.parquet' -exec cp {} "$dir"/ \; ;;
        *) LAKEJOIN_FUZZ_SEEDS=$PWD/fuzz/corpus CARGO_TARGET_DIR=${STABLE_TARGET_DIR:-target} \
               cargo test --lib fuzz_seeds -q >/dev/null ;;
    esac
}

mkdir -p fuzz/logs
status=0
for target in "${targets[@]}"; do
    seed "$target"
    mkdir -p "fuzz/artifacts/$target" "fuzz/regressions/$target"
    rm -f "fuzz/artifacts/$target"/*
    log=fuzz/logs/$target.log
    start=$(date +%s)
    nice -n 19 cargo +nightly fuzz run -O -s "$sanitizer" "$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -rss_limit_mb="$limit_mb" -malloc_limit_mb="$limit_mb" \
        -timeout=30 -print_final_stats=1 >"$log" 2>&1
    result=$?
    elapsed=$(( $(date +%s) - start ))
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    crashes=0
    for artifact in fuzz/artifacts/"$target"/*; do
        [ -f "$artifact" ] || continue
        cp "$artifact" "fuzz/regressions/$target/"
        crashes=$((crashes + 1))
    done
    if [ $result -ne 0 ]; then
        status=1
        echo "$target: FAILED (exit $result), see $log and fuzz/regressions/$target" >&2
        grep -m5 -E 'panicked|ERROR|SUMMARY' "$log" >&2
    fi
    # Keep only the inputs that add coverage.
    nice -n 19 cargo +nightly fuzz cmin -O -s "$sanitizer" "$target" "fuzz/corpus/$target" -- \
        -rss_limit_mb="$limit_mb" -malloc_limit_mb="$limit_mb" >"fuzz/logs/$target.cmin.log" 2>&1
    printf '%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$target" "${execs:-?}" "$elapsed" "$crashes" \
        | tee -a fuzz/logs/summary.tsv
done
exit $status
