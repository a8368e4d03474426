#!/usr/bin/env bash
# The real change-data-capture chain of the test suite (integration-tests/debezium_mariadb.rs):
# MariaDB → Debezium's MariaDB connector in a Kafka Connect standalone worker (JSON, or Avro
# through a schema registry) → Kafka → lakejoin. This script installs its parts once into
# ${XDG_CACHE_HOME:-~/.cache}/lakejoin and prints where; the tests start and stop the processes themselves (a MariaDB on a free
# loopback port with a temporary datadir, a worker per test).
#
#   install.sh mariadb   Debian's MariaDB server and client (scripts/debian.sh, about 60 MB),
#                        unpacked without touching the system; prints the directory (its
#                        binaries are under usr/sbin and usr/bin, its libraries under
#                        usr/lib/x86_64-linux-gnu, for LD_LIBRARY_PATH)
#   install.sh connect   from Maven Central, pinned: Debezium's MariaDB connector and its
#                        dependencies (plugin.pom.xml, about 17 MB) into DIR/plugin, the
#                        worker's plugin.path, and the Kafka Connect worker Debezium is built
#                        against (worker.pom.xml, about 35 MB) into DIR/worker, its class
#                        path; prints DIR
#   install.sh avro      from Maven Central, pinned (avro.pom.xml): what the Avro run adds,
#                        Apicurio Registry's application (a 105 MB tarball, 115 MB unpacked)
#                        into DIR/registry, and Apicurio's Avro converter for the worker
#                        (about 7 MB) into DIR/plugin/apicurio-converter, DIR/plugin going
#                        on the worker's plugin.path beside Debezium's; prints DIR
#
# Each install is stamped with what it installed (the package list, the pom's sha256), so a
# change installs afresh, and guarded by flock, since test processes run in parallel and
# each may be the first to ask. Only the path goes to stdout.

set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PLUGIN_POM="${SCRIPT_DIR}/plugin.pom.xml"
WORKER_POM="${SCRIPT_DIR}/worker.pom.xml"
AVRO_POM="${SCRIPT_DIR}/avro.pom.xml"
CACHE_ROOT="${XDG_CACHE_HOME:-${HOME}/.cache}/lakejoin"
DEBEZIUM_VERSION="$(sed -n 's:.*<debezium.version>\(.*\)</debezium.version>.*:\1:p' "${PLUGIN_POM}")"
CONNECT_DIR="${CACHE_ROOT}/debezium-${DEBEZIUM_VERSION}"
REGISTRY_VERSION="$(sed -n 's:.*<apicurio.registry.version>\(.*\)</apicurio.registry.version>.*:\1:p' "${AVRO_POM}")"
AVRO_DIR="${CACHE_ROOT}/apicurio-${REGISTRY_VERSION}"

# Debian 12's MariaDB 10.11: the server, the client (for the tests' SQL), and the libraries
# a minimal Debian lacks (libaio1, liburing2, libnuma1 for the server; libmariadb3 for the
# client). mariadb-common holds the configuration the packages expect; the tests start the
# server with --no-defaults, so it is read by nobody.
MARIADB_PACKAGES=(mariadb-server-core mariadb-client-core libmariadb3 libaio1 liburing2 libnuma1 mariadb-common)

say() {
    printf '==> %s\n' "$*" >&2
}

die() {
    printf 'ERROR: %s\n' "$*" >&2
    exit 1
}

# Runs "$@" holding the cache's lock for this part.
locked() {
    local name="$1"
    shift
    mkdir -p "${CACHE_ROOT}"
    (
        flock 9
        "$@"
    ) 9>"${CACHE_ROOT}/${name}.lock"
}

install_mariadb() {
    local dir
    dir="$(bash "${SCRIPT_DIR}/../debian.sh" mariadb "${MARIADB_PACKAGES[@]}")" \
        || die "scripts/debian.sh could not unpack Debian's MariaDB (${MARIADB_PACKAGES[*]})"
    [[ -x "${dir}/usr/sbin/mariadbd" ]] || die "no usr/sbin/mariadbd in ${dir}"
    echo "${dir}"
}

