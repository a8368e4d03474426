#!/usr/bin/env bash
# Runs lakejoin on an embedded default with no external services: today a table
# round trip on a temporary local warehouse (the Kafka demo, `lakejoin demo`, comes with
# the pipelines).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/lakejoin
wh="$(mktemp -d)"
trap 'rm -rf "$wh"' EXIT
"$bin" table create --warehouse "$wh" --table shop.customers \
  --column id:INT --column name:STRING --column country:STRING --column seq:BIGINT \
  --primary-key id --buckets 2 --merge-engine partial-update --sequence-field seq
printf '%s\n' '{"id":1,"name":"ada","seq":1}' '{"id":2,"name":"bob","country":"ch","seq":1}' \
  | "$bin" table write --warehouse "$wh" --table shop.customers
echo '{"id":1,"country":"uk","seq":2}' | "$bin" table write --warehouse "$wh" --table shop.customers
# A late change (older sequence value) does not overwrite newer values.
echo '{"id":1,"name":"stale","seq":0}' | "$bin" table write --warehouse "$wh" --table shop.customers
echo "--- merged rows"
"$bin" table scan --warehouse "$wh" --table shop.customers
echo "--- snapshots"
"$bin" table snapshots --warehouse "$wh" --table shop.customers
