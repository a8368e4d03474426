#!/usr/bin/env python3
"""pypaimon oracle for lakejoin's integration tests.

The Rust tests run this script as a subprocess to create, write and read
Paimon tables with pypaimon, so that lakejoin is checked against the
reference Python implementation.

Subcommands (every one takes --warehouse URI --table db.t):

  create        create a primary-key table (same arguments as `lakejoin table create`)
  write         JSONL rows on stdin -> one batch commit
  read          print the rows as JSON lines, in `lakejoin table scan` encoding,
                sorted by primary key
  files         print the live data files of a snapshot, one JSON object per file
  snapshots     print the snapshots as pypaimon sees them
  bucket-check  recompute the bucket of every row of every live data file with
                pypaimon's own bucket function and report mismatches

Value encoding (input and output), per column type:
  BOOLEAN / integer types   JSON bool / number
  FLOAT                     number, printed as the shortest float32 repr
  DOUBLE                    number
  DECIMAL(p, s)             string with exactly s fractional digits
  STRING / CHAR / VARCHAR   string
  BYTES / BINARY            base64 string
  DATE                      "YYYY-MM-DD"
  TIMESTAMP(p)              "YYYY-MM-DD HH:MM:SS[.fraction]", trailing zeros trimmed
"""

import argparse
import base64
import datetime
import decimal
import json
import re
import os
import sys
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pypaimon import CatalogFactory, Schema
from pypaimon.manifest.manifest_file_manager import ManifestFileManager
from pypaimon.manifest.manifest_list_manager import ManifestListManager
from pypaimon.schema.data_types import DataField, DataTypeParser, PyarrowFieldParser
from pypaimon.utils.file_store_path_factory import canonical_data_file_path

EPOCH = datetime.datetime(1970, 1, 1)
UNITS_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
TIMESTAMP_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$")
DECIMAL_CONTEXT = decimal.Context(prec=100)


class OracleError(Exception):
    """A problem with the input; printed without a traceback."""


# --------------------------------------------------------------------------
# Column types


def normalize_type(type_text):
    """Upper-case a type and write DECIMAL(p,s) the way Paimon does: DECIMAL(p, s)."""
    text = type_text.strip().upper()
    return re.sub(r"\(\s*(\d+)\s*,\s*(\d+)\s*\)", r"(\1, \2)", text)


def base_type(type_text):
    """The type name without parameters or NOT NULL: 'DECIMAL(10, 2) NOT NULL' -> 'DECIMAL'."""
    return re.split(r"[ (]", type_text.strip().upper(), maxsplit=1)[0]


def decimal_scale(type_text):
    match = re.search(r"\(\s*\d+\s*,\s*(\d+)\s*\)", type_text)
    return int(match.group(1)) if match else 0


