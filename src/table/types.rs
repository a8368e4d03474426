//! Paimon data types: parsing and printing the type strings of schema files, and the
//! Arrow type each maps to (as pypaimon writes and reads them).

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType as ArrowType, TimeUnit};

use crate::error::{Error, Result};

/// Length Paimon uses for `STRING` (= `VARCHAR(2147483647)`) and `BYTES`.
pub const MAX_LENGTH: u32 = i32::MAX as u32;

/// A Paimon atomic type (without nullability).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Boolean,
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    Float,
    Double,
    /// `DECIMAL(precision, scale)`, precision 1..=38.
    Decimal {
        precision: u8,
        scale: u8,
    },
    /// `CHAR(n)`.
    Char(u32),
    /// `VARCHAR(n)`; `STRING` is `VARCHAR(2147483647)`.
    Varchar(u32),
    /// `BINARY(n)`.
    Binary(u32),
    /// `VARBINARY(n)`; `BYTES` is `VARBINARY(2147483647)`.
    Varbinary(u32),
    /// Days since 1970-01-01.
    Date,
    /// `TIMESTAMP(p)` without time zone, precision 0..=9.
    Timestamp(u8),
    /// `TIMESTAMP(p) WITH LOCAL TIME ZONE`, read from other writers' tables.
    TimestampLtz(u8),
}

impl DataType {
    /// Parses a type string of a schema file, e.g. `"DECIMAL(10, 2) NOT NULL"`.
    /// Returns the type and whether it is nullable.
    pub(crate) fn parse(text: &str) -> Result<(DataType, bool)> {
        let trimmed = text.trim();
        let upper = trimmed.to_ascii_uppercase();
        let (base, nullable) = match upper.strip_suffix("NOT NULL") {
            Some(rest) => (rest.trim_end().to_string(), false),
            None => (upper.clone(), true),
        };
        let base = base
            .strip_suffix(" NULL")
            .unwrap_or(&base)
            .trim()
            .to_string();
        let (name, args) = match base.find('(') {
            Some(open) => {
                // A `)` before the `(` (`INT)(`) is as unbalanced as none at all.
                let close = base.rfind(')').filter(|&c| c > open).ok_or_else(|| {
                    Error::Data(format!("unbalanced parenthesis in type `{text}`"))
                })?;
                let args: Vec<String> = base[open + 1..close]
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .collect();
                let suffix = base[close + 1..].trim().to_string();
                (
                    format!(
                        "{}{}",
                        base[..open].trim(),
                        if suffix.is_empty() {
                            String::new()
                        } else {
                            format!(" {suffix}")
                        }
                    ),
                    args,
                )
            }
            None => (base.clone(), Vec::new()),
        };
        let arg = |i: usize, default: u32| -> Result<u32> {
            match args.get(i) {
                None => Ok(default),
                Some(s) => s
                    .parse::<u32>()
                    .map_err(|_| Error::Data(format!("bad type parameter `{s}` in `{text}`"))),
            }
        };
        let precision = |max: u32, default: u32| -> Result<u8> {
            let p = arg(0, default)?;
            if p > max {
                return Err(Error::Data(format!(
                    "precision {p} out of range in `{text}`"
                )));
            }
            Ok(p as u8)
        };
        let data_type = match name.as_str() {
            "BOOLEAN" => DataType::Boolean,
            "TINYINT" => DataType::TinyInt,
            "SMALLINT" => DataType::SmallInt,
            "INT" | "INTEGER" => DataType::Int,
            "BIGINT" => DataType::BigInt,
            "FLOAT" => DataType::Float,
            "DOUBLE" | "DOUBLE PRECISION" => DataType::Double,
            "DECIMAL" | "NUMERIC" | "DEC" => {
                let p = arg(0, 10)?;
                let s = arg(1, 0)?;
                if !(1..=38).contains(&p) || s > p {
                    return Err(Error::Data(format!(
                        "bad DECIMAL precision/scale in `{text}`"
                    )));
                }
                DataType::Decimal {
                    precision: p as u8,
                    scale: s as u8,
                }
            }
            "STRING" => DataType::Varchar(MAX_LENGTH),
            "CHAR" => DataType::Char(arg(0, 1)?),
            "VARCHAR" => DataType::Varchar(arg(0, 1)?),
            "BYTES" => DataType::Varbinary(MAX_LENGTH),
            "BINARY" => DataType::Binary(arg(0, 1)?),
            "VARBINARY" => DataType::Varbinary(arg(0, 1)?),
            "DATE" => DataType::Date,
            "TIMESTAMP" | "TIMESTAMP WITHOUT TIME ZONE" => DataType::Timestamp(precision(9, 6)?),
            "TIMESTAMP WITH LOCAL TIME ZONE" | "TIMESTAMP_LTZ" => {
                DataType::TimestampLtz(precision(9, 6)?)
            }
            _ => {
                return Err(Error::Data(format!(
                    "unsupported type `{text}` (supported: BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, \
                     DOUBLE, DECIMAL(p,s), STRING, VARCHAR(n), CHAR(n), BYTES, BINARY(n), VARBINARY(n), \
                     DATE, TIMESTAMP(p))"
                )));
            }
        };
        Ok((data_type, nullable))
    }

