"""pypaimon side of the merge-engine cross-check (integration-tests/pypaimon_engines.rs).

Usage:
  engines_oracle.py read WAREHOUSE TABLE
      Prints the merged rows of TABLE (merge-on-read by pypaimon) as a JSON list, in
      primary-key order. DECIMAL values are printed as strings, like `lakejoin table scan`.
  engines_oracle.py write WAREHOUSE TABLE
      Reads {"columns": [[name, type], ...], "primary_keys": [...], "options": {...},
      "commits": [[row, ...], ...]} from stdin, creates TABLE with pypaimon and writes
      each commit with its own batch write. Types: INT, BIGINT, DOUBLE, STRING, BOOLEAN,
      DECIMAL(p,s) (values as strings).
"""

import decimal
import json
import re
import os
import sys

import pyarrow as pa
from pypaimon import CatalogFactory, Schema


def arrow_type(name):
    simple = {
        "INT": pa.int32(),
        "BIGINT": pa.int64(),
        "DOUBLE": pa.float64(),
        "STRING": pa.string(),
        "BOOLEAN": pa.bool_(),
    }
    if name in simple:
        return simple[name]
    m = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", name)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    raise SystemExit("unsupported type " + name)


def plain(value):
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value


def read(warehouse, identifier):
    table = CatalogFactory.create({"warehouse": warehouse}).get_table(identifier)
    builder = table.new_read_builder()
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    keys = [(k, "ascending") for k in table.primary_keys]
    if rows.num_rows:
        rows = rows.sort_by(keys)
    out = [{k: plain(v) for k, v in row.items()} for row in rows.to_pylist()]
    print(json.dumps(out))


def write(warehouse, identifier):
    spec = json.load(sys.stdin)
    pk = spec["primary_keys"]
    fields = [
        pa.field(name, arrow_type(ty), nullable=name not in pk)
        for name, ty in spec["columns"]
    ]
    pa_schema = pa.schema(fields)
    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database(identifier.split(".")[0], True)
    schema = Schema.from_pyarrow_schema(
        pa_schema, primary_keys=pk, options=spec["options"]
    )
    catalog.create_table(identifier, schema, False)
    table = catalog.get_table(identifier)
    for rows in spec["commits"]:
        columns = {}
        for f in fields:
            values = [row.get(f.name) for row in rows]
            if pa.types.is_decimal(f.type):
                values = [None if v is None else decimal.Decimal(v) for v in values]
            columns[f.name] = pa.array(values, type=f.type)
        data = pa.Table.from_pydict(columns, schema=pa_schema)
        builder = table.new_batch_write_builder()
        writer = builder.new_write()
        commit = builder.new_commit()
        writer.write_arrow(data)
        commit.commit(writer.prepare_commit())
        writer.close()
        commit.close()


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("read", "write"):
        raise SystemExit(__doc__)
    command, warehouse, identifier = sys.argv[1:]
    if command == "read":
        read(warehouse, identifier)
    else:
        write(warehouse, identifier)


if __name__ == "__main__":
    # Exit without interpreter finalisation: pyarrow's C++ thread pool can abort the
    # process while it is torn down ("terminate called without an active exception",
    # SIGABRT) after the work is done and printed.
    code = main() or 0
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