class Column:
    """One table column: its name, Paimon type text and Arrow type."""

    def __init__(self, field):
        self.name = field.name
        self.type_text = str(field.type)
        self.kind = base_type(self.type_text)
        if self.kind == "INTEGER":
            self.kind = "INT"
        self.arrow_type = PyarrowFieldParser.from_paimon_type(field.type)

    # JSON value -> Python value that pyarrow accepts for self.arrow_type
    def from_json(self, value):
        if value is None:
            return None
        kind = self.kind
        if kind == "BOOLEAN":
            if not isinstance(value, bool):
                raise OracleError(f"column {self.name}: expected a boolean, got {value!r}")
            return value
        if kind in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
            if isinstance(value, bool) or not isinstance(value, int):
                raise OracleError(f"column {self.name}: expected an integer, got {value!r}")
            return value
        if kind in ("FLOAT", "DOUBLE"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise OracleError(f"column {self.name}: expected a number, got {value!r}")
            return float(value)
        if kind == "DECIMAL":
            text = value if isinstance(value, str) else repr(value)
            try:
                return decimal.Decimal(text)
            except decimal.InvalidOperation:
                raise OracleError(f"column {self.name}: not a decimal: {value!r}")
        if kind in ("STRING", "CHAR", "VARCHAR"):
            if not isinstance(value, str):
                raise OracleError(f"column {self.name}: expected a string, got {value!r}")
            return value
        if kind in ("BYTES", "BINARY", "VARBINARY"):
            return base64.b64decode(value, validate=True)
        if kind == "DATE":
            return datetime.date.fromisoformat(value)
        if kind == "TIMESTAMP":
            return parse_timestamp(value, self.arrow_type.unit, self.name)
        raise OracleError(f"column {self.name}: unsupported type {self.type_text}")

    # Arrow column -> list of JSON values
    def to_json_list(self, array):
        kind = self.kind
        if kind == "TIMESTAMP":
            unit = self.arrow_type.unit
            raw = array.cast(pa.int64()).to_pylist()
            return [None if v is None else format_timestamp(v, unit) for v in raw]
        values = array.to_pylist()
        if kind == "FLOAT":
            return [None if v is None else float(str(np.float32(v))) for v in values]
        if kind == "DECIMAL":
            scale = decimal_scale(self.type_text)
            return [None if v is None else format_decimal(v, scale) for v in values]
        if kind in ("BYTES", "BINARY", "VARBINARY"):
            return [None if v is None else base64.b64encode(v).decode("ascii") for v in values]
        if kind == "DATE":
            return [None if v is None else v.isoformat() for v in values]
        return values

    # --where literal text -> Python value for predicates and comparisons
    def parse_literal(self, text):
        kind = self.kind
        if kind in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
            return int(text)
        if kind == "BOOLEAN":
            return text.lower() == "true"
        if kind in ("FLOAT", "DOUBLE"):
            return float(text)
        if kind == "DECIMAL":
            return decimal.Decimal(text)
        if kind == "DATE":
            return datetime.date.fromisoformat(text)
        if kind in ("STRING", "CHAR", "VARCHAR"):
            return text
        raise OracleError(f"--where on a {self.type_text} column is not supported")


def parse_timestamp(text, unit, column):
    """'YYYY-MM-DD HH:MM:SS[.fff]' -> integer count of `unit` since the epoch."""
    match = TIMESTAMP_RE.match(text) if isinstance(text, str) else None
    if not match:
        raise OracleError(f"column {column}: not a timestamp: {text!r}")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction = match.group(7) or ""
    moment = datetime.datetime(year, month, day, hour, minute, second)
    delta = moment - EPOCH
    seconds = delta.days * 86400 + delta.seconds
    per_second = UNITS_PER_SECOND[unit]
    digits = len(str(per_second)) - 1
    if len(fraction) > digits and int(fraction[digits:]) != 0:
        raise OracleError(f"column {column}: {text!r} has more precision than the column")
    fraction_units = int((fraction + "0" * digits)[:digits]) if digits else 0
    return seconds * per_second + fraction_units


def format_timestamp(value, unit):
    """Integer count of `unit` since the epoch -> 'YYYY-MM-DD HH:MM:SS[.fraction]'."""
    per_second = UNITS_PER_SECOND[unit]
    seconds, fraction = divmod(value, per_second)
    moment = EPOCH + datetime.timedelta(seconds=seconds)
    text = (f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d} "
            f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}")
    if fraction:
        digits = len(str(per_second)) - 1
        text += "." + str(fraction).rjust(digits, "0").rstrip("0")
    return text


def format_decimal(value, scale):
    exponent = decimal.Decimal(1).scaleb(-scale)
    return format(value.quantize(exponent, context=DECIMAL_CONTEXT), "f")


# --------------------------------------------------------------------------
# Catalog and tables


def warehouse_path(uri):
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return parsed.path
    if parsed.scheme == "":
        return uri
    raise OracleError(f"unsupported warehouse URI {uri!r}")


def open_catalog(args):
    return CatalogFactory.create({"warehouse": warehouse_path(args.warehouse)})


def open_table(args):
    table = open_catalog(args).get_table(args.table)
    snapshot = getattr(args, "snapshot", None)
    if snapshot is not None:
        table = table.copy({"scan.snapshot-id": str(snapshot)})
    return table


