#!/usr/bin/env bash
# Apache Flink for the test suite's cross-check of lookup joins: Flink's own lookup join
# (PyFlink, a local mini cluster inside one Python process) on a table lakejoin wrote,
# compared with lakejoin's enriched output (integration-tests/flink_lookup.rs runs
# integration-tests/flink/lookup_join.py). Flink plus Paimon's Flink connector is the
# stack lakejoin replaces, so its answers are the reference for what a join should emit.
#
# Usage:
#   flink.sh           install if needed, then print the install directory's absolute path
#
# Installs once into ${XDG_CACHE_HOME:-~/.cache}/lakejoin/flink-<version>/:
#   venv/   a Python 3.11 venv with apache-flink from PyPI (PYTHON overrides the interpreter)
#   jars/   the connectors, resolved with Maven from Maven Central through a pom written
#           here (pom.xml beside them): flink-sql-connector-kafka, paimon-flink, the
#           shaded Hadoop client that Paimon's catalog needs (see HADOOP_VERSION below)
#           and the Avro formats (flink-sql-avro-confluent-registry)
# and links the jars into PyFlink's lib/ (venv/.../pyflink/lib), so they are on the
# JVM's own class path like jars in a Flink distribution's lib/, not in a user class
# loader. A stamp (.installed) holds the pinned versions; a change installs afresh and
# removes other flink-* installs. Later runs only compare the stamp. Only the path goes to
# stdout; pip's and Maven's output goes to stderr. Concurrent callers wait for one install
# (flock). Needs python3.11, Java 17 (PyFlink starts `java` from PATH or JAVA_HOME) and mvn.
#
# Versions: the newest Flink 2.x for which Maven Central serves Paimon 1.4.2's connector
# (the Paimon version of the Java oracle). Paimon 1.4.2 builds paimon-flink-2.0, -2.1 and
# -2.2, but only paimon-flink-2.0 is served (2.1 and 2.2: "Could not find artifact", in
# 2026-12), so Flink is 2.0.x: PyPI's apache-flink 2.0.2 and the Kafka connector built for
# Flink 2.0.

set -euo pipefail

FLINK_VERSION="2.0.2"
KAFKA_CONNECTOR_VERSION="4.0.1-2.0"
PAIMON_VERSION="1.4.2"
PAIMON_FLINK_ARTIFACT="paimon-flink-2.0"
# Flink's Avro formats (`avro`, `avro-confluent`, with the Confluent registry client shaded
# in), which read the `[[changelog]]` pipelines' Avro records. Maven Central serves 2.0.0
# of the 2.0 line, not 2.0.2 (the SQL jar is self-contained, so the patch level is moot).
AVRO_FORMAT_VERSION="2.0.0"
# Paimon's catalog context needs org.apache.hadoop.conf.Configuration even on a local
# warehouse (without it CREATE CATALOG fails: NoClassDefFoundError from CatalogContext), and
# hadoop-client-api alone is not enough (Configuration loads the Woodstox parser shaded into
# hadoop-client-runtime). The shaded pair is what the Java oracle uses, and it cannot clash
# with Flink's own dependencies.
HADOOP_VERSION="3.4.2"

CACHE_ROOT="${XDG_CACHE_HOME:-${HOME}/.cache}/lakejoin"
INSTALL_DIR="${CACHE_ROOT}/flink-${FLINK_VERSION}"
STAMP_TEXT="apache-flink==${FLINK_VERSION} flink-sql-connector-kafka:${KAFKA_CONNECTOR_VERSION} ${PAIMON_FLINK_ARTIFACT}:${PAIMON_VERSION} hadoop-client:${HADOOP_VERSION} flink-sql-avro-confluent-registry:${AVRO_FORMAT_VERSION}"

say() {
    printf '==> %s\n' "$*" >&2
}

die() {
    printf 'ERROR: %s\n' "$*" >&2
    exit 1
}

installed() {
    [[ -f "${INSTALL_DIR}/.installed" && "$(cat "${INSTALL_DIR}/.installed")" == "${STAMP_TEXT}" ]]
}

