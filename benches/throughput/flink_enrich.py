"""The throughput benchmark's Flink + Paimon case: the same enrich job lakejoin runs in
"lakejoin <cache> 1 join", written as Flink SQL (the stack lakejoin replaces), on the same
orders topic and the same Paimon table lakejoin wrote.

    orders (Kafka, JSON, earliest offsets; 10 fields)
      LEFT JOIN shop.customers FOR SYSTEM_TIME AS OF o.proc_time ON customer_id = id
      -> output (Kafka, JSON): the order's fields + customer_name, _email, _country,
         _region, _segment (nulls for an unknown customer)

--cache full sets 'lookup.cache' = 'FULL' (Paimon loads the whole table into a local
store first); --cache default leaves Paimon's default ('AUTO', which for a primary-key
join on a fixed-bucket table is PrimaryKeyPartialLookupTable: point lookups through local
lookup files). --parallelism 1 (the default) matches lakejoin's one pipeline task; 2 uses
both cores of the benchmark's machine. --async-lookup sets Paimon's 'lookup.async'. Object
reuse is on (Flink's own advice for throughput: no copy of each record between chained
operators).

PyFlink runs a local mini cluster in a JVM started by this Python process; the harness
counts the CPU and memory of both. Prints READY once the job runs, then runs until killed.
"""

import argparse
import sys
import time

from pyflink.common import Configuration, JobStatus
from pyflink.table import EnvironmentSettings, TableEnvironment


def sql_string(text):
    return "'" + text.replace("'", "''") + "'"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--orders", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--cache", required=True, choices=["full", "default"])
    parser.add_argument("--tmp-dir", required=True)
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("--async-lookup", action="store_true")
    args = parser.parse_args(argv)

    config = Configuration()
    config.set_string("parallelism.default", str(args.parallelism))
    config.set_string("pipeline.object-reuse", "true")
    config.set_string("io.tmp.dirs", args.tmp_dir)
    settings = (
        EnvironmentSettings.new_instance()
        .in_streaming_mode()
        .with_configuration(config)
        .build()
    )
    t_env = TableEnvironment.create(settings)
    t_env.execute_sql(
        f"""
        CREATE TABLE orders (
            order_id BIGINT,
            customer_id BIGINT,
            sku STRING,
            quantity BIGINT,
            unit_price DOUBLE,
            currency STRING,
            channel STRING,
            status STRING,
            shipping_city STRING,
            created_at BIGINT,
            proc_time AS PROCTIME()
        ) WITH (
            'connector' = 'kafka',
            'topic' = {sql_string(args.orders)},
            'properties.bootstrap.servers' = {sql_string(args.bootstrap)},
            'properties.group.id' = {sql_string(args.group)},
            'scan.startup.mode' = 'earliest-offset',
            'value.format' = 'json'
        )
        """
    )
    # Keyed by order_id like lakejoin's output; acks=all and lz4 like lakejoin's producer.
    t_env.execute_sql(
        f"""
        CREATE TABLE output (
            order_id BIGINT,
            customer_id BIGINT,
            sku STRING,
            quantity BIGINT,
            unit_price DOUBLE,
            currency STRING,
            channel STRING,
            status STRING,
            shipping_city STRING,
            created_at BIGINT,
            customer_name STRING,
            customer_email STRING,
            customer_country STRING,
            customer_region STRING,
            customer_segment STRING
        ) WITH (
            'connector' = 'kafka',
            'topic' = {sql_string(args.output)},
            'properties.bootstrap.servers' = {sql_string(args.bootstrap)},
            'properties.acks' = 'all',
            'properties.linger.ms' = '5',
            'properties.compression.type' = 'lz4',
            'sink.delivery-guarantee' = 'at-least-once',
            'key.format' = 'json',
            'key.fields' = 'order_id',
            'value.format' = 'json'
        )
        """
    )
    t_env.execute_sql(
        f"CREATE CATALOG paimon WITH ('type' = 'paimon', 'warehouse' = {sql_string(args.warehouse)})"
    )
    options = []
    if args.cache == "full":
        options.append("'lookup.cache' = 'FULL'")
    if args.async_lookup:
        options.append("'lookup.async' = 'true'")
    hint = f"/*+ OPTIONS({', '.join(options)}) */" if options else ""
    result = t_env.execute_sql(
        f"""
        INSERT INTO output
        SELECT o.order_id, o.customer_id, o.sku, o.quantity, o.unit_price, o.currency,
               o.channel, o.status, o.shipping_city, o.created_at,
               c.name, c.email, c.country, c.region, c.segment
        FROM orders AS o
        LEFT JOIN paimon.shop.customers {hint} FOR SYSTEM_TIME AS OF o.proc_time AS c
        ON o.customer_id = c.id
        """
    )
    client = result.get_job_client()
    if client is None:
        sys.exit("the INSERT did not submit a job")
    deadline = time.monotonic() + 180
    while True:
        status = client.get_job_status().result()
        if status == JobStatus.RUNNING:
            break
        if status.is_globally_terminal_state():
            sys.exit(f"the job ended before it ran: {status}")
        if time.monotonic() > deadline:
            sys.exit(f"the job was not running within 180 s (status {status})")
        time.sleep(0.1)
    print(f"READY {client.get_job_id()}", flush=True)
    result.wait()
    sys.exit("the job finished, but it reads an unbounded topic")


if __name__ == "__main__":
    main(sys.argv[1:])
