"""Flink's own lookup join on a Paimon table that lakejoin writes: the reference answer
for lakejoin's enrich pipelines (integration-tests/flink_lookup.rs compares the two).

Why Flink: Flink with Paimon's connector is the stack lakejoin replaces, so the rows its
lookup join emits for the same facts and the same table are what lakejoin must emit. The
job runs in a local mini cluster inside this Python process (PyFlink, installed by
scripts/flink.sh with the Kafka and Paimon connector jars in PyFlink's lib/), in
streaming mode, until it is killed:

    orders (Kafka, JSON, from the earliest offsets)
      LEFT JOIN customers FOR SYSTEM_TIME AS OF o.proc_time (Paimon filesystem catalog)
      -> output (Kafka, JSON)

--cache picks Paimon's lookup table: `full` sets 'lookup.cache'='FULL' (the whole table
in a local store, FullCacheLookupTable -> PrimaryKeyLookupTable for a join on the
primary key); `partial` sets 'lookup.cache'='AUTO', for which Paimon 1.4's
FileStoreLookupFunction picks PrimaryKeyPartialLookupTable (point lookups through local
lookup files) when the join keys are the primary key and the table has fixed buckets and
no sequence field, as lakejoin's test table does. 'continuous.discovery-interval' is
1 ms, so every lookup first moves to the newest snapshot: an order read after a snapshot
was committed sees that snapshot, without sleeping.

Prints READY on stdout (flushed) once the job runs; Flink's own logs go to FLINK_LOG_DIR.
"""

import argparse
import sys
import time

from pyflink.common import JobStatus

from flink_env import identifier, sql_string, streaming_table_environment

CACHE_MODES = {"full": "FULL", "partial": "AUTO"}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    parser.add_argument(
        "--warehouse", required=True, help="Paimon warehouse (path or file:// URI)"
    )
    parser.add_argument("--database", required=True, help="database of the customers table")
    parser.add_argument(
        "--table", default="customers", help="the dimension table (default customers)"
    )
    parser.add_argument("--orders", required=True, help="topic of the facts")
    parser.add_argument("--output", required=True, help="topic the joined rows go to")
    parser.add_argument("--cache", required=True, choices=sorted(CACHE_MODES))
    parser.add_argument("--group", default="flink-lookup-join", help="Kafka consumer group id")
    parser.add_argument("--tmp-dir", help="Flink's io.tmp.dirs (Paimon's local lookup files)")
    return parser.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    t_env = streaming_table_environment(args.tmp_dir)

    t_env.execute_sql(
        f"""
        CREATE TABLE orders (
            order_id BIGINT,
            customer_id INT,
            total DOUBLE,
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
    t_env.execute_sql(
        f"""
        CREATE TABLE output (
            order_id BIGINT,
            total DOUBLE,
            country STRING,
            zip STRING
        ) WITH (
            'connector' = 'kafka',
            'topic' = {sql_string(args.output)},
            'properties.bootstrap.servers' = {sql_string(args.bootstrap)},
            'sink.delivery-guarantee' = 'at-least-once',
            'value.format' = 'json'
        )
        """
    )
    t_env.execute_sql(
        f"""
        CREATE CATALOG paimon WITH (
            'type' = 'paimon',
            'warehouse' = {sql_string(args.warehouse)}
        )
        """
    )

    customers = f"paimon.{identifier(args.database)}.{identifier(args.table)}"
    hint = (
        f"/*+ OPTIONS('lookup.cache' = '{CACHE_MODES[args.cache]}', "
        "'continuous.discovery-interval' = '1 ms') */"
    )
    # The seeds' query; the dimension named through the catalog, with the options hint.
    query = f"""
        SELECT o.order_id, o.total, c.country, c.zip FROM orders AS o
        LEFT JOIN {customers} {hint} FOR SYSTEM_TIME AS OF o.proc_time AS c
        ON o.customer_id = c.id
    """
    result = t_env.execute_sql(f"INSERT INTO output {query}")

    client = result.get_job_client()
    if client is None:
        sys.exit("the INSERT did not submit a job")
    deadline = time.monotonic() + 120
    while True:
        status = client.get_job_status().result()
        if status == JobStatus.RUNNING:
            break
        if status.is_globally_terminal_state():
            sys.exit(f"the job ended before it ran: {status}")
        if time.monotonic() > deadline:
            sys.exit(f"the job was not running within 120 s (status {status})")
        time.sleep(0.1)
    print(f"READY {client.get_job_id()}", flush=True)
    # Until killed; a failing job raises here, and the process exits non-zero.
    result.wait()
    sys.exit("the job finished, but it reads an unbounded topic")


if __name__ == "__main__":
    main(sys.argv[1:])
