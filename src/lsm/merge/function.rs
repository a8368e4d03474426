//! Per-column aggregate functions (Paimon's `FieldAggregator` family), shared by the
//! `aggregation` engine and partial-update sequence groups so both aggregate a column
//! identically.

use std::cmp::Ordering;
use std::collections::HashSet;

use arrow::datatypes::i256;

use super::CannotRetract;
use crate::error::{Error, Result};
use crate::table::datum::{Datum, compare_datums};
use crate::table::options::TableOptions;
use crate::table::types::{DataType, Field};

/// Why an `aggregate-function` option cannot be used; the caller names the option key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FunctionError {
    #[error(
        "`count` was removed from Paimon because a count cannot be merged again across \
         files; use `sum` over a column that holds 1"
    )]
    CountRemoved,
    /// A Paimon function lakejoin has no implementation of.
    #[error("`{0}` is a Paimon aggregate function that lakejoin does not implement")]
    NotImplemented(String),
    #[error(
        "unknown aggregate function `{0}` (lakejoin implements sum, product, min, max, \
         last_value, last_non_null_value, first_value, first_non_null_value, bool_and, \
         bool_or, listagg)"
    )]
    Unknown(String),
    /// The function cannot aggregate the column's type (Paimon's factories refuse it).
    #[error("`{}` needs {}, not {data_type}", .function.name(), .function.wanted_type())]
    WrongType {
        function: AggregateFunction,
        data_type: DataType,
    },
}

/// The functions of `fields.<f>.aggregate-function` that lakejoin implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AggregateFunction {
    /// Primary-key columns: the value is the key, carried through.
    PrimaryKey,
    /// Numeric sum; retracts by subtracting.
    Sum,
    /// Numeric product; retracts by dividing.
    Product,
    /// Smallest value in the column's natural order.
    Min,
    /// Largest value in the column's natural order.
    Max,
    /// Newest value, nulls included; a retraction sets null.
    LastValue,
    /// Newest non-null value (the default); retracting a non-null value sets null.
    LastNonNullValue,
    /// Oldest value of one merge, nulls included.
    FirstValue,
    /// Oldest non-null value of one merge (legacy name `first_not_null_value`).
    FirstNonNullValue,
    /// Logical AND of BOOLEAN values.
    BoolAnd,
    /// Logical OR of BOOLEAN values.
    BoolOr,
    /// Non-blank strings joined by `fields.<f>.list-agg-delimiter` (default `,`).
    Listagg,
}

impl AggregateFunction {
    /// Parses a Paimon function name; the error says why the name cannot be used.
    pub(crate) fn parse(name: &str) -> std::result::Result<Self, FunctionError> {
        Ok(match name {
            "primary_key" => Self::PrimaryKey,
            "sum" => Self::Sum,
            "product" => Self::Product,
            "min" => Self::Min,
            "max" => Self::Max,
            "last_value" => Self::LastValue,
            "last_non_null_value" => Self::LastNonNullValue,
            "first_value" => Self::FirstValue,
            // Paimon still accepts the old spelling.
            "first_non_null_value" | "first_not_null_value" => Self::FirstNonNullValue,
            "bool_and" => Self::BoolAnd,
            "bool_or" => Self::BoolOr,
            "listagg" => Self::Listagg,
            "count" => return Err(FunctionError::CountRemoved),
            "collect"
            | "merge_map"
            | "merge_map_with_keytime"
            | "nested_update"
            | "nested_partial_update"
            | "rbm32"
            | "rbm64"
            | "hll_sketch"
            | "theta_sketch" => return Err(FunctionError::NotImplemented(name.to_string())),
            other => return Err(FunctionError::Unknown(other.to_string())),
        })
    }

