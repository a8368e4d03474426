# Shared by scripts/test.sh and scripts/bench.sh (sourced, not run): logging, the cached
# tansu install, a free loopback port, and starting/stopping a tansu broker.
#
# Expects REPO_ROOT to be set by the sourcing script.

log() {
    printf '\n==> %s\n' "$*"
}

fail() {
    printf '\nERROR: %s\n' "$*" >&2
    exit 1
}

TANSU_VERSION="0.6.0"
TANSU_ROOT="${XDG_CACHE_HOME:-${HOME}/.cache}/lakejoin/tansu-${TANSU_VERSION}"
TANSU_PID=""

# Installs tansu (a Kafka-protocol broker, see DESIGN.md) once into a cache outside the
# repo; building it takes ~15 minutes, later runs reuse the binary. Exports TANSU.
ensure_tansu() {
    if [[ -n "${TANSU:-}" ]]; then
        [[ -x "${TANSU}" ]] || fail "TANSU=${TANSU} is not an executable"
        export TANSU
        return
    fi
    TANSU="${TANSU_ROOT}/bin/tansu"
    export TANSU
    if [[ -x "${TANSU}" ]]; then
        log "tansu ${TANSU_VERSION}: ${TANSU}"
        return
    fi
    log "Installing tansu ${TANSU_VERSION} into ${TANSU_ROOT} (once; takes ~15 minutes)"
    cargo install tansu --version "${TANSU_VERSION}" --locked --features dynostore \
        --root "${TANSU_ROOT}"
    [[ -x "${TANSU}" ]] || fail "cargo install tansu did not produce ${TANSU}"
}

free_port() {
    "${LAKEJOIN_PYTHON:-python3}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

stop_tansu() {
    if [[ -n "${TANSU_PID}" ]] && kill -0 "${TANSU_PID}" 2>/dev/null; then
        kill "${TANSU_PID}" 2>/dev/null || true
        wait "${TANSU_PID}" 2>/dev/null || true
    fi
    TANSU_PID=""
}

# Starts tansu with in-memory storage on a free loopback port, logging to $1, and waits
# until it accepts connections. Sets TANSU_PID and exports KAFKA_BOOTSTRAP. The caller
# arranges stop_tansu on exit.
start_tansu() {
    local log_file="$1" port
    port="$(free_port)"
    mkdir -p "$(dirname "${log_file}")"
    log "Starting tansu on 127.0.0.1:${port} (log: ${log_file#"${REPO_ROOT}/"})"
    "${TANSU}" broker \
        --listener-url "tcp://127.0.0.1:${port}" \
        --advertised-listener-url "tcp://127.0.0.1:${port}" \
        --storage-engine "memory://tansu/" >"${log_file}" 2>&1 &
    TANSU_PID=$!
    local deadline=$((SECONDS + 60))
    until (exec 3<>"/dev/tcp/127.0.0.1/${port}") 2>/dev/null; do
        kill -0 "${TANSU_PID}" 2>/dev/null || fail "tansu exited at start; see ${log_file}"
        ((SECONDS < deadline)) || fail "tansu did not listen on port ${port} within 60 s"
        sleep 0.2
    done
    export KAFKA_BOOTSTRAP="127.0.0.1:${port}"
}