install_connect() {
    local stamp="${CONNECT_DIR}/.poms.sha256" wanted
    wanted="$(cat "${PLUGIN_POM}" "${WORKER_POM}" | sha256sum | cut -d' ' -f1)"
    if [[ -f "${stamp}" && "$(cat "${stamp}")" == "${wanted}" ]]; then
        echo "${CONNECT_DIR}"
        return
    fi
    command -v mvn >/dev/null || die "mvn is not installed (needed once to resolve Debezium's jars)"
    say "Installing Debezium ${DEBEZIUM_VERSION}'s MariaDB connector and a Kafka Connect worker from Maven Central into ${CONNECT_DIR} (once)"
    rm -rf "${CONNECT_DIR}"
    # The plugin gets a directory of its own under plugin.path: Connect loads it in a class
    # loader of its own.
    mkdir -p "${CONNECT_DIR}/plugin/debezium-connector-mariadb" "${CONNECT_DIR}/worker"
    mvn -q -B -Dstyle.color=never -f "${PLUGIN_POM}" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="${CONNECT_DIR}/plugin/debezium-connector-mariadb" >&2 \
        || die "mvn could not resolve Debezium ${DEBEZIUM_VERSION} (${PLUGIN_POM})"
    mvn -q -B -Dstyle.color=never -f "${WORKER_POM}" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="${CONNECT_DIR}/worker" >&2 \
        || die "mvn could not resolve the Kafka Connect worker (${WORKER_POM})"
    echo "${wanted}" > "${stamp}"
    # Older versions' installs are of no more use.
    find "${CACHE_ROOT}" -mindepth 1 -maxdepth 1 -type d -name 'debezium-*' \
        ! -path "${CONNECT_DIR}" -exec rm -rf {} +
    echo "${CONNECT_DIR}"
}

install_avro() {
    local stamp="${AVRO_DIR}/.poms.sha256" wanted
    local registry="${AVRO_DIR}/registry" converter="${AVRO_DIR}/plugin/apicurio-converter"
    local runner="apicurio-registry-app-${REGISTRY_VERSION}-runner.jar"
    wanted="$(sha256sum < "${AVRO_POM}" | cut -d' ' -f1)"
    if [[ -f "${stamp}" && "$(cat "${stamp}")" == "${wanted}" ]]; then
        echo "${AVRO_DIR}"
        return
    fi
    command -v mvn >/dev/null || die "mvn is not installed (needed once to fetch Apicurio Registry)"
    command -v jar >/dev/null || die "the JDK's jar tool is not installed"
    say "Installing Apicurio Registry ${REGISTRY_VERSION} and its Avro converter from Maven Central into ${AVRO_DIR} (once, about 110 MB)"
    rm -rf "${AVRO_DIR}"
    mkdir -p "${registry}" "${converter}"
    mvn -q -B -Dstyle.color=never -f "${AVRO_POM}" dependency:copy \
        -Dartifact="io.apicurio:apicurio-registry-app:${REGISTRY_VERSION}:tar.gz:all" \
        -DoutputDirectory="${registry}" >&2 \
        || die "mvn could not fetch Apicurio Registry ${REGISTRY_VERSION} (${AVRO_POM})"
    local tarball="${registry}/apicurio-registry-app-${REGISTRY_VERSION}-all.tar.gz"
    [[ -f "${tarball}" ]] || die "mvn fetched no ${tarball}"
    tar -xzf "${tarball}" -C "${registry}" || die "cannot unpack ${tarball}"
    rm -f "${tarball}"
    [[ -f "${registry}/${runner}" ]] || die "no ${runner} in Apicurio Registry's tarball"
    mvn -q -B -Dstyle.color=never -f "${AVRO_POM}" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="${converter}" >&2 \
        || die "mvn could not resolve Apicurio's Avro converter (${AVRO_POM})"
    # The worker finds plugins by their service files (plugin.discovery=service_load, as
    # the README's worker has it), and the converter's jar has none: a jar of its own
    # names the converter.
    local services
    services="$(mktemp -d)"
    mkdir -p "${services}/META-INF/services"
    echo "io.apicurio.registry.utils.converter.AvroConverter" \
        > "${services}/META-INF/services/org.apache.kafka.connect.storage.Converter"
    jar --create --file "${converter}/apicurio-converter-services.jar" -C "${services}" META-INF \
        || die "jar could not build the converter's service file"
    rm -rf "${services}"
    echo "${wanted}" > "${stamp}"
    # Older versions' installs are of no more use.
    find "${CACHE_ROOT}" -mindepth 1 -maxdepth 1 -type d -name 'apicurio-*' \
        ! -path "${AVRO_DIR}" -exec rm -rf {} +
    echo "${AVRO_DIR}"
}

case "${1:-}" in
    mariadb) locked mariadb install_mariadb ;;
    connect) locked debezium install_connect ;;
    avro) locked apicurio install_avro ;;
    *) die "usage: install.sh mariadb | connect | avro" ;;
esac