def table_columns(table):
    return [Column(field) for field in table.table_schema.fields]


def comma_list(values):
    """['a,b', 'c'] -> ['a', 'b', 'c']"""
    result = []
    for value in values or []:
        result.extend(part.strip() for part in value.split(",") if part.strip())
    return result


def sort_key_function(table, columns):
    positions = [[c.name for c in columns].index(name) for name in table.table_schema.primary_keys]

    def key(values):
        return tuple(values[i] for i in positions)

    return key


# --------------------------------------------------------------------------
# Subcommands


def cmd_create(args):
    fields = []
    for index, spec in enumerate(args.column):
        name, sep, type_text = spec.partition(":")
        if not sep or not name or not type_text:
            raise OracleError(f"--column must be name:TYPE, got {spec!r}")
        data_type = DataTypeParser.parse_data_type(normalize_type(type_text))
        fields.append(DataField(index, name.strip(), data_type))
    options = {"bucket": str(args.buckets)}
    if args.merge_engine:
        options["merge-engine"] = args.merge_engine
    sequence_fields = comma_list(args.sequence_field)
    if sequence_fields:
        options["sequence.field"] = ",".join(sequence_fields)
    for option in args.option or []:
        key, sep, value = option.partition("=")
        if not sep:
            raise OracleError(f"--option must be key=value, got {option!r}")
        options[key] = value
    schema = Schema(
        fields,
        partition_keys=comma_list(args.partition_by),
        primary_keys=comma_list(args.primary_key),
        options=options,
    )
    catalog = open_catalog(args)
    database = args.table.split(".")[0]
    catalog.create_database(database, True)
    catalog.create_table(args.table, schema, False)


