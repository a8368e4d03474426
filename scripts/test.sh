#!/usr/bin/env bash
# The project's single test command: formatting, lints and the whole test suite,
# including the integration tests against pypaimon and Apache Kafka.
#
# Works on a fresh machine that has a Rust toolchain (with rustfmt and clippy),
# cargo-nextest (optional; falls back to `cargo test`), python3.11, Java 17 and Maven.
# Everything else it needs it installs itself, once; later runs reuse it: the Python
# venv (.venv), Apache Kafka's jars (~/.cache/lakejoin, from Maven Central), and PyFlink
# with the Kafka and Paimon connector jars and Flink's Avro formats for the Flink
# cross-checks (scripts/flink.sh, ~/.cache/lakejoin/flink-<version>, about 1 GB, 2 minutes once), and
# Debian's strace when the machine has none (scripts/debian.sh, for the power-loss test),
# and Debian's MariaDB with Debezium's MariaDB connector and a Kafka Connect worker for the
# Debezium chain test, with Apicurio Registry and its Avro converter for the test's Avro run
# (scripts/debezium/install.sh, ~/.cache/lakejoin, about 230 MB).
#
# Environment:
#   LAKEJOIN_PYTHON   use this Python (must have pypaimon) instead of creating .venv
#   PYTHON            interpreter used to create .venv (default: python3.11)
#   KAFKA_BOOTSTRAP   run the Kafka integration tests against this broker's PLAINTEXT
#                     listener (for example the one in docker/docker-compose.yml) instead
#                     of starting one; the tests of secured listeners then need
#                     KAFKA_SSL_BOOTSTRAP and the rest of scripts/kafka/broker.sh's
#                     variables, and are skipped without them

set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV_DIR="${REPO_ROOT}/.venv"
REQUIREMENTS="${REPO_ROOT}/integration-tests/requirements.txt"

# shellcheck source=lib/broker.sh
source "${REPO_ROOT}/scripts/lib/broker.sh"

# No incremental caches: a run from nothing gains nothing from them, and they took 1.9 of
# the 5.7 GB the suite's build wrote when a CI machine's disk filled (Cargo.toml's
# [profile.test] drops the debug info that took most of the rest).
export CARGO_INCREMENTAL=0

# What a run from nothing writes, in GB (measured): target/ (1.8 at its peak),
# ~/.cache/lakejoin (1.4), .venv (0.9), cargo's registry and Maven's repository (1.0), and
# the tests' temporary files.
NEEDED_DISK_GB=6

# Says how much room the build's disk has, and warns when a run from nothing may not fit,
# so that a disk that fills mid-build is told apart from a failing test.
report_disk() {
    local free_gb
    free_gb="$(df -Pk "${REPO_ROOT}" | awk 'NR == 2 { printf "%d", $4 / 1048576 }')"
    if (( free_gb < NEEDED_DISK_GB )); then
        log "WARNING: only ${free_gb} GB free on the disk of ${REPO_ROOT}; a run from nothing writes about ${NEEDED_DISK_GB} GB, so it may fail with 'No space left on device'"
    else
        log "${free_gb} GB free on the disk of ${REPO_ROOT}"
    fi
}

# Creates .venv with the pinned pypaimon when missing or when requirements.txt changed;
# a quick no-op otherwise. Exports LAKEJOIN_PYTHON for the integration tests.
ensure_python_env() {
    if [[ -n "${LAKEJOIN_PYTHON:-}" ]]; then
        log "Python for the pypaimon tests: ${LAKEJOIN_PYTHON} (from LAKEJOIN_PYTHON)"
        [[ -x "${LAKEJOIN_PYTHON}" ]] || fail "LAKEJOIN_PYTHON=${LAKEJOIN_PYTHON} is not an executable"
        return
    fi

    local stamp="${VENV_DIR}/.requirements.sha256"
    local wanted
    wanted="$(sha256sum "${REQUIREMENTS}" | cut -d' ' -f1)"
    if [[ -x "${VENV_DIR}/bin/python" && -f "${stamp}" && "$(cat "${stamp}")" == "${wanted}" ]]; then
        log "Python environment .venv is up to date"
    else
        local python="${PYTHON:-python3.11}"
        command -v "${python}" >/dev/null || python="python3"
        command -v "${python}" >/dev/null || fail "no python3.11 (or python3) found to create .venv"
        log "Creating .venv with ${python} and installing integration-tests/requirements.txt"
        "${python}" -m venv "${VENV_DIR}"
        "${VENV_DIR}/bin/python" -m pip install --quiet --no-cache-dir --upgrade pip
        "${VENV_DIR}/bin/python" -m pip install --quiet --no-cache-dir -r "${REQUIREMENTS}"
        echo "${wanted}" > "${stamp}"
    fi
    "${VENV_DIR}/bin/python" -c 'import pypaimon' \
        || fail ".venv has no working pypaimon; delete .venv and run again"
    export LAKEJOIN_PYTHON="${VENV_DIR}/bin/python"
}

