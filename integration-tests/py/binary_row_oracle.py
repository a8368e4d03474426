#!/usr/bin/env python3
"""pypaimon's view of BinaryRow bytes, bucket ids and partition directories.

Used by the Rust integration test `pypaimon_rows`: it reads a JSON spec of rows on stdin
and answers, for each row, with what pypaimon's own code computes. Deterministic: the
output depends only on the input (the Rust side generates the rows from a fixed seed).

Input:
    {"cases": [{"names": ["k0", ...], "types": ["INT", "DECIMAL(20, 2)", ...],
                "rows": [[value, ...], ...]}, ...]}
Values by type (null is null for every type):
    BOOLEAN: true/false; TINYINT/SMALLINT/INT/BIGINT: integer; DATE: epoch days;
    FLOAT / DOUBLE: IEEE-754 bit pattern as an unsigned integer (exact);
    DECIMAL(p, s): unscaled value as a decimal string;
    CHAR/VARCHAR/STRING: string; BINARY/VARBINARY/BYTES: hex string;
    TIMESTAMP(p) [WITH LOCAL TIME ZONE]: [epoch millis, nano of milli] (nanos in whole
    microseconds: Python datetimes cannot hold more).
Output (one JSON document):
    {"cases": [{"rows": [{"serialized": hex with arity prefix, "hash": signed int32,
                          "buckets": [bucket for 1..6 buckets], "path": "k0=v/.../"}
                         or {"error": "..."}, ...]}, ...]}
"""

import json
import struct
import os
import sys
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

from pypaimon.schema.data_types import AtomicType, DataField
from pypaimon.table.row.generic_row import GenericRow, GenericRowSerializer
from pypaimon.table.row.internal_row import RowKind
from pypaimon.utils.file_store_path_factory import FileStorePathFactory
from pypaimon.write.row_key_extractor import (
    RowKeyExtractor,
    _bucket_from_hash,
)

DEFAULT_PARTITION = "__DEFAULT_PARTITION__"
EPOCH = datetime(1970, 1, 1)


def _type_head(type_str):
    return type_str.upper().split("(", 1)[0].split()[0]


def to_python(value, type_str):
    """Converts one JSON value of the spec to the Python object pypaimon expects."""
    if value is None:
        return None
    head = _type_head(type_str)
    if head in ("BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT"):
        return value
    if head == "FLOAT":
        return struct.unpack("<f", struct.pack("<I", value))[0]
    if head == "DOUBLE":
        return struct.unpack("<d", struct.pack("<Q", value))[0]
    if head == "DECIMAL":
        scale = int(type_str.split("(", 1)[1].split(")", 1)[0].split(",")[1])
        unscaled = int(value)
        digits = tuple(int(d) for d in str(abs(unscaled)))
        return Decimal((1 if unscaled < 0 else 0, digits, -scale))
    if head in ("CHAR", "VARCHAR", "STRING"):
        return value
    if head in ("BINARY", "VARBINARY", "BYTES"):
        return bytes.fromhex(value)
    if head == "DATE":
        return date(1970, 1, 1) + timedelta(days=value)
    if head == "TIMESTAMP":
        millis, nanos = value
        if nanos % 1000 != 0:
            raise ValueError("pypaimon datetimes hold whole microseconds only")
        result = EPOCH + timedelta(milliseconds=millis, microseconds=nanos // 1000)
        if "WITH LOCAL TIME ZONE" in type_str.upper():
            # What pypaimon's readers hand out for TIMESTAMP_LTZ.
            result = result.replace(tzinfo=timezone.utc)
        return result
    raise ValueError("unsupported type " + type_str)


def to_signed32(h):
    return h - (1 << 32) if h >= 1 << 31 else h


def answer_case(case):
    names = case["names"]
    type_strs = case["types"]
    types = [AtomicType(t) for t in type_strs]
    fields = [DataField(i, name, t) for i, (name, t) in enumerate(zip(names, types))]
    path_factory = FileStorePathFactory(
        root="/oracle/table",
        partition_keys=names,
        default_part_value=DEFAULT_PARTITION,
        format_identifier="parquet",
        data_file_prefix="data-",
        changelog_file_prefix="changelog-",
        legacy_partition_name=True,
        file_suffix_include_compression=False,
        file_compression="zstd",
        partition_types=types,
    )
    answers = []
    for raw in case["rows"]:
        try:
            values = [to_python(v, t) for v, t in zip(raw, type_strs)]
            serialized = GenericRowSerializer.to_bytes(
                GenericRow(list(values), fields, RowKind.INSERT)
            )
            # Exactly what FixedBucketRowKeyExtractor does for a bucket key.
            hash_unsigned = RowKeyExtractor._binary_row_hash_code(tuple(values), fields)
            buckets = [_bucket_from_hash(hash_unsigned, n) for n in range(1, 7)]
            bucket_path = path_factory.relative_bucket_path(
                tuple(values), 0, canonical_partition=True
            )
            suffix = "bucket-0"
            if not bucket_path.endswith(suffix):
                raise ValueError("unexpected bucket path " + bucket_path)
            answers.append(
                {
                    "serialized": serialized.hex(),
                    "hash": to_signed32(hash_unsigned),
                    "buckets": buckets,
                    "path": bucket_path[: -len(suffix)],
                }
            )
        except Exception as e:  # reported per row, the Rust test fails on it
            answers.append({"error": "%s: %s" % (type(e).__name__, e)})
    return {"rows": answers}


def main():
    spec = json.load(sys.stdin)
    out = {"cases": [answer_case(case) for case in spec["cases"]]}
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    # Exit without interpreter finalisation: pyarrow's C++ thread pool can abort the
    # process while it is torn down ("terminate called without an active exception",
    # SIGABRT) after the work is done and printed.
    code = main() or 0
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
