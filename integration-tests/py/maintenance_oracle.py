#!/usr/bin/env python3
"""pypaimon side of lakejoin's maintenance integration tests (compaction, expiry).

Subcommands, each taking --warehouse DIR --table db.t:

  create     create the test table: k INT NOT NULL (primary key), v BIGINT, s STRING,
             --buckets N, extra --option key=value
  write      JSON lines {"k":..,"v":..,"s":..} on stdin -> one pypaimon batch commit
  read       print the merged rows as one JSON list sorted by k (--snapshot N: time travel)
  files      print the live data files of the latest snapshot as one JSON list
  snapshots  print the snapshot ids pypaimon can load as one JSON list

Errors go to stderr with exit status 2.
"""

import argparse
import json
import os
import sys

import pyarrow as pa

from pypaimon import CatalogFactory, Schema
from pypaimon.manifest.manifest_file_manager import ManifestFileManager
from pypaimon.manifest.manifest_list_manager import ManifestListManager


def catalog(args):
    return CatalogFactory.create({"warehouse": args.warehouse})


def table(args):
    t = catalog(args).get_table(args.table)
    if getattr(args, "snapshot", None) is not None:
        t = t.copy({"scan.snapshot-id": str(args.snapshot)})
    return t


def cmd_create(args):
    options = {"bucket": str(args.buckets)}
    for option in args.option or []:
        key, sep, value = option.partition("=")
        if not sep:
            raise SystemExit(f"--option must be key=value, got {option!r}")
        options[key] = value
    fields = pa.schema([
        pa.field("k", pa.int32(), nullable=False),
        pa.field("v", pa.int64()),
        pa.field("s", pa.string()),
    ])
    schema = Schema.from_pyarrow_schema(fields, primary_keys=["k"], options=options)
    c = catalog(args)
    c.create_database(args.table.split(".")[0], True)
    c.create_table(args.table, schema, False)


def cmd_write(args):
    t = table(args)
    rows = [json.loads(line) for line in sys.stdin if line.strip()]
    data = pa.Table.from_pylist(
        [{"k": r["k"], "v": r.get("v"), "s": r.get("s")} for r in rows],
        schema=pa.schema([
            pa.field("k", pa.int32(), nullable=False),
            pa.field("v", pa.int64()),
            pa.field("s", pa.string()),
        ]),
    )
    builder = t.new_batch_write_builder()
    writer = builder.new_write()
    committer = builder.new_commit()
    try:
        writer.write_arrow(data)
        committer.commit(writer.prepare_commit())
    finally:
        writer.close()
        committer.close()


def cmd_read(args):
    t = table(args)
    builder = t.new_read_builder()
    result = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    rows = result.select(["k", "v", "s"]).to_pylist()
    rows.sort(key=lambda r: r["k"])
    print(json.dumps(rows))


def cmd_files(args):
    t = table(args)
    snapshot = t.snapshot_manager().get_latest_snapshot()
    if snapshot is None:
        print("[]")
        return
    manifests = ManifestListManager(t).read_all(snapshot)
    entries = ManifestFileManager(t).read_entries_parallel(manifests, drop_stats=False)
    files = [{
        "bucket": e.bucket,
        "level": e.file.level,
        "file": e.file.file_name,
        "rows": e.file.row_count,
        "deleteRows": e.file.delete_row_count,
    } for e in entries]
    files.sort(key=lambda f: (f["bucket"], f["level"], f["file"]))
    print(json.dumps(files))


def cmd_snapshots(args):
    manager = table(args).snapshot_manager()
    latest = manager.get_latest_snapshot()
    ids = []
    if latest is not None:
        for i in range(1, latest.id + 1):
            try:
                if manager.get_snapshot_by_id(i) is not None:
                    ids.append(i)
            except Exception:  # expired snapshot files are simply absent
                pass
    print(json.dumps(ids))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name, run):
        p = sub.add_parser(name)
        p.add_argument("--warehouse", required=True)
        p.add_argument("--table", required=True)
        p.set_defaults(run=run)
        return p

    create = command("create", cmd_create)
    create.add_argument("--buckets", type=int, required=True)
    create.add_argument("--option", action="append")
    command("write", cmd_write)
    read = command("read", cmd_read)
    read.add_argument("--snapshot", type=int)
    command("files", cmd_files)
    command("snapshots", cmd_snapshots)
    args = parser.parse_args()
    try:
        args.run(args)
    except Exception as error:  # report, do not hide
        print(f"maintenance_oracle: {type(error).__name__}: {error}", file=sys.stderr)
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
