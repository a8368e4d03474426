//! Schema evolution, as Java Paimon's `SchemaManager.commitChanges` does it
//! (docs/format.md §2.2): a change makes the next schema version, `schema/schema-<n+1>`,
//! published create-if-absent, so of two writers evolving the table at once exactly one
//! wins and the other plans its change again on the winner's schema. Data files keep the
//! `_SCHEMA_ID` they were written with; readers map their columns by field id to the
//! current schema (`data_file::decode_data_file`), so a column added later reads as null
//! in older files and a widened column is cast up.
//!
//! lakejoin makes two of Paimon's changes, the ones that lose no data and need no
//! rewrite: `AddColumn` (nullable, at the end, with the id `highestFieldId + 1`) and
//! `UpdateColumnType` to a wider type of the same family ([`widens`]). Java's other rules
//! for these changes are kept: no NOT NULL column is added, and primary-key and partition
//! columns keep their types (their bytes decide buckets and directories).

use std::fmt;

use super::datum::Datum;
use super::schema::TableSchema;
use super::types::{DataType, Field};
use crate::error::{Error, Result};

/// One change to a table's schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaChange {
    /// A nullable column appended after the others (Paimon's `AddColumn` without a move).
    AddColumn { name: String, data_type: DataType },
    /// A column's type changed to a wider one (Paimon's `UpdateColumnType`), keeping its
    /// nullability.
    WidenColumn { name: String, data_type: DataType },
}

impl fmt::Display for SchemaChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaChange::AddColumn { name, data_type } => {
                write!(f, "add column `{name}` {data_type}")
            }
            SchemaChange::WidenColumn { name, data_type } => {
                write!(f, "widen column `{name}` to {data_type}")
            }
        }
    }
}

/// Whether every value of `from` is, unchanged, a value of `to`, and a reader can cast a
/// file column of `from` up to `to` (Java's `SchemaEvolutionUtil` casts, Arrow's here):
/// TINYINT → SMALLINT → INT → BIGINT, FLOAT → DOUBLE, CHAR(n)/VARCHAR(n) → VARCHAR(m ≥ n),
/// BINARY(n)/VARBINARY(n) → VARBINARY(m ≥ n), DECIMAL(p, s) → DECIMAL(q ≥ p, s). The same
/// type widens itself. A DECIMAL's scale stays: its stored unscaled value would change.
pub fn widens(from: DataType, to: DataType) -> bool {
    use DataType::*;
    fn integer_rank(t: DataType) -> Option<u8> {
        match t {
            TinyInt => Some(0),
            SmallInt => Some(1),
            Int => Some(2),
            BigInt => Some(3),
            _ => None,
        }
    }
    if from == to {
        return true;
    }
    match (from, to) {
        (Float, Double) => true,
        (Char(n) | Varchar(n), Varchar(m)) => m >= n,
        (Binary(n) | Varbinary(n), Varbinary(m)) => m >= n,
        (
            Decimal {
                precision: p,
                scale: s,
            },
            Decimal {
                precision: q,
                scale: t,
            },
        ) => q >= p && t == s,
        _ => matches!(
            (integer_rank(from), integer_rank(to)),
            (Some(a), Some(b)) if a <= b
        ),
    }
}

/// A value of a column's old type as a value of the type it was widened to ([`widens`]):
/// integers and FLOAT change variant, everything else is the same datum.
pub(crate) fn widen_datum(datum: Datum, to: DataType) -> Datum {
    match (datum, to) {
        (Datum::TinyInt(v), DataType::SmallInt) => Datum::SmallInt(v.into()),
        (Datum::TinyInt(v), DataType::Int) => Datum::Int(v.into()),
        (Datum::TinyInt(v), DataType::BigInt) => Datum::BigInt(v.into()),
        (Datum::SmallInt(v), DataType::Int) => Datum::Int(v.into()),
        (Datum::SmallInt(v), DataType::BigInt) => Datum::BigInt(v.into()),
        (Datum::Int(v), DataType::BigInt) => Datum::BigInt(v.into()),
        (Datum::Float(v), DataType::Double) => Datum::Double(v.into()),
        (datum, _) => datum,
    }
}

