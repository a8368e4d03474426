# Shared by scripts/test.sh and scripts/bench.sh (sourced, not run): logging, and starting
# and stopping the suite's Apache Kafka broker (scripts/kafka/broker.sh).
#
# Expects REPO_ROOT to be set by the sourcing script.

log() {
    printf '\n==> %s\n' "$*"
}

fail() {
    printf '\nERROR: %s\n' "$*" >&2
    exit 1
}

KAFKA_BROKER_SCRIPT="${REPO_ROOT}/scripts/kafka/broker.sh"
KAFKA_RUN_DIR=""

# Starts a fresh Apache Kafka broker (four listeners, see scripts/kafka/broker.sh) in $1,
# installing its jars once, and exports its addresses and credentials (KAFKA_BOOTSTRAP,
# KAFKA_SSL_BOOTSTRAP, ...) for the tests. The caller arranges stop_kafka on exit.
start_kafka() {
    local dir="$1"
    command -v java >/dev/null || fail "java is not installed (the Kafka broker needs Java 17)"
    rm -rf "${dir}"
    KAFKA_RUN_DIR="${dir}"
    log "Starting Apache Kafka in ${dir#"${REPO_ROOT}/"}"
    bash "${KAFKA_BROKER_SCRIPT}" start "${dir}"
    # shellcheck source=/dev/null
    source "${dir}/broker.env"
}

stop_kafka() {
    if [[ -n "${KAFKA_RUN_DIR}" ]]; then
        bash "${KAFKA_BROKER_SCRIPT}" stop "${KAFKA_RUN_DIR}" || true
    fi
    KAFKA_RUN_DIR=""
}