    /// The Arrow type pypaimon uses for this Paimon type.
    pub fn to_arrow(&self) -> ArrowType {
        match self {
            DataType::Boolean => ArrowType::Boolean,
            DataType::TinyInt => ArrowType::Int8,
            DataType::SmallInt => ArrowType::Int16,
            DataType::Int => ArrowType::Int32,
            DataType::BigInt => ArrowType::Int64,
            DataType::Float => ArrowType::Float32,
            DataType::Double => ArrowType::Float64,
            DataType::Decimal { precision, scale } => {
                ArrowType::Decimal128(*precision, *scale as i8)
            }
            DataType::Char(_) | DataType::Varchar(_) => ArrowType::Utf8,
            DataType::Binary(_) | DataType::Varbinary(_) => ArrowType::Binary,
            DataType::Date => ArrowType::Date32,
            DataType::Timestamp(p) => ArrowType::Timestamp(timestamp_unit(*p), None),
            DataType::TimestampLtz(p) => {
                ArrowType::Timestamp(timestamp_unit(*p), Some(Arc::from("UTC")))
            }
        }
    }

    /// Whether values are stored in the variable-length part of a BinaryRow when they do not
    /// fit in the fixed 8-byte slot.
    pub fn is_fixed_length_in_binary_row(&self) -> bool {
        match self {
            DataType::Decimal { precision, .. } => *precision <= 18,
            DataType::Timestamp(p) | DataType::TimestampLtz(p) => *p <= 3,
            DataType::Char(_)
            | DataType::Varchar(_)
            | DataType::Binary(_)
            | DataType::Varbinary(_) => false,
            _ => true,
        }
    }
}

/// Arrow time unit for a timestamp precision. Precision 0 is stored in milliseconds, as
/// Java writes it (INT64 TIMESTAMP(MILLIS)) and as pyarrow stores pypaimon's seconds:
/// Parquet has no seconds unit, so Arrow seconds would be a bare INT64, which Java reads as
/// milliseconds.
pub(crate) fn timestamp_unit(precision: u8) -> TimeUnit {
    match precision {
        0..=3 => TimeUnit::Millisecond,
        4..=6 => TimeUnit::Microsecond,
        _ => TimeUnit::Nanosecond,
    }
}

impl fmt::Display for DataType {
    /// Prints the type as Java and pypaimon write it in schema files.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataType::Boolean => write!(f, "BOOLEAN"),
            DataType::TinyInt => write!(f, "TINYINT"),
            DataType::SmallInt => write!(f, "SMALLINT"),
            DataType::Int => write!(f, "INT"),
            DataType::BigInt => write!(f, "BIGINT"),
            DataType::Float => write!(f, "FLOAT"),
            DataType::Double => write!(f, "DOUBLE"),
            DataType::Decimal { precision, scale } => write!(f, "DECIMAL({precision}, {scale})"),
            DataType::Char(n) => write!(f, "CHAR({n})"),
            DataType::Varchar(MAX_LENGTH) => write!(f, "STRING"),
            DataType::Varchar(n) => write!(f, "VARCHAR({n})"),
            DataType::Binary(n) => write!(f, "BINARY({n})"),
            DataType::Varbinary(MAX_LENGTH) => write!(f, "BYTES"),
            DataType::Varbinary(n) => write!(f, "VARBINARY({n})"),
            DataType::Date => write!(f, "DATE"),
            DataType::Timestamp(p) => write!(f, "TIMESTAMP({p})"),
            DataType::TimestampLtz(p) => write!(f, "TIMESTAMP({p}) WITH LOCAL TIME ZONE"),
        }
    }
}

