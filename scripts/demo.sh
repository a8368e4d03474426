#!/usr/bin/env bash
# Runs lakejoin's main job on an embedded default with no external services:
# `lakejoin demo` starts librdkafka's in-process mock Kafka cluster and a temporary
# warehouse, generates customer CDC (Debezium JSON) and orders, runs the CDC and
# enrichment pipelines, and prints the enriched orders. Pass e.g. `--duration 1m`.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --release --quiet -- demo "$@"