    /// Paimon's name of the function.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::PrimaryKey => "primary_key",
            Self::Sum => "sum",
            Self::Product => "product",
            Self::Min => "min",
            Self::Max => "max",
            Self::LastValue => "last_value",
            Self::LastNonNullValue => "last_non_null_value",
            Self::FirstValue => "first_value",
            Self::FirstNonNullValue => "first_non_null_value",
            Self::BoolAnd => "bool_and",
            Self::BoolOr => "bool_or",
            Self::Listagg => "listagg",
        }
    }

    /// Whether Paimon defines a retraction for the function (the others fail on -U/-D
    /// unless `fields.<f>.ignore-retract` is set).
    fn supports_retract(self) -> bool {
        matches!(
            self,
            Self::PrimaryKey | Self::Sum | Self::Product | Self::LastValue | Self::LastNonNullValue
        )
    }

    /// The column types Paimon's factory for the function accepts.
    fn check_type(self, data_type: DataType) -> std::result::Result<(), FunctionError> {
        let ok = match self {
            Self::Sum | Self::Product => matches!(
                data_type,
                DataType::TinyInt
                    | DataType::SmallInt
                    | DataType::Int
                    | DataType::BigInt
                    | DataType::Float
                    | DataType::Double
                    | DataType::Decimal { .. }
            ),
            Self::BoolAnd | Self::BoolOr => data_type == DataType::Boolean,
            // Java requires a VarCharType (STRING is VARCHAR(max)); CHAR is refused.
            Self::Listagg => matches!(data_type, DataType::Varchar(_)),
            _ => true,
        };
        if ok {
            Ok(())
        } else {
            Err(FunctionError::WrongType {
                function: self,
                data_type,
            })
        }
    }

    /// The columns [`Self::check_type`] accepts, in words.
    fn wanted_type(self) -> &'static str {
        match self {
            Self::Sum | Self::Product => "a numeric column",
            Self::BoolAnd | Self::BoolOr => "a BOOLEAN column",
            Self::Listagg => "a VARCHAR/STRING column",
            _ => "any column",
        }
    }
}

/// Arithmetic of sum/product and their retractions.
#[derive(Debug, Clone, Copy)]
enum Arith {
    Add,
    Sub,
    Mul,
    Div,
}

impl Arith {
    fn symbol(self) -> &'static str {
        match self {
            Arith::Add => "+",
            Arith::Sub => "-",
            Arith::Mul => "*",
            Arith::Div => "/",
        }
    }

    fn exact(self, x: i128, y: i128) -> Option<i128> {
        match self {
            Arith::Add => x.checked_add(y),
            Arith::Sub => x.checked_sub(y),
            Arith::Mul => x.checked_mul(y),
            // Truncates toward zero, like Java.
            Arith::Div => x.checked_div(y),
        }
    }

    /// [`exact`](Self::exact) on two integers of one width: `None` when the result does
    /// not fit that width.
    fn exact_in<T: Copy + Into<i128> + TryFrom<i128>>(self, x: T, y: T) -> Option<T> {
        self.exact(x.into(), y.into())
            .and_then(|v| T::try_from(v).ok())
    }

    /// IEEE arithmetic (`f32` or `f64`): never fails, overflow gives infinity.
    fn ieee<T>(self, x: T, y: T) -> T
    where
        T: std::ops::Add<Output = T>
            + std::ops::Sub<Output = T>
            + std::ops::Mul<Output = T>
            + std::ops::Div<Output = T>,
    {
        match self {
            Arith::Add => x + y,
            Arith::Sub => x - y,
            Arith::Mul => x * y,
            Arith::Div => x / y,
        }
    }
}

/// One column's aggregate function with its options.
#[derive(Debug, Clone)]
pub(crate) struct FieldAggregator {
    field: String,
    data_type: DataType,
    function: AggregateFunction,
    ignore_retract: bool,
    delimiter: String,
    distinct: bool,
}

impl FieldAggregator {
    /// The aggregator of `field`; `Err` when the function cannot aggregate its type.
    pub(crate) fn new(
        field: &Field,
        function: AggregateFunction,
        options: &TableOptions,
    ) -> std::result::Result<Self, FunctionError> {
        function.check_type(field.data_type)?;
        let field_options = options.field_options.get(&field.name);
        Ok(FieldAggregator {
            field: field.name.clone(),
            data_type: field.data_type,
            function,
            ignore_retract: field_options.is_some_and(|o| o.ignore_retract),
            delimiter: field_options
                .and_then(|o| o.list_agg_delimiter.clone())
                .unwrap_or_else(|| ",".to_string()),
            distinct: field_options.is_some_and(|o| o.distinct),
        })
    }