write_pom() {
    cat > "$1" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by scripts/flink.sh: the jars PyFlink ${FLINK_VERSION} needs for the lookup-join
     cross-check (mvn dependency:copy-dependencies into jars/). -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.lakejoin.test</groupId>
  <artifactId>flink-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.flink</groupId>
      <artifactId>flink-sql-connector-kafka</artifactId>
      <version>${KAFKA_CONNECTOR_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.paimon</groupId>
      <artifactId>${PAIMON_FLINK_ARTIFACT}</artifactId>
      <version>${PAIMON_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.flink</groupId>
      <artifactId>flink-sql-avro-confluent-registry</artifactId>
      <version>${AVRO_FORMAT_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.hadoop</groupId>
      <artifactId>hadoop-client-api</artifactId>
      <version>${HADOOP_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.hadoop</groupId>
      <artifactId>hadoop-client-runtime</artifactId>
      <version>${HADOOP_VERSION}</version>
      <exclusions>
        <!-- Its few unshaded dependencies (reload4j, commons-logging, …) are not needed:
             Flink logs through its own log4j 2. -->
        <exclusion>
          <groupId>*</groupId>
          <artifactId>*</artifactId>
        </exclusion>
      </exclusions>
    </dependency>
  </dependencies>
</project>
EOF
}

install() {
    command -v java >/dev/null || die "java is not installed (PyFlink runs Flink in a Java 17 JVM)"
    command -v mvn >/dev/null || die "mvn is not installed (needed once to fetch the Kafka and Paimon connector jars)"
    local python="${PYTHON:-python3.11}"
    command -v "${python}" >/dev/null || die "no ${python} found to create the PyFlink venv (PYTHON names another interpreter; apache-flink ${FLINK_VERSION} supports CPython 3.8-3.11)"

    say "Installing PyFlink ${FLINK_VERSION}, ${PAIMON_FLINK_ARTIFACT} ${PAIMON_VERSION} and the Kafka connector ${KAFKA_CONNECTOR_VERSION} into ${INSTALL_DIR} (once)"
    rm -rf "${INSTALL_DIR}"
    mkdir -p "${INSTALL_DIR}/jars"

    "${python}" -m venv "${INSTALL_DIR}/venv"
    local venv_python="${INSTALL_DIR}/venv/bin/python"
    "${venv_python}" -m pip install --quiet --no-cache-dir --upgrade pip >&2
    "${venv_python}" -m pip install --quiet --no-cache-dir "apache-flink==${FLINK_VERSION}" >&2 \
        || die "pip could not install apache-flink==${FLINK_VERSION}"

    write_pom "${INSTALL_DIR}/pom.xml"
    mvn -q -B -Dstyle.color=never -f "${INSTALL_DIR}/pom.xml" dependency:copy-dependencies \
        -DincludeScope=runtime -DexcludeTransitive=true \
        -DoutputDirectory="${INSTALL_DIR}/jars" >&2 \
        || die "mvn could not resolve the connector jars (${INSTALL_DIR}/pom.xml)"

    local lib
    lib="$("${venv_python}" -c 'import os, pyflink; print(os.path.join(os.path.dirname(pyflink.__file__), "lib"))')"
    [[ -d "${lib}" ]] || die "PyFlink has no lib directory at ${lib}"
    ln -s "${INSTALL_DIR}"/jars/*.jar "${lib}/"

    echo "${STAMP_TEXT}" > "${INSTALL_DIR}/.installed"
    # Installs of other versions (about 1 GB each) are of no more use.
    find "${CACHE_ROOT}" -mindepth 1 -maxdepth 1 -type d -name 'flink-*' \
        ! -path "${INSTALL_DIR}" -exec rm -rf {} +
    say "PyFlink installed in ${INSTALL_DIR} ($(du -sh "${INSTALL_DIR}" | cut -f1))"
}

main() {
    if [[ $# -gt 0 ]]; then
        case "$1" in
            -h|--help) sed -n '2,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
            *) die "unknown argument $1 (usage: flink.sh)" ;;
        esac
    fi
    if ! installed; then
        mkdir -p "${CACHE_ROOT}"
        exec 9>"${CACHE_ROOT}/flink.lock"
        flock 9
        # Another caller may have installed it while this one waited.
        installed || install
        flock -u 9
    fi
    echo "${INSTALL_DIR}"
}

main "$@"