impl TableSchema {
    /// The next schema version with `changes` applied in order: id + 1, new columns with
    /// ids from `highest_field_id + 1`, the creation time now. Every problem is reported
    /// at once, as a config error naming the columns.
    pub fn evolve(&self, changes: &[SchemaChange]) -> Result<TableSchema> {
        let mut next = self.clone();
        let mut problems = Vec::new();
        for change in changes {
            match change {
                SchemaChange::AddColumn { name, data_type } => {
                    if next.field(name).is_some() {
                        problems.push(format!("cannot add column `{name}`: it exists"));
                        continue;
                    }
                    next.highest_field_id += 1;
                    next.fields.push(Field {
                        id: next.highest_field_id,
                        name: name.clone(),
                        data_type: *data_type,
                        nullable: true,
                        description: None,
                    });
                }
                SchemaChange::WidenColumn { name, data_type } => {
                    let Some(index) = next.field_index(name) else {
                        problems.push(format!("cannot change column `{name}`: no such column"));
                        continue;
                    };
                    if next.primary_keys.contains(name) || next.partition_keys.contains(name) {
                        problems.push(format!(
                            "cannot change the type of `{name}`: primary-key and partition \
                             columns keep their types (Paimon refuses it too)"
                        ));
                        continue;
                    }
                    let from = next.fields[index].data_type;
                    if !widens(from, *data_type) {
                        problems.push(format!(
                            "cannot change column `{name}` from {from} to {data_type}: only \
                             widening is allowed (TINYINT → SMALLINT → INT → BIGINT, FLOAT → \
                             DOUBLE, VARCHAR(n) → VARCHAR(m ≥ n), VARBINARY(n) → VARBINARY(m ≥ \
                             n), DECIMAL(p, s) → DECIMAL(q ≥ p, s))"
                        ));
                        continue;
                    }
                    next.fields[index].data_type = *data_type;
                }
            }
        }
        if !problems.is_empty() {
            return Err(Error::Config(problems.join("; ")));
        }
        next.id = self.id + 1;
        next.time_millis = Some(chrono::Utc::now().timestamp_millis());
        next.validate()?;
        Ok(next)
    }