# Installs PyFlink and its connector jars for integration-tests/flink_*.rs when missing
# (scripts/flink.sh; a stamp check once installed). The test runs the same script itself, as
# java_paimon.rs runs scripts/java-oracle.sh, so this only moves the one-time install out of
# the test run, where it would count against a test's time and print nothing while it works.
ensure_flink() {
    local dir
    dir="$(bash "${REPO_ROOT}/scripts/flink.sh")" \
        || fail "scripts/flink.sh could not install PyFlink for the Flink tests (needs python3.11, Java 17 and mvn)"
    log "PyFlink for the Flink tests: ${dir}"
}

# Unpacks Debian's strace for integration-tests/power_loss.rs when the machine has none
# (scripts/debian.sh, once into ~/.cache/lakejoin/debian/strace, 1.4 MB), and exports a
# wrapper for it as LAKEJOIN_STRACE. The test traces fsync calls, so tracing must work.
ensure_strace() {
    if [[ -z "${LAKEJOIN_STRACE:-}" ]]; then
        if command -v strace >/dev/null; then
            LAKEJOIN_STRACE="$(command -v strace)"
        else
            local dir
            dir="$(bash "${REPO_ROOT}/scripts/debian.sh" strace strace libunwind8)" \
                || fail "scripts/debian.sh could not unpack Debian's strace for the power-loss test"
            LAKEJOIN_STRACE="${dir}/strace"
            printf '#!/bin/sh\nLD_LIBRARY_PATH="%s/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s/usr/bin/strace" "$@"\n' \
                "${dir}" "${dir}" > "${LAKEJOIN_STRACE}"
            chmod +x "${LAKEJOIN_STRACE}"
        fi
    fi
    "${LAKEJOIN_STRACE}" -f -qq -o /dev/null true \
        || fail "${LAKEJOIN_STRACE} cannot trace here (ptrace refused?); the power-loss test needs it"
    export LAKEJOIN_STRACE
    log "strace for the power-loss test: ${LAKEJOIN_STRACE}"
}

# Installs the Debezium chain of integration-tests/debezium_mariadb.rs when missing
# (scripts/debezium/install.sh: Debian's MariaDB unpacked into ~/.cache/lakejoin/debian/mariadb,
# 60 MB; Debezium's MariaDB connector and a Kafka Connect worker from Maven Central into
# ~/.cache/lakejoin/debezium-<version>, 52 MB; Apicurio Registry and its Avro converter for
# the Avro run into ~/.cache/lakejoin/apicurio-<version>, a 105 MB download, 122 MB
# unpacked, about a minute; a stamp check once installed). The test runs the same script
# itself; this moves the one-time install out of the test's time.
ensure_debezium() {
    local mariadb connect avro
    mariadb="$(bash "${REPO_ROOT}/scripts/debezium/install.sh" mariadb)" \
        || fail "scripts/debezium/install.sh could not unpack Debian's MariaDB for the Debezium test"
    connect="$(bash "${REPO_ROOT}/scripts/debezium/install.sh" connect)" \
        || fail "scripts/debezium/install.sh could not install Debezium for the Debezium test (needs mvn)"
    avro="$(bash "${REPO_ROOT}/scripts/debezium/install.sh" avro)" \
        || fail "scripts/debezium/install.sh could not install Apicurio Registry for the Debezium and Flink Avro tests (needs mvn)"
    log "MariaDB, Debezium and Apicurio Registry for the Debezium test: ${mariadb}, ${connect}, ${avro}"
}

# Starts Apache Kafka on free loopback ports and exports its addresses for the integration
# tests; it is stopped when this script exits, however it exits. The tests that stop and
# start a broker of their own use scripts/kafka/broker.sh too, so the jars are installed
# even when KAFKA_BOOTSTRAP names another broker.
ensure_broker() {
    bash "${KAFKA_BROKER_SCRIPT}" install >/dev/null
    if [[ -n "${KAFKA_BOOTSTRAP:-}" ]]; then
        log "Kafka broker for the integration tests: ${KAFKA_BOOTSTRAP} (from KAFKA_BOOTSTRAP)"
        return
    fi
    trap stop_kafka EXIT
    start_kafka "${REPO_ROOT}/target/kafka"
}

check_format() {
    log "cargo fmt --check"
    cargo fmt --all --check
}

# The crate docs draw the architecture; a broken link in them is an error.
check_docs() {
    log "cargo doc --no-deps (warnings are errors)"
    RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
}

check_lints() {
    log "cargo clippy --all-targets -- -D warnings"
    cargo clippy --all-targets -- -D warnings
}

# Library, binary and integration tests. Benches are not run here (clippy builds them):
# a `harness = false` bench binary would run the whole benchmark when asked to list tests.
run_tests() {
    if cargo nextest --version >/dev/null 2>&1; then
        log "cargo nextest run"
        cargo nextest run --no-fail-fast
    else
        log "cargo test (cargo-nextest not installed)"
        cargo test --no-fail-fast
    fi
}

main() {
    cd "${REPO_ROOT}"
    report_disk
    ensure_python_env
    ensure_flink
    ensure_strace
    ensure_debezium
    check_format
    check_lints
    check_docs
    ensure_broker
    run_tests
    log "All checks passed"
}

main "$@"