    /// A last_value aggregator, standing in for one whose options were refused.
    pub(crate) fn fallback(field: &Field) -> Self {
        FieldAggregator {
            field: field.name.clone(),
            data_type: field.data_type,
            function: AggregateFunction::LastValue,
            ignore_retract: false,
            delimiter: String::new(),
            distinct: false,
        }
    }

    /// Whether `fields.<f>.ignore-retract` is set.
    pub(crate) fn ignores_retract(&self) -> bool {
        self.ignore_retract
    }

    /// Whether a retraction can reach this column without failing.
    pub(crate) fn can_retract(&self) -> bool {
        self.ignore_retract || self.function.supports_retract()
    }

    /// This column, when a retraction reaching it would fail: why the engine refuses one.
    pub(crate) fn cannot_retract(&self) -> Option<CannotRetract> {
        (!self.can_retract()).then(|| CannotRetract {
            column: self.field.clone(),
            function: self.function,
        })
    }

    fn fail(&self, message: impl std::fmt::Display) -> Error {
        Error::Data(format!(
            "column `{}` (aggregate function `{}`): {message}",
            self.field,
            self.function.name()
        ))
    }

    /// Folds `input` into `acc`. `first_taken` is the per-merge state of
    /// first_value/first_non_null_value (Java's `initialized`, reset for every key).
    pub(crate) fn agg(&self, first_taken: &mut bool, acc: Datum, input: &Datum) -> Result<Datum> {
        use AggregateFunction as F;
        match self.function {
            F::PrimaryKey | F::LastValue => Ok(input.clone()),
            F::LastNonNullValue => Ok(if input.is_null() { acc } else { input.clone() }),
            F::FirstValue => {
                if *first_taken {
                    Ok(acc)
                } else {
                    *first_taken = true;
                    Ok(input.clone())
                }
            }
            F::FirstNonNullValue => {
                if !*first_taken && !input.is_null() {
                    *first_taken = true;
                    Ok(input.clone())
                } else {
                    Ok(acc)
                }
            }
            F::Listagg => self.listagg(acc, input),
            F::Sum | F::Product | F::Min | F::Max | F::BoolAnd | F::BoolOr => {
                // A null on either side leaves the other (SQL: nulls do not take part).
                if input.is_null() {
                    return Ok(acc);
                }
                if acc.is_null() {
                    return Ok(input.clone());
                }
                match self.function {
                    F::Sum => self.arith(Arith::Add, &acc, input),
                    F::Product => self.arith(Arith::Mul, &acc, input),
                    F::Min => Ok(if compare_datums(&acc, input) == Ordering::Less {
                        acc
                    } else {
                        input.clone()
                    }),
                    F::Max => Ok(if compare_datums(&acc, input) == Ordering::Less {
                        input.clone()
                    } else {
                        acc
                    }),
                    _ => match (&acc, input) {
                        (Datum::Boolean(a), Datum::Boolean(b)) => {
                            Ok(Datum::Boolean(if self.function == F::BoolAnd {
                                *a && *b
                            } else {
                                *a || *b
                            }))
                        }
                        _ => Err(self.fail(format!("cannot combine {acc:?} and {input:?}"))),
                    },
                }
            }
        }
    }

    /// Folds a value that is older (by its sequence group) than the accumulator: Paimon
    /// calls the function with the two sides swapped.
    pub(crate) fn agg_reversed(
        &self,
        first_taken: &mut bool,
        acc: Datum,
        input: &Datum,
    ) -> Result<Datum> {
        self.agg(first_taken, input.clone(), &acc)
    }

    /// Takes `input` back out of `acc` (a -U/-D row).
    pub(crate) fn retract(&self, acc: Datum, input: &Datum) -> Result<Datum> {
        use AggregateFunction as F;
        if self.ignore_retract {
            return Ok(acc);
        }
        match self.function {
            F::PrimaryKey => Ok(input.clone()),
            F::LastValue => Ok(Datum::Null),
            F::LastNonNullValue => Ok(if input.is_null() { acc } else { Datum::Null }),
            F::Sum => match (&acc, input) {
                (_, Datum::Null) => Ok(acc),
                (Datum::Null, value) => self.negate(value),
                _ => self.arith(Arith::Sub, &acc, input),
            },
            F::Product => {
                if acc.is_null() || input.is_null() {
                    Ok(acc)
                } else {
                    self.arith(Arith::Div, &acc, input)
                }
            }
            _ => Err(self.retract_unsupported()),
        }
    }

