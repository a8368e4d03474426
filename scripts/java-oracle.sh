#!/usr/bin/env bash
# The Java Paimon oracle of the test suite: Apache Paimon's own Java implementation (the
# reference the Rust code must agree with) behind a small command-line program in
# integration-tests/java. Tests run it as `java -jar JAR COMMAND WAREHOUSE DB.TABLE ...`
# to read what lakejoin wrote and to write tables for lakejoin to read (`--help` lists the
# commands and the JSON value encoding).
#
# Usage:
#   java-oracle.sh           build the runnable jar if needed, then print its absolute path
#
# The jar is built once with Maven (from Maven Central) into
# ${XDG_CACHE_HOME:-~/.cache}/lakejoin/java-oracle-<hash>/oracle.jar, where <hash> is a
# sha256 of integration-tests/java/pom.xml and every file under integration-tests/java/src,
# so a change to either builds afresh (and removes the jars of older hashes). The build runs
# in a temporary directory, leaving no target/ in the source tree. Only the path goes to
# stdout; Maven's output goes to stderr. Concurrent callers wait for one build (flock).

set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ORACLE_DIR="$(cd "${SCRIPT_DIR}/../integration-tests/java" && pwd)"
POM="${ORACLE_DIR}/pom.xml"
CACHE_ROOT="${XDG_CACHE_HOME:-${HOME}/.cache}/lakejoin"

say() {
    printf '==> %s\n' "$*" >&2
}

die() {
    printf 'ERROR: %s\n' "$*" >&2
    exit 1
}

# A sha256 over the pom and the sources: each file's path (relative) and content hash.
source_hash() {
    (
        cd "${ORACLE_DIR}"
        find pom.xml src -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
    ) | sha256sum | cut -c1-16
}

build_jar() {
    local jar="$1" dir build
    dir="$(dirname "${jar}")"
    command -v mvn >/dev/null || die "mvn is not installed (needed once to build the Java Paimon oracle)"
    command -v java >/dev/null || die "java is not installed (the Java Paimon oracle needs Java 17)"
    say "Building the Java Paimon oracle into ${jar} (once)"
    build="$(mktemp -d "${CACHE_ROOT}/java-oracle-build.XXXXXX")"
    BUILD_TMP="${build}"
    mvn -q -B -Dstyle.color=never -f "${POM}" package -DbuildDirectory="${build}" >&2 \
        || die "mvn could not build the Java Paimon oracle (${POM})"
    [[ -f "${build}/oracle.jar" ]] || die "the build made no ${build}/oracle.jar"
    mkdir -p "${dir}"
    cp "${build}/oracle.jar" "${dir}/oracle.jar.tmp"
    mv -f "${dir}/oracle.jar.tmp" "${jar}"
    rm -rf "${build}"
}

BUILD_TMP=""
trap '[[ -z "${BUILD_TMP}" ]] || rm -rf "${BUILD_TMP}"' EXIT

main() {
    if [[ $# -gt 0 ]]; then
        case "$1" in
            -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
            *) die "unknown argument $1 (usage: java-oracle.sh)" ;;
        esac
    fi
    local jar
    jar="${CACHE_ROOT}/java-oracle-$(source_hash)/oracle.jar"
    if [[ ! -f "${jar}" ]]; then
        mkdir -p "${CACHE_ROOT}"
        exec 9>"${CACHE_ROOT}/java-oracle.lock"
        flock 9
        # Another caller may have built it while this one waited.
        if [[ ! -f "${jar}" ]]; then
            build_jar "${jar}"
            # Jars of older sources (about 100 MB each) are of no more use.
            find "${CACHE_ROOT}" -mindepth 1 -maxdepth 1 -type d -name 'java-oracle-*' \
                ! -path "$(dirname "${jar}")" -exec rm -rf {} +
        fi
        flock -u 9
    fi
    echo "${jar}"
}

main "$@"