/// A named, typed column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Field id, stable across schema versions.
    pub id: i32,
    pub name: String,
    pub data_type: DataType,
    pub nullable: bool,
    /// The column's comment (the schema file's `description`, Flink's `COMMENT`): kept
    /// through every schema change, so Java's users do not lose theirs.
    pub description: Option<String>,
}

impl Field {
    /// The schema-file spelling of this field's type, e.g. `"INT NOT NULL"`.
    pub(crate) fn type_string(&self) -> String {
        if self.nullable {
            self.data_type.to_string()
        } else {
            format!("{} NOT NULL", self.data_type)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closing_parenthesis_before_the_opening_one_is_an_error() {
        // Found by the `schema` fuzz target: slicing between them panicked.
        for text in ["INT)(", ")DECIMAL(", "VARCHAR)(3", "CHAR) NOT NULL("] {
            let err = DataType::parse(text).unwrap_err();
            assert!(err.to_string().contains("unbalanced"), "{text}: {err}");
        }
    }

    #[test]
    fn parses_and_prints_every_supported_type() {
        let cases = [
            ("BOOLEAN", DataType::Boolean, "BOOLEAN"),
            ("tinyint", DataType::TinyInt, "TINYINT"),
            ("SMALLINT", DataType::SmallInt, "SMALLINT"),
            ("INTEGER", DataType::Int, "INT"),
            ("BIGINT", DataType::BigInt, "BIGINT"),
            ("FLOAT", DataType::Float, "FLOAT"),
            ("DOUBLE", DataType::Double, "DOUBLE"),
            (
                "DECIMAL(10,2)",
                DataType::Decimal {
                    precision: 10,
                    scale: 2,
                },
                "DECIMAL(10, 2)",
            ),
            (
                "DECIMAL(38, 10)",
                DataType::Decimal {
                    precision: 38,
                    scale: 10,
                },
                "DECIMAL(38, 10)",
            ),
            ("STRING", DataType::Varchar(MAX_LENGTH), "STRING"),
            (
                "VARCHAR(2147483647)",
                DataType::Varchar(MAX_LENGTH),
                "STRING",
            ),
            ("VARCHAR(20)", DataType::Varchar(20), "VARCHAR(20)"),
            ("CHAR(3)", DataType::Char(3), "CHAR(3)"),
            ("BYTES", DataType::Varbinary(MAX_LENGTH), "BYTES"),
            ("BINARY(4)", DataType::Binary(4), "BINARY(4)"),
            ("DATE", DataType::Date, "DATE"),
            ("TIMESTAMP", DataType::Timestamp(6), "TIMESTAMP(6)"),
            ("TIMESTAMP(3)", DataType::Timestamp(3), "TIMESTAMP(3)"),
            (
                "TIMESTAMP_LTZ(3)",
                DataType::TimestampLtz(3),
                "TIMESTAMP(3) WITH LOCAL TIME ZONE",
            ),
            (
                "TIMESTAMP(6) WITH LOCAL TIME ZONE",
                DataType::TimestampLtz(6),
                "TIMESTAMP(6) WITH LOCAL TIME ZONE",
            ),
        ];
        for (text, expected, printed) in cases {
            let (parsed, nullable) = DataType::parse(text).unwrap();
            assert_eq!(parsed, expected, "{text}");
            assert!(nullable);
            assert_eq!(parsed.to_string(), printed);
            let (not_null, nullable) = DataType::parse(&format!("{text} NOT NULL")).unwrap();
            assert_eq!(not_null, expected);
            assert!(!nullable);
        }
    }

    #[test]
    fn rejects_unknown_and_malformed_types() {
        for bad in [
            "MAP",
            "DECIMAL(40, 2)",
            "DECIMAL(5, 6)",
            "VARCHAR(x)",
            "TIMESTAMP(12)",
            "INT(",
        ] {
            assert!(DataType::parse(bad).is_err(), "{bad}");
        }
    }
}