def cmd_write(args):
    table = open_table(args)
    columns = table_columns(table)
    names = [c.name for c in columns]
    rows = []
    for line_number, line in enumerate(sys.stdin, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise OracleError(f"line {line_number}: malformed JSON: {error}")
        unknown = sorted(set(record) - set(names))
        if unknown:
            raise OracleError(f"line {line_number}: unknown column(s) {unknown}")
        try:
            rows.append({c.name: c.from_json(record.get(c.name)) for c in columns})
        except (OracleError, ValueError) as error:
            raise OracleError(f"line {line_number}: {error}")

    arrow_schema = PyarrowFieldParser.from_paimon_schema(table.table_schema.fields)
    data = pa.Table.from_pylist(rows, schema=arrow_schema)
    write_builder = table.new_batch_write_builder()
    writer = write_builder.new_write()
    committer = write_builder.new_commit()
    try:
        writer.write_arrow(data)
        committer.commit(writer.prepare_commit())
    finally:
        writer.close()
        committer.close()


def cmd_read(args):
    table = open_table(args)
    columns = table_columns(table)
    by_name = {c.name: c for c in columns}
    read_builder = table.new_read_builder()

    where_column = None
    where_value = None
    if args.where:
        name, sep, text = args.where.partition("=")
        if not sep or name not in by_name:
            raise OracleError(f"--where must be column=value with a table column, got {args.where!r}")
        where_column = by_name[name]
        where_value = where_column.parse_literal(text)
        predicate = read_builder.new_predicate_builder().equal(name, where_value)
        read_builder = read_builder.with_filter(predicate)

    splits = read_builder.new_scan().plan().splits()
    result = read_builder.new_read().to_arrow(splits)

    # Python values for sorting and filtering; JSON values for printing.
    python_columns = [result.column(c.name).to_pylist() for c in columns]
    json_columns = [c.to_json_list(result.column(c.name)) for c in columns]
    rows = []
    for i in range(result.num_rows):
        python_values = [column[i] for column in python_columns]
        json_values = [column[i] for column in json_columns]
        rows.append((python_values, json_values))

    if where_column is not None:
        # The filter above prunes files; rows of other keys in kept files may remain.
        position = columns.index(where_column)
        rows = [row for row in rows if row[0][position] == where_value]

    key = sort_key_function(table, columns)
    rows.sort(key=lambda row: key(row[0]))
    for _, json_values in rows:
        record = {c.name: v for c, v in zip(columns, json_values)}
        print(json.dumps(record, ensure_ascii=False))


def resolve_snapshot(table, snapshot_id):
    manager = table.snapshot_manager()
    if snapshot_id is None:
        return manager.get_latest_snapshot()
    return manager.get_snapshot_by_id(snapshot_id)


def live_entries(table, snapshot_id):
    """The live (added and not deleted) manifest entries of a snapshot."""
    snapshot = resolve_snapshot(table, snapshot_id)
    if snapshot is None:
        return []
    manifests = ManifestListManager(table).read_all(snapshot)
    return ManifestFileManager(table).read_entries_parallel(manifests, drop_stats=False)


def row_to_json(row, columns):
    """A pypaimon GenericRow (partition, key) -> {column: JSON value}."""
    result = {}
    for column, value in zip(columns, row.values):
        array = pa.array([value], type=column.arrow_type)
        result[column.name] = column.to_json_list(array)[0]
    return result


def entry_columns(table):
    by_name = {c.name: c for c in table_columns(table)}
    schema = table.table_schema
    partition_columns = [by_name[name] for name in schema.partition_keys]
    key_columns = [by_name[name] for name in schema.primary_keys if name not in schema.partition_keys]
    return partition_columns, key_columns


def data_file_path(table, entry):
    if entry.file.external_path:
        return entry.file.external_path
    return canonical_data_file_path(table, tuple(entry.partition.values), entry.bucket, entry.file.file_name)


def local_path(path):
    return urlparse(path).path if path.startswith("file:") else path


def physical_facts(path, key_columns):
    """What the data file itself holds, to compare with its manifest entry."""
    data = pq.ParquetFile(local_path(path)).read()
    kinds = data.column("_VALUE_KIND").to_pylist()
    sequence_numbers = data.column("_SEQUENCE_NUMBER").to_pylist()
    key_values = [data.column(c.name).to_pylist() for c in key_columns]
    keys = list(zip(*key_values)) if key_columns else [() for _ in kinds]
    key_columns_match = all(
        f"_KEY_{c.name}" in data.column_names
        and data.column(f"_KEY_{c.name}").to_pylist() == values
        for c, values in zip(key_columns, key_values))

    def key_json(index):
        return {c.name: c.to_json_list(data.column(c.name).slice(index, 1))[0] for c in key_columns}

    return {
        "physicalRowCount": data.num_rows,
        "retractRowCount": sum(1 for kind in kinds if kind in (1, 3)),
        "physicalMinSequenceNumber": min(sequence_numbers) if sequence_numbers else None,
        "physicalMaxSequenceNumber": max(sequence_numbers) if sequence_numbers else None,
        "sortedUniqueKeys": all(a < b for a, b in zip(keys, keys[1:])),
        "keyColumnsMatch": key_columns_match,
        "firstKey": key_json(0) if data.num_rows else None,
        "lastKey": key_json(data.num_rows - 1) if data.num_rows else None,
    }


def cmd_files(args):
    table = open_table(args)
    partition_columns, key_columns = entry_columns(table)
    entries = live_entries(table, args.snapshot)
    records = []
    for entry in entries:
        meta = entry.file
        path = data_file_path(table, entry)
        record = {
            "partition": row_to_json(entry.partition, partition_columns),
            "bucket": entry.bucket,
            "totalBuckets": entry.total_buckets,
            "fileName": meta.file_name,
            "path": path,
            "level": meta.level,
            "rowCount": meta.row_count,
            "deleteRowCount": meta.delete_row_count,
            "fileSource": meta.file_source,
            "minSequenceNumber": meta.min_sequence_number,
            "maxSequenceNumber": meta.max_sequence_number,
            "schemaId": meta.schema_id,
            "minKey": row_to_json(meta.min_key, key_columns),
            "maxKey": row_to_json(meta.max_key, key_columns),
        }
        record.update(physical_facts(path, key_columns))
        records.append(record)
    records.sort(key=lambda r: (json.dumps(r["partition"]), r["bucket"], r["level"], r["fileName"]))
    for record in records:
        print(json.dumps(record, ensure_ascii=False))


def cmd_snapshots(args):
    table = open_table(args)
    manager = table.snapshot_manager()
    latest = manager.get_latest_snapshot()
    if latest is None:
        return
    for snapshot_id in range(1, latest.id + 1):
        snapshot = manager.get_snapshot_by_id(snapshot_id)
        if snapshot is None:
            continue
        print(json.dumps({
            "id": snapshot.id,
            "schemaId": snapshot.schema_id,
            "commitUser": snapshot.commit_user,
            "commitIdentifier": snapshot.commit_identifier,
            "commitKind": snapshot.commit_kind,
            "totalRecordCount": snapshot.total_record_count,
            "deltaRecordCount": snapshot.delta_record_count,
            "timeMillis": snapshot.time_millis,
            "properties": snapshot.properties or {},
        }))


def cmd_bucket_check(args):
    """Check every row of every live data file against pypaimon's bucket function."""
    table = open_table(args)
    partition_columns, key_columns = entry_columns(table)
    extractor = table.create_row_key_extractor()
    bucket_key_names = table.table_schema.bucket_keys
    checked_files = []
    rows = 0
    mismatches = []
    for entry in live_entries(table, None):
        path = data_file_path(table, entry)
        file_data = pq.ParquetFile(local_path(path)).read()
        if entry.total_buckets != extractor.num_buckets:
            mismatches.append({"file": entry.file.file_name,
                               "problem": f"_TOTAL_BUCKETS={entry.total_buckets}, "
                                          f"table has {extractor.num_buckets} buckets"})
        batch = file_data.combine_chunks().to_batches()
        for record_batch in batch:
            expected = extractor._extract_buckets_batch(record_batch)
            keys = record_batch.select(bucket_key_names).to_pylist()
            for key, bucket in zip(keys, expected):
                rows += 1
                if bucket != entry.bucket:
                    mismatches.append({
                        "file": entry.file.file_name,
                        "partition": row_to_json(entry.partition, partition_columns),
                        "fileBucket": entry.bucket,
                        "expectedBucket": bucket,
                        "key": {k: str(v) for k, v in key.items()},
                    })
        checked_files.append(entry.file.file_name)
    print(json.dumps({"files": sorted(checked_files), "rows": rows, "mismatches": mismatches}))


# --------------------------------------------------------------------------
# Command line


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def table_command(name, help_text):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("--warehouse", required=True)
        command.add_argument("--table", required=True)
        return command

    create = table_command("create", "create a primary-key table")
    create.add_argument("--column", action="append", required=True)
    create.add_argument("--primary-key", action="append", required=True)
    create.add_argument("--partition-by", action="append")
    create.add_argument("--buckets", type=int, required=True)
    create.add_argument("--merge-engine")
    create.add_argument("--sequence-field", action="append")
    create.add_argument("--option", action="append")
    create.set_defaults(run=cmd_create)

    write = table_command("write", "write JSONL rows from stdin in one commit")
    write.set_defaults(run=cmd_write)

    read = table_command("read", "print the merged rows as JSON lines")
    read.add_argument("--snapshot", type=int)
    read.add_argument("--where")
    read.set_defaults(run=cmd_read)

    files = table_command("files", "print the live data files")
    files.add_argument("--snapshot", type=int)
    files.set_defaults(run=cmd_files)

    snapshots = table_command("snapshots", "print the snapshots")
    snapshots.set_defaults(run=cmd_snapshots)

    bucket_check = table_command("bucket-check", "check the bucket of every stored row")
    bucket_check.set_defaults(run=cmd_bucket_check)
    return parser


def main():
    args = build_parser().parse_args()
    try:
        args.run(args)
    except OracleError as error:
        print(f"oracle: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    # Exit without interpreter finalisation: pyarrow's C++ thread pool can abort the
    # process while it is torn down ("terminate called without an active exception",
    # SIGABRT) after the work is done and printed.
    code = main() or 0
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