    /// What must change for a row with `columns` (name, type) to fit: a column this
    /// schema lacks is added, one whose type is wider here already is kept (every value
    /// fits, as Paimon's CDC keeps it), one that needs a wider type is widened. A type
    /// that is neither is an error naming the column.
    pub fn changes_to_fit(&self, columns: &[(String, DataType)]) -> Result<Vec<SchemaChange>> {
        let mut changes = Vec::new();
        let mut problems = Vec::new();
        for (name, wanted) in columns {
            match self.field(name) {
                None => changes.push(SchemaChange::AddColumn {
                    name: name.clone(),
                    data_type: *wanted,
                }),
                Some(f) if widens(*wanted, f.data_type) => {}
                Some(f) if widens(f.data_type, *wanted) => {
                    changes.push(SchemaChange::WidenColumn {
                        name: name.clone(),
                        data_type: *wanted,
                    })
                }
                Some(f) => problems.push(format!(
                    "column `{name}` is {} in the table and {wanted} in the source; \
                     neither type holds every value of the other",
                    f.data_type
                )),
            }
        }
        if problems.is_empty() {
            Ok(changes)
        } else {
            Err(Error::Config(problems.join("; ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::table::testkit::{keyed_schema, widen_age_add_city};
    use crate::table::types::MAX_LENGTH;

    fn profile() -> TableSchema {
        keyed_schema(
            &[
                ("user_id", DataType::Int),
                ("age", DataType::Int),
                ("sex", DataType::Varchar(8)),
            ],
            &["user_id"],
            &[("bucket", "2")],
        )
    }

    #[test]
    fn an_added_column_gets_the_next_field_id_and_is_nullable() {
        let schema = profile();
        let next = schema
            .evolve(&[SchemaChange::AddColumn {
                name: "city".into(),
                data_type: DataType::Varchar(32),
            }])
            .unwrap();
        assert_eq!(next.id, 1);
        assert_eq!(next.highest_field_id, 3);
        let city = next.fields.last().unwrap();
        assert_eq!(
            (city.id, city.name.as_str(), city.nullable),
            (3, "city", true)
        );
        assert_eq!(next.fields[..3], schema.fields[..]);
        // Ids are never reused: a second column after it gets 4.
        let again = next
            .evolve(&[SchemaChange::AddColumn {
                name: "zip".into(),
                data_type: DataType::Int,
            }])
            .unwrap();
        assert_eq!((again.id, again.highest_field_id), (2, 4));
        // The file round-trips with the new id and field.
        assert_eq!(TableSchema::from_json(&again.to_json()).unwrap(), again);
    }

    #[test]
    fn every_change_keeps_the_column_descriptions() {
        let mut schema = profile();
        schema.fields[1].description = Some("years".into());
        schema.fields[2].description = Some("as given".into());
        let next = schema.evolve(&widen_age_add_city()).unwrap();
        let descriptions: Vec<Option<&str>> = next
            .fields
            .iter()
            .map(|f| f.description.as_deref())
            .collect();
        assert_eq!(descriptions, [None, Some("years"), Some("as given"), None]);
        assert_eq!(TableSchema::from_json(&next.to_json()).unwrap(), next);
    }

    #[test]
    fn widening_keeps_id_and_nullability() {
        let next = profile()
            .evolve(&[
                SchemaChange::WidenColumn {
                    name: "age".into(),
                    data_type: DataType::BigInt,
                },
                SchemaChange::WidenColumn {
                    name: "sex".into(),
                    data_type: DataType::Varchar(MAX_LENGTH),
                },
            ])
            .unwrap();
        assert_eq!(next.fields[1].data_type, DataType::BigInt);
        assert_eq!(next.fields[1].id, 1);
        assert_eq!(next.fields[2].type_string(), "STRING");
        assert_eq!(next.highest_field_id, 2);
    }

    #[test]
    fn every_refused_change_is_named_at_once() {
        let err = profile()
            .evolve(&[
                SchemaChange::AddColumn {
                    name: "age".into(),
                    data_type: DataType::Int,
                },
                SchemaChange::WidenColumn {
                    name: "user_id".into(),
                    data_type: DataType::BigInt,
                },
                SchemaChange::WidenColumn {
                    name: "age".into(),
                    data_type: DataType::SmallInt,
                },
                SchemaChange::WidenColumn {
                    name: "sex".into(),
                    data_type: DataType::Int,
                },
                SchemaChange::WidenColumn {
                    name: "nope".into(),
                    data_type: DataType::Int,
                },
            ])
            .unwrap_err()
            .to_string();
        for part in [
            "cannot add column `age`: it exists",
            "type of `user_id`",
            "`age` from INT to SMALLINT",
            "`sex` from VARCHAR(8) to INT",
            "`nope`: no such column",
        ] {
            assert!(err.contains(part), "{part} missing in {err}");
        }
    }

    #[test]
    fn changes_to_fit_add_widen_keep_or_refuse() {
        let schema = profile();
        let changes = schema
            .changes_to_fit(&[
                ("user_id".into(), DataType::Int),
                ("age".into(), DataType::BigInt),
                ("sex".into(), DataType::Varchar(4)),
                ("city".into(), DataType::Varchar(MAX_LENGTH)),
            ])
            .unwrap();
        assert_eq!(
            changes,
            vec![
                SchemaChange::WidenColumn {
                    name: "age".into(),
                    data_type: DataType::BigInt
                },
                SchemaChange::AddColumn {
                    name: "city".into(),
                    data_type: DataType::Varchar(MAX_LENGTH)
                },
            ]
        );
        let err = schema
            .changes_to_fit(&[("sex".into(), DataType::Int)])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`sex` is VARCHAR(8) in the table and INT"),
            "{err}"
        );
    }

    fn any_type() -> impl Strategy<Value = DataType> {
        prop_oneof![
            Just(DataType::Boolean),
            Just(DataType::TinyInt),
            Just(DataType::SmallInt),
            Just(DataType::Int),
            Just(DataType::BigInt),
            Just(DataType::Float),
            Just(DataType::Double),
            Just(DataType::Date),
            (1u8..=38, 0u8..=4).prop_map(|(p, s)| DataType::Decimal {
                precision: p.max(s),
                scale: s
            }),
            (1u32..100).prop_map(DataType::Char),
            (1u32..100).prop_map(DataType::Varchar),
            (1u32..100).prop_map(DataType::Varbinary),
            (0u8..=9).prop_map(DataType::Timestamp),
        ]
    }

    /// `a` or a type it widens to.
    fn wider(a: DataType) -> BoxedStrategy<DataType> {
        let rank = |t: DataType| match t {
            DataType::TinyInt => 0,
            DataType::SmallInt => 1,
            DataType::Int => 2,
            _ => 3,
        };
        match a {
            DataType::TinyInt | DataType::SmallInt | DataType::Int | DataType::BigInt => {
                let ints = [
                    DataType::TinyInt,
                    DataType::SmallInt,
                    DataType::Int,
                    DataType::BigInt,
                ];
                proptest::sample::select(ints[rank(a)..].to_vec()).boxed()
            }
            DataType::Float => prop_oneof![Just(DataType::Float), Just(DataType::Double)].boxed(),
            DataType::Char(n) => prop_oneof![
                Just(DataType::Char(n)),
                (n..n + 100).prop_map(DataType::Varchar)
            ]
            .boxed(),
            DataType::Varchar(n) => (n..n + 100).prop_map(DataType::Varchar).boxed(),
            DataType::Varbinary(n) => (n..n + 100).prop_map(DataType::Varbinary).boxed(),
            DataType::Decimal { precision, scale } => (precision..=38)
                .prop_map(move |p| DataType::Decimal {
                    precision: p,
                    scale,
                })
                .boxed(),
            other => Just(other).boxed(),
        }
    }

    proptest! {
        /// Widening is a partial order: reflexive, transitive, and two distinct types
        /// never widen to each other (so `changes_to_fit` never flips a column back).
        #[test]
        fn widening_is_a_partial_order(a in any_type(), b in any_type(), c in any_type()) {
            prop_assert!(widens(a, a));
            if widens(a, b) && widens(b, c) {
                prop_assert!(widens(a, c));
            }
            if a != b && widens(a, b) {
                prop_assert!(!widens(b, a));
            }
        }

        /// Every value of a type converts unchanged to a type it widens to: what a JSON
        /// value of `a` holds, `b` takes, and `widen_datum` gives the same datum as
        /// reading the value as `b`.
        #[test]
        fn widened_types_take_every_value((a, b) in any_type().prop_flat_map(|a| (Just(a), wider(a))), n in any::<i64>()) {
            use crate::table::datum::{datum_from_json, datum_to_json};
            prop_assert!(widens(a, b), "{a} -> {b}");
            if a == b {
                return Ok(());
            }
            let value = serde_json::Value::from(n);
            if let Ok(datum) = datum_from_json(&value, &a) {
                let text = datum_to_json(&datum, &a);
                let as_b = datum_from_json(&text, &b);
                prop_assert!(as_b.is_ok(), "{a} -> {b}: {value}");
                if !matches!(a, DataType::Float) {
                    prop_assert_eq!(widen_datum(datum, b), as_b.unwrap());
                }
            }
        }
    }
}
