#!/usr/bin/env bash
# The Apache Kafka broker of the test suite and the benchmark: one process in KRaft mode
# (broker and controller combined) on free loopback ports, with the four listeners a
# production cluster offers, so every test speaks to the broker users run:
#
#   PLAINTEXT        KAFKA_BOOTSTRAP
#   SSL (mTLS)       KAFKA_SSL_BOOTSTRAP             client certificate required
#   SASL_SSL         KAFKA_SASL_SSL_BOOTSTRAP        SCRAM-SHA-512
#   SASL_PLAINTEXT   KAFKA_SASL_PLAINTEXT_BOOTSTRAP  PLAIN
#
# ACLs are enforced (StandardAuthorizer); a resource without ACLs is open to everyone, and
# the PLAINTEXT principal (User:ANONYMOUS) is a super user, so tests add DENY ACLs for the
# secured users only where they test authorization.
#
# Usage:
#   broker.sh install        resolve the jars once into ~/.cache/lakejoin (prints the dir)
#   broker.sh setup DIR      choose ports, make secrets and certificates, format storage
#                            (done by the first `start` too; a test that needs the address
#                            before the broker runs calls it first)
#   broker.sh start DIR      start the broker in DIR (setting it up first if needed); a
#                            later start on the same DIR keeps its ports, data and users
#   broker.sh stop DIR       stop it (SIGTERM, then SIGKILL after 30 s)
#
# `start` writes DIR/broker.env: the addresses above and KAFKA_TLS_DIR (ca.pem,
# client.pem, client.key and untrusted-ca.pem), KAFKA_CLIENT_KEY_PASSWORD,
# KAFKA_SCRAM_USER/PASSWORD and KAFKA_PLAIN_USER/PASSWORD, made fresh for each DIR, for
# the caller to source.

set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
POM="${SCRIPT_DIR}/pom.xml"
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "${POM}")"
CACHE_ROOT="${XDG_CACHE_HOME:-${HOME}/.cache}/lakejoin"
KAFKA_LIBS="${CACHE_ROOT}/kafka-${KAFKA_VERSION}/libs"

say() {
    printf '==> %s\n' "$*" >&2
}

die() {
    printf 'ERROR: %s\n' "$*" >&2
    exit 1
}

