#!/usr/bin/env bash
# The side-by-side throughput benchmark (benches/throughput/): passthrough, the Redis
# design, lakejoin enrich with each cache strategy (one and three chained joins), lakejoin
# CDC ingest, and the RSS of a 1,000,000-row full cache. Prints a table and writes
# BENCHMARKS.md (a run of only some cases, CASES, writes its own into BENCH_DIR).
#
# Installs what it needs once: Apache Kafka's jars (into ~/.cache/lakejoin, as
# scripts/test.sh does) and Debian's redis-server (unpacked into ~/.cache/lakejoin/debian/redis
# by scripts/debian.sh; nothing is installed on the system), and PyFlink for the Flink cases
# (scripts/flink.sh, ~/.cache/lakejoin). The
# benchmark starts its own Kafka broker and redis-server on free loopback ports and stops
# them at the end.
#
# Environment (all optional):
#   ORDERS=1000000 CUSTOMERS=100000 RSS_ROWS=1000000   data sizes (scale down for a smoke run)
#   PARTITIONS=4        partitions of the orders and output topics
#   CASES=...           comma-separated case-name prefixes to run, e.g. "passthrough,redis",
#                       "lakejoin full", "lakejoin CDC", "rss" (see the printed case names)
#   LAKEJOIN_KAFKA_PROPERTIES  librdkafka properties for lakejoin's clients, e.g.
#                       "linger.ms=20,compression.type=none" (the harness's loops keep theirs)
#   LAKEJOIN_BIN        the lakejoin binary to run instead of the one built here
#   COMPARE_BIN, COMPARE_KAFKA_PROPERTIES, ROUNDS=3   compare a second lakejoin (another
#                       binary and/or librdkafka properties) with the first: the chosen
#                       lakejoin cases run ROUNDS times each, alternating, and the median
#                       B/A ratios go to BENCH_DIR/COMPARISON.md (BENCHMARKS.md is left alone)
#   INSTRUCTIONS=1      count instructions instead of timing: every measured lakejoin runs
#                       under valgrind's callgrind (unpacked once from Debian's packages into
#                       ~/.cache/lakejoin/debian/valgrind) and COMPARISON.md gets its
#                       instructions per record and the median B − A; always a comparison
#                       (B is A itself when COMPARE_* are unset), ROUNDS defaults to 1.
#                       About 50× slower: use ORDERS=100000 CUSTOMERS=20000 or so.
#   VALGRIND            the valgrind to use for INSTRUCTIONS instead of the unpacked one
#   LAKEJOIN_ENRICH_OPTIONS  TOML lines added to the enrich cases' [[enrich]], e.g.
#                       "max_in_flight = 4000"
#   KAFKA_BOOTSTRAP     benchmark against this broker instead of a local Apache Kafka
#   REDIS_SERVER        the redis-server binary to use instead of the installed one
#   BENCH_DIR           logs, configs and warehouses (default target/bench-throughput)

set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/broker.sh
source "${REPO_ROOT}/scripts/lib/broker.sh"

# Unpacks Debian's redis-server once into ~/.cache/lakejoin/debian/redis (scripts/debian.sh;
# nothing is installed on the system) and exports a wrapper for it as REDIS_SERVER.
ensure_redis() {
    if [[ -n "${REDIS_SERVER:-}" ]]; then
        [[ -x "${REDIS_SERVER}" ]] || fail "REDIS_SERVER=${REDIS_SERVER} is not an executable"
        return
    fi
    local dir
    dir="$(bash "${REPO_ROOT}/scripts/debian.sh" redis redis-server redis-tools liblzf1 libjemalloc2)" \
        || fail "scripts/debian.sh could not unpack Debian's redis-server; set REDIS_SERVER"
    REDIS_SERVER="${dir}/redis-server"
    printf '#!/bin/sh\nLD_LIBRARY_PATH="%s/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s/usr/bin/redis-server" "$@"\n' \
        "${dir}" "${dir}" > "${REDIS_SERVER}"
    chmod +x "${REDIS_SERVER}"
    "${REDIS_SERVER}" --version >/dev/null || fail "${REDIS_SERVER} does not run"
    export REDIS_SERVER
    log "redis-server: ${REDIS_SERVER} ($("${REDIS_SERVER}" --version | cut -d' ' -f3))"
}

# With INSTRUCTIONS: unpacks Debian's valgrind once into ~/.cache/lakejoin/debian/valgrind
# (libc6-dbg too: valgrind needs the dynamic loader's symbols) and exports a wrapper that
# points valgrind at its tools and those symbols as VALGRIND.
ensure_valgrind() {
    [[ -n "${INSTRUCTIONS:-}" && "${INSTRUCTIONS}" != 0 ]] || return 0
    if [[ -n "${VALGRIND:-}" ]]; then
        [[ -x "${VALGRIND}" ]] || fail "VALGRIND=${VALGRIND} is not an executable"
        return
    fi
    local dir
    dir="$(bash "${REPO_ROOT}/scripts/debian.sh" valgrind valgrind libc6-dbg)" \
        || fail "scripts/debian.sh could not unpack Debian's valgrind; set VALGRIND"
    VALGRIND="${dir}/valgrind"
    printf '#!/bin/sh\nVALGRIND_LIB="%s/usr/libexec/valgrind" exec "%s/usr/bin/valgrind" --extra-debuginfo-path="%s/usr/lib/debug" "$@"\n' \
        "${dir}" "${dir}" "${dir}" > "${VALGRIND}"
    chmod +x "${VALGRIND}"
    "${VALGRIND}" --tool=callgrind --callgrind-out-file=/dev/null /bin/true 2>/dev/null \
        || fail "${VALGRIND} does not run"
    export VALGRIND
    log "valgrind: ${VALGRIND} ($("${VALGRIND}" --version))"
}

main() {
    cd "${REPO_ROOT}"
    if [[ -z "${KAFKA_BOOTSTRAP:-}" ]]; then
        bash "${KAFKA_BROKER_SCRIPT}" install >/dev/null
    fi
    ensure_redis
    ensure_valgrind
    # `cargo bench` builds the lakejoin binary the benchmark runs (CARGO_BIN_EXE_lakejoin)
    # in its own profile; a separate `cargo build --release` only compiled everything twice.
    log "Building and running the benchmark (cargo bench --bench throughput)"
    BENCH_COMMAND="scripts/bench.sh" cargo bench --bench throughput
}

main "$@"