    /// The message for a retraction this column cannot take.
    pub(crate) fn retract_unsupported(&self) -> Error {
        self.fail(format!(
            "the function cannot take retractions (-U/-D); set `fields.{}.ignore-retract` = true \
             to ignore them",
            self.field
        ))
    }

    fn negate(&self, value: &Datum) -> Result<Datum> {
        let negated = match value {
            Datum::TinyInt(x) => x.checked_neg().map(Datum::TinyInt),
            Datum::SmallInt(x) => x.checked_neg().map(Datum::SmallInt),
            Datum::Int(x) => x.checked_neg().map(Datum::Int),
            Datum::BigInt(x) => x.checked_neg().map(Datum::BigInt),
            Datum::Float(x) => Some(Datum::Float(-x)),
            Datum::Double(x) => Some(Datum::Double(-x)),
            // |unscaled| < 10^38, so the negation always fits.
            Datum::Decimal(x) => x.checked_neg().map(Datum::Decimal),
            other => return Err(self.fail(format!("cannot negate {other:?}"))),
        };
        negated.ok_or_else(|| self.fail(format!("overflow: -{value:?}")))
    }

    /// Exact integer arithmetic (Paimon fails on overflow, as pypaimon does), IEEE float
    /// arithmetic, and decimals rounded half-up to the column's scale and set to null when
    /// they exceed its precision (Java's `Decimal.fromBigDecimal`).
    fn arith(&self, op: Arith, a: &Datum, b: &Datum) -> Result<Datum> {
        let overflow = || {
            if matches!(op, Arith::Div) && is_zero(b) {
                self.fail(format!("division by zero: {a:?} / {b:?}"))
            } else {
                self.fail(format!("overflow: {a:?} {} {b:?}", op.symbol()))
            }
        };
        let value = match (a, b) {
            (Datum::TinyInt(x), Datum::TinyInt(y)) => op.exact_in(*x, *y).map(Datum::TinyInt),
            (Datum::SmallInt(x), Datum::SmallInt(y)) => op.exact_in(*x, *y).map(Datum::SmallInt),
            (Datum::Int(x), Datum::Int(y)) => op.exact_in(*x, *y).map(Datum::Int),
            (Datum::BigInt(x), Datum::BigInt(y)) => op.exact_in(*x, *y).map(Datum::BigInt),
            (Datum::Float(x), Datum::Float(y)) => Some(Datum::Float(op.ieee(*x, *y))),
            (Datum::Double(x), Datum::Double(y)) => Some(Datum::Double(op.ieee(*x, *y))),
            (Datum::Decimal(x), Datum::Decimal(y)) => {
                let DataType::Decimal { precision, scale } = self.data_type else {
                    return Err(self.fail(format!("decimal value in a {} column", self.data_type)));
                };
                return self.decimal(op, *x, *y, precision, scale);
            }
            _ => return Err(self.fail(format!("cannot combine {a:?} and {b:?}"))),
        };
        value.ok_or_else(overflow)
    }

    fn decimal(&self, op: Arith, x: i128, y: i128, precision: u8, scale: u8) -> Result<Datum> {
        let pow = i256::from_i128(10i128.pow(u32::from(scale.min(38))));
        let (wide_x, wide_y) = (i256::from_i128(x), i256::from_i128(y));
        let exact = match op {
            Arith::Add => wide_x.checked_add(wide_y),
            Arith::Sub => wide_x.checked_sub(wide_y),
            // The product has twice the scale; round back to the column's scale.
            Arith::Mul => wide_x.checked_mul(wide_y).and_then(|p| div_half_up(p, pow)),
            Arith::Div => {
                if y == 0 {
                    return Err(self.fail(format!("division by zero: {x} / {y} (unscaled)")));
                }
                // Java's BigDecimal.divide fails unless the quotient has a finite
                // decimal expansion; the scales cancel, so the quotient is x / y.
                if !terminates(x, y) {
                    return Err(self.fail(format!(
                        "non-terminating decimal expansion of {x} / {y} (unscaled)"
                    )));
                }
                wide_x.checked_mul(pow).and_then(|n| div_half_up(n, wide_y))
            }
        };
        let fitted = exact
            .and_then(i256::to_i128)
            .filter(|v| v.unsigned_abs() < 10u128.pow(u32::from(precision.min(38))));
        Ok(fitted.map_or(Datum::Null, Datum::Decimal))
    }