# Resolves the broker's jars (from scripts/kafka/pom.xml) once; the pom's hash stamps the
# install, so a version change installs afresh.
install_kafka() {
    local stamp="${KAFKA_LIBS}/.pom.sha256" wanted
    wanted="$(sha256sum "${POM}" | cut -d' ' -f1)"
    if [[ -f "${stamp}" && "$(cat "${stamp}")" == "${wanted}" ]]; then
        echo "${KAFKA_LIBS}"
        return
    fi
    command -v mvn >/dev/null || die "mvn is not installed (needed once to resolve Apache Kafka's jars)"
    say "Installing Apache Kafka ${KAFKA_VERSION} from Maven Central into ${KAFKA_LIBS} (once)"
    rm -rf "${KAFKA_LIBS}"
    mkdir -p "${KAFKA_LIBS}"
    mvn -q -B -f "${POM}" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="${KAFKA_LIBS}" >&2 \
        || die "mvn could not resolve Apache Kafka ${KAFKA_VERSION}"
    echo "${wanted}" > "${stamp}"
    echo "${KAFKA_LIBS}"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

random_secret() {
    openssl rand -hex 12
}

# A CA, the broker's certificate (for 127.0.0.1 and localhost), a client certificate with
# an encrypted key (mTLS), and a second CA that signed nothing (an untrusted store).
make_tls() {
    local tls="$1" key_password="$2"
    mkdir -p "${tls}"
    (
        cd "${tls}"
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=lakejoin test CA" \
            -keyout ca.key -out ca.pem 2>/dev/null
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=untrusted CA" \
            -keyout untrusted-ca.key -out untrusted-ca.pem 2>/dev/null
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > broker.ext
        openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
            -keyout broker.key -out broker.csr 2>/dev/null
        openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 \
            -extfile broker.ext -out broker.pem 2>/dev/null
        # Kafka's PEM key store: the private key (PKCS#8) and then the certificate.
        openssl pkcs8 -topk8 -nocrypt -in broker.key -out broker-pkcs8.key
        cat broker-pkcs8.key broker.pem > broker-keystore.pem
        openssl req -newkey rsa:2048 -nodes -subj "/CN=lakejoin" \
            -keyout client-plain.key -out client.csr 2>/dev/null
        openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 \
            -out client.pem 2>/dev/null
        openssl pkcs8 -topk8 -v2 aes-256-cbc -in client-plain.key -out client.key \
            -passout "pass:${key_password}"
        rm -f client-plain.key ./*.csr ./*.srl broker.ext broker.key broker-pkcs8.key
        chmod 600 ./*.key
    )
}

# Ports, secrets, certificates, server.properties and formatted KRaft storage: done once per
# DIR, so a restart keeps all of them.
set_up() {
    local dir="$1" libs="$2"
    mkdir -p "${dir}/data" "${dir}/logs"
    local plaintext ssl sasl_ssl sasl_plaintext controller
    plaintext="$(free_port)"
    ssl="$(free_port)"
    sasl_ssl="$(free_port)"
    sasl_plaintext="$(free_port)"
    controller="$(free_port)"
    local key_password scram_password plain_password
    key_password="$(random_secret)"
    scram_password="$(random_secret)"
    plain_password="$(random_secret)"
    make_tls "${dir}/tls" "${key_password}"

    cat > "${dir}/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${controller}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listeners=PLAINTEXT://127.0.0.1:${plaintext},SSL://127.0.0.1:${ssl},SASL_SSL://127.0.0.1:${sasl_ssl},SASL_PLAINTEXT://127.0.0.1:${sasl_plaintext},CONTROLLER://127.0.0.1:${controller}
advertised.listeners=PLAINTEXT://127.0.0.1:${plaintext},SSL://127.0.0.1:${ssl},SASL_SSL://127.0.0.1:${sasl_ssl},SASL_PLAINTEXT://127.0.0.1:${sasl_plaintext}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=${dir}/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# Tests delete topics and wait for consumers to notice; keep the deletion prompt.
delete.topic.enable=true

ssl.keystore.type=PEM
ssl.keystore.location=${dir}/tls/broker-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=${dir}/tls/ca.pem
listener.name.ssl.ssl.client.auth=required

listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_lakejoin="${plain_password}";

authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=true
super.users=User:ANONYMOUS
EOF

    cat > "${dir}/log4j2.properties" <<'EOF'
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
EOF

    local cluster_id
    cluster_id="$(java -cp "${libs}/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n1)"
    java -cp "${libs}/*" -Dlog4j2.configurationFile="${dir}/log4j2.properties" \
        kafka.tools.StorageTool format -t "${cluster_id}" -c "${dir}/server.properties" \
        --add-scram "SCRAM-SHA-512=[name=lakejoin,password=${scram_password}]" \
        >"${dir}/logs/format.log" 2>&1 \
        || die "formatting KRaft storage failed; see ${dir}/logs/format.log"

    cat > "${dir}/broker.env" <<EOF
export KAFKA_BOOTSTRAP=127.0.0.1:${plaintext}
export KAFKA_SSL_BOOTSTRAP=127.0.0.1:${ssl}
export KAFKA_SASL_SSL_BOOTSTRAP=127.0.0.1:${sasl_ssl}
export KAFKA_SASL_PLAINTEXT_BOOTSTRAP=127.0.0.1:${sasl_plaintext}
export KAFKA_TLS_DIR=${dir}/tls
export KAFKA_CLIENT_KEY_PASSWORD=${key_password}
export KAFKA_SCRAM_USER=lakejoin
export KAFKA_SCRAM_PASSWORD=${scram_password}
export KAFKA_PLAIN_USER=lakejoin
export KAFKA_PLAIN_PASSWORD=${plain_password}
export KAFKA_BROKER_DIR=${dir}
EOF
}

# Sets DIR up unless it already is; prints its absolute path.
ensure_set_up() {
    local dir="$1" libs="$2"
    mkdir -p "${dir}"
    dir="$(cd "${dir}" && pwd)"
    [[ -f "${dir}/broker.env" ]] || set_up "${dir}" "${libs}"
    echo "${dir}"
}

start_broker() {
    local dir="$1" libs
    libs="$(install_kafka)"
    dir="$(ensure_set_up "${dir}" "${libs}")"
    if [[ -f "${dir}/pid" ]] && kill -0 "$(cat "${dir}/pid")" 2>/dev/null; then
        die "a broker already runs in ${dir} (pid $(cat "${dir}/pid"))"
    fi

    local log_file="${dir}/logs/broker.log"
    local started_before=0
    [[ -f "${log_file}" ]] && started_before="$(grep -c 'Kafka Server started' "${log_file}" || true)"
    # setsid: the broker outlives a caller's process group (a test harness's Ctrl-C) only
    # until `stop`; its own group lets `stop` signal it alone.
    setsid java -Xms256m -Xmx768m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="${dir}/log4j2.properties" \
        -cp "${libs}/*" kafka.Kafka "${dir}/server.properties" >>"${log_file}" 2>&1 < /dev/null &
    local pid=$!
    echo "${pid}" > "${dir}/pid"

    local deadline=$((SECONDS + 120))
    # The background shell may not have created the log yet: no file counts as 0.
    until (( $(grep -c 'Kafka Server started' "${log_file}" 2>/dev/null || true) + 0 > started_before )); do
        kill -0 "${pid}" 2>/dev/null || die "the Kafka broker exited at start; see ${log_file}"
        (( SECONDS < deadline )) || die "the Kafka broker did not start within 120 s; see ${log_file}"
        sleep 0.2
    done
    say "Apache Kafka ${KAFKA_VERSION} started in ${dir} (pid ${pid}, log: ${log_file})"
}

stop_broker() {
    local dir="$1"
    [[ -f "${dir}/pid" ]] || return 0
    local pid
    pid="$(cat "${dir}/pid")"
    if kill -0 "${pid}" 2>/dev/null; then
        kill -TERM "${pid}" 2>/dev/null || true
        local deadline=$((SECONDS + 30))
        while kill -0 "${pid}" 2>/dev/null && (( SECONDS < deadline )); do
            sleep 0.2
        done
        kill -KILL "${pid}" 2>/dev/null || true
    fi
    rm -f "${dir}/pid"
}

case "${1:-}" in
    install) install_kafka ;;
    setup) [[ $# == 2 ]] || die "usage: broker.sh setup DIR"; ensure_set_up "$2" "$(install_kafka)" >/dev/null ;;
    start) [[ $# == 2 ]] || die "usage: broker.sh start DIR"; start_broker "$2" ;;
    stop) [[ $# == 2 ]] || die "usage: broker.sh stop DIR"; stop_broker "$2" ;;
    *) die "usage: broker.sh install | setup DIR | start DIR | stop DIR" ;;
esac
