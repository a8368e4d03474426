"""Flink's Avro formats reading the Avro records of lakejoin's `[[changelog]]`
pipelines: the reference reader for `format = "avro"` (integration-tests/
flink_avro_changelog.rs compares what Flink reads with the same table's `json`
changelog).

Why Flink: a user of the changes reads them with Flink's Kafka connector and its `avro`
format (plain Avro, the schema derived from the DDL, so lakejoin's bytes must be exactly
what Flink would write) or `avro-confluent` (Confluent-framed, the writer schema fetched
from the registry by the id in each record). Each topic is read from its earliest to its
latest offset (a bounded scan) with the key columns decoded from the record key:

    --topic NAME=TOPIC:FORMAT   FORMAT is `avro` or `avro-confluent` (with --registry)

Prints READY when the environment is up, then one line per record:
`NAME<TAB>[values as JSON]` in topic order, then DONE. Values: DECIMAL as its text
(`12.30`), TIMESTAMP as `YYYY-MM-DD HH:MM:SS[.fraction]` without trailing zeros, DATE as
`YYYY-MM-DD`, others as JSON numbers, strings and booleans.
"""

import argparse
import datetime
import decimal
import json
import sys

from flink_env import sql_string, streaming_table_environment


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--registry", help="the Confluent schema registry URL")
    parser.add_argument(
        "--columns", required=True, help="the DDL's columns, e.g. `id BIGINT NOT NULL, ...`"
    )
    parser.add_argument("--key", required=True, help="the key columns, comma-separated")
    parser.add_argument("--topic", action="append", required=True, help="NAME=TOPIC:FORMAT")
    parser.add_argument("--tmp-dir", help="Flink's io.tmp.dirs")
    return parser.parse_args(argv)


def plain(value):
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        if value.microsecond:
            text += ("." + f"{value.microsecond:06d}").rstrip("0")
        return text
    if isinstance(value, datetime.date):
        return value.isoformat()
    return value


def format_options(prefix, fmt, registry):
    options = {f"{prefix}.format": fmt}
    if fmt == "avro-confluent":
        if not registry:
            sys.exit("avro-confluent needs --registry")
        options[f"{prefix}.avro-confluent.url"] = registry
    return options


def main(argv):
    args = parse_args(argv)
    t_env = streaming_table_environment(args.tmp_dir)
    print("READY", flush=True)
    for i, spec in enumerate(args.topic):
        name, _, rest = spec.partition("=")
        topic, _, fmt = rest.rpartition(":")
        options = {
            "connector": "kafka",
            "topic": topic,
            "properties.bootstrap.servers": args.bootstrap,
            "properties.group.id": f"flink-avro-reader-{name}",
            "scan.startup.mode": "earliest-offset",
            "scan.bounded.mode": "latest-offset",
            "key.fields": ";".join(k.strip() for k in args.key.split(",")),
            # Plain Avro has no writer schema but the DDL's: the value must hold every
            # column. A registry's writer schema lets the value's key columns be skipped,
            # so the key columns come from the record key alone.
            "value.fields-include": "ALL" if fmt == "avro" else "EXCEPT_KEY",
        }
        options.update(format_options("key", fmt, args.registry))
        options.update(format_options("value", fmt, args.registry))
        with_clause = ",\n".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in options.items())
        table = f"changes_{i}"
        t_env.execute_sql(f"CREATE TABLE {table} ({args.columns}) WITH ({with_clause})")
        with t_env.execute_sql(f"SELECT * FROM {table}").collect() as rows:
            for row in rows:
                values = [plain(v) for v in row]
                print(f"{name}\t{json.dumps(values)}", flush=True)
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
