//! Checking every enriched output record against the data it was made from.
//!
//! Why: a faster pipeline that drops a field, joins the wrong row or emits an order twice
//! must fail the benchmark, not win it. The data is deterministic (`data.rs`), so the
//! expected output of every order is known: the order's own fields unchanged, and the
//! joined columns of its customer (and, with three joins, of its profile and region), or
//! nulls for an unknown customer. Counting non-null fields, as the first harness did,
//! would pass a record with the wrong customer's name.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::data;

/// The joins of a case, as the output names them, and the facts they joined.
#[derive(Debug, Clone, Copy)]
pub struct Joins<'a> {
    /// 0: none (the passthrough); 1: customers; 3: customers, profiles, regions.
    pub count: usize,
    /// Customers 1..=customers exist; any other id is unknown.
    pub customers: u64,
    /// The customer of order n (1-based) at n - 1, as the orders topic holds them.
    pub customer_of: &'a [u64],
}

/// What the scan of an output topic found.
#[derive(Debug, Default)]
pub struct OutputCheck {
    orders_seen: HashSet<u64>,
    /// Records whose every join matched.
    pub matched: u64,
    /// Records that differ from what was expected (duplicates included).
    pub wrong: u64,
    /// The first few differences, for the error message.
    pub examples: Vec<String>,
}

impl OutputCheck {
    /// Checks one output payload; returns whether every join matched.
    pub fn record(&mut self, payload: &[u8], joins: Joins<'_>) -> bool {
        match check(payload, joins) {
            Ok((order, matched)) if self.orders_seen.insert(order) => {
                self.matched += u64::from(matched);
                matched
            }
            Ok((order, _)) => self.wrong(format!("order {order} appears twice")),
            Err(e) => self.wrong(e),
        }
    }

    fn wrong(&mut self, why: String) -> bool {
        self.wrong += 1;
        if self.examples.len() < 3 {
            self.examples.push(why);
        }
        false
    }

    /// `Err` unless every record was as expected.
    pub fn verdict(&self) -> Result<(), String> {
        if self.wrong == 0 {
            return Ok(());
        }
        Err(format!(
            "{} output records differ from their order's expected enrichment, for example: {}",
            self.wrong,
            self.examples.join("; ")
        ))
    }
}

/// The selected columns of a dimension row, as the join names them in the output.
fn joined(row: &str, select: &[&str], prefix: &str) -> Vec<(String, Value)> {
    let row: Value = serde_json::from_str(row).unwrap_or(Value::Null);
    select
        .iter()
        .map(|c| (format!("{prefix}{c}"), row[*c].clone()))
        .collect()
}

/// What the joins add to an order of `customer`: (field, value) pairs, and whether every
/// join matched.
pub fn expected_joined(customer: u64, joins: Joins<'_>) -> (Vec<(String, Value)>, bool) {
    if joins.count == 0 {
        // The passthrough: the order unchanged, nothing to match.
        return (Vec::new(), true);
    }
    let known = (1..=joins.customers).contains(&customer);
    let null = |select: &[&str], prefix: &str| -> Vec<(String, Value)> {
        select
            .iter()
            .map(|c| (format!("{prefix}{c}"), Value::Null))
            .collect()
    };
    let mut fields = if known {
        joined(
            &data::customer(customer).1,
            &data::CUSTOMER_SELECT,
            "customer_",
        )
    } else {
        null(&data::CUSTOMER_SELECT, "customer_")
    };
    if joins.count == 3 {
        if known {
            fields.extend(joined(
                &data::profile(customer).1,
                &data::PROFILE_SELECT,
                "profile_",
            ));
            let region = customer % data::REGIONS;
            fields.extend(joined(
                &data::region(region).1,
                &data::REGION_SELECT,
                "region_",
            ));
        } else {
            fields.extend(null(&data::PROFILE_SELECT, "profile_"));
            fields.extend(null(&data::REGION_SELECT, "region_"));
        }
    }
    (fields, known)
}

/// Numbers compare as numbers: the table keeps DOUBLE columns as doubles, and `1250.0`
/// may come back as `1250.0` or `1250` depending on who formats it.
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// The order id of a correct output record and whether every join matched; `Err` says
/// what is wrong.
fn check(payload: &[u8], joins: Joins<'_>) -> Result<(u64, bool), String> {
    let record: Map<String, Value> = serde_json::from_slice(payload)
        .map_err(|e| format!("an output record is not a JSON object: {e}"))?;
    let field = |name: &str| -> Result<u64, String> {
        record
            .get(name)
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("an output record has no numeric `{name}`"))
    };
    let (order, customer) = (field("order_id")?, field("customer_id")?);
    let expected_customer = usize::try_from(order)
        .ok()
        .and_then(|n| joins.customer_of.get(n.checked_sub(1)?));
    if expected_customer != Some(&customer) {
        return Err(format!(
            "order {order}: customer_id {customer}, the orders topic has {expected_customer:?}"
        ));
    }
    let original: Map<String, Value> = serde_json::from_str(&data::order(order, customer).1)
        .map_err(|e| format!("order {order}: {e}"))?;
    let (added, matched) = expected_joined(customer, joins);
    if record.len() != original.len() + added.len() {
        return Err(format!(
            "order {order}: {} fields, expected {}",
            record.len(),
            original.len() + added.len()
        ));
    }
    let expected = original.iter().map(|(k, v)| (k.as_str(), v));
    for (name, want) in expected.chain(added.iter().map(|(k, v)| (k.as_str(), v))) {
        match record.get(name) {
            Some(got) if same(got, want) => {}
            got => {
                return Err(format!(
                    "order {order}: `{name}` is {got:?}, expected {want}"
                ));
            }
        }
    }
    Ok((order, matched))
}