    /// Paimon's listagg: blank values are skipped, the rest joined by the delimiter;
    /// with `distinct`, tokens already present are skipped too.
    fn listagg(&self, acc: Datum, input: &Datum) -> Result<Datum> {
        let text = match input {
            Datum::Null => return Ok(acc),
            Datum::String(s) => s,
            other => return Err(self.fail(format!("cannot join {other:?}"))),
        };
        if is_blank(text) {
            return Ok(acc);
        }
        let mut joined = match acc {
            Datum::String(s) if !is_blank(&s) => s,
            Datum::String(_) | Datum::Null => return Ok(input.clone()),
            other => return Err(self.fail(format!("cannot join {other:?}"))),
        };
        if !self.distinct {
            joined.push_str(&self.delimiter);
            joined.push_str(text);
            return Ok(Datum::String(joined));
        }
        let mut seen: HashSet<String> = split_tokens(&joined, &self.delimiter)
            .into_iter()
            .map(str::to_string)
            .collect();
        let mut added = Vec::new();
        for token in split_tokens(text, &self.delimiter) {
            if is_blank(token) || !seen.insert(token.to_string()) {
                continue;
            }
            added.push(token);
        }
        for token in added {
            joined.push_str(&self.delimiter);
            joined.push_str(token);
        }
        Ok(Datum::String(joined))
    }
}

fn is_zero(d: &Datum) -> bool {
    match d {
        Datum::TinyInt(x) => *x == 0,
        Datum::SmallInt(x) => *x == 0,
        Datum::Int(x) => *x == 0,
        Datum::BigInt(x) => *x == 0,
        Datum::Decimal(x) => *x == 0,
        _ => false,
    }
}

/// `n / d` rounded half away from zero (Java's `RoundingMode.HALF_UP`).
fn div_half_up(n: i256, d: i256) -> Option<i256> {
    let (quotient, remainder) = n.checked_div_rem(d)?;
    let twice = remainder.checked_abs()?.checked_mul(i256::from_i128(2))?;
    if twice < d.checked_abs()? {
        return Some(quotient);
    }
    if n.is_negative() != d.is_negative() {
        quotient.checked_sub(i256::from_i128(1))
    } else {
        quotient.checked_add(i256::from_i128(1))
    }
}

/// Whether `x / y` has a finite decimal expansion (the reduced denominator has no prime
/// factor but 2 and 5).
fn terminates(x: i128, y: i128) -> bool {
    let (mut a, mut b) = (x.unsigned_abs(), y.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    let Some(mut den) = y.unsigned_abs().checked_div(a.max(1)) else {
        return false;
    };
    for p in [2u128, 5] {
        while den != 0 && den % p == 0 {
            den /= p;
        }
    }
    den == 1
}

/// Java's `Character.isWhitespace` (Paimon's `StringUtils.isBlank` uses it): Unicode
/// spaces except the non-breaking ones, plus the ASCII controls 0x1C-0x1F.
fn is_java_whitespace(c: char) -> bool {
    (c.is_whitespace() && !matches!(c, '\u{85}' | '\u{A0}' | '\u{2007}' | '\u{202F}'))
        || matches!(c, '\u{1C}'..='\u{1F}')
}

fn is_blank(s: &str) -> bool {
    s.chars().all(is_java_whitespace)
}

/// Java's `splitByWholeSeparatorPreserveAllTokens`: empty tokens are kept; an empty
/// separator splits on whitespace.
fn split_tokens<'a>(text: &'a str, separator: &str) -> Vec<&'a str> {
    if separator.is_empty() {
        text.split(is_java_whitespace).collect()
    } else {
        text.split(separator).collect()
    }
}
