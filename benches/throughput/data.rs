//! The benchmark's data, deterministic for a given size: customers, their profiles and
//! regions (the dimension tables), and orders (the facts). Every payload is JSON with
//! 5–10 fields of realistic size; orders name an existing customer 95% of the time and
//! an unknown one 5% of the time.

use serde_json::json;

/// Dimension rows are keyed by `id` from 1; unknown customer ids start above this.
pub const UNKNOWN_BASE: u64 = 1_000_000_000;

const FIRST: [&str; 16] = [
    "ada", "bob", "chloe", "dario", "eva", "felix", "gina", "hugo", "ines", "jonas", "karla",
    "luca", "mia", "noah", "olga", "paul",
];
const LAST: [&str; 12] = [
    "keller", "meier", "rossi", "dubois", "schmid", "novak", "silva", "weber", "bianchi", "moreau",
    "fischer", "brunner",
];
const COUNTRIES: [&str; 10] = ["ch", "de", "fr", "it", "at", "nl", "be", "es", "pt", "pl"];
const SEGMENTS: [&str; 4] = ["consumer", "small-business", "enterprise", "public"];
const TIERS: [&str; 4] = ["bronze", "silver", "gold", "platinum"];
const CHANNELS: [&str; 4] = ["web", "app", "store", "phone"];
const STATUSES: [&str; 3] = ["placed", "paid", "shipped"];
const CITIES: [&str; 8] = [
    "zurich", "basel", "geneva", "bern", "lausanne", "lugano", "chur", "sion",
];
const TIMEZONES: [&str; 4] = [
    "Europe/Zurich",
    "Europe/London",
    "Europe/Lisbon",
    "Europe/Helsinki",
];
const CURRENCIES: [&str; 4] = ["CHF", "EUR", "GBP", "PLN"];

/// Number of regions (the third, small dimension table).
pub const REGIONS: u64 = 40;

/// A deterministic pseudo-random sequence (xorshift64), so runs are comparable.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn pick<'a>(values: &[&'a str], i: u64) -> &'a str {
    values[(i % values.len() as u64) as usize]
}

pub fn region_code(id: u64) -> String {
    format!("r{:02}", id % REGIONS)
}

/// `(key, value)` of customer `id`: upsert JSON keyed by `id`.
pub fn customer(id: u64) -> (String, String) {
    let first = pick(&FIRST, id);
    let last = pick(&LAST, id / 16);
    let value = json!({
        "id": id,
        "name": format!("{first} {last} {id}"),
        "email": format!("{first}.{last}.{id}@example.com"),
        "country": pick(&COUNTRIES, id / 7),
        "region": region_code(id),
        "segment": pick(&SEGMENTS, id / 3),
        "signup_date": format!("20{:02}-{:02}-{:02}", 10 + id % 15, 1 + id % 12, 1 + id % 28),
        "credit_limit": (id % 50) as f64 * 250.0 + 500.0,
        "active": !id.is_multiple_of(11),
        "updated_at": 1_700_000_000_000u64 + id,
    });
    (id.to_string(), value.to_string())
}

/// The customer columns the one-join cases (and the Redis design) add to an order.
pub const CUSTOMER_SELECT: [&str; 5] = ["name", "email", "country", "region", "segment"];

/// The profile columns the three-join cases add, as `profile_<column>`.
pub const PROFILE_SELECT: [&str; 3] = ["tier", "lifetime_value", "orders_count"];
/// The region columns the three-join cases add, as `region_<column>`.
pub const REGION_SELECT: [&str; 3] = ["name", "timezone", "currency"];

/// The value the Redis design stores per customer: the selected columns as JSON.
pub fn customer_cached(id: u64) -> String {
    let first = pick(&FIRST, id);
    let last = pick(&LAST, id / 16);
    json!({
        "name": format!("{first} {last} {id}"),
        "email": format!("{first}.{last}.{id}@example.com"),
        "country": pick(&COUNTRIES, id / 7),
        "region": region_code(id),
        "segment": pick(&SEGMENTS, id / 3),
    })
    .to_string()
}

/// `(key, value)` of the profile of customer `id`, keyed by `customer_id`.
pub fn profile(id: u64) -> (String, String) {
    let value = json!({
        "customer_id": id,
        "tier": pick(&TIERS, id / 5),
        "lifetime_value": (id % 997) as f64 * 13.75,
        "orders_count": (id % 180) as i64,
        "preferred_channel": pick(&CHANNELS, id / 2),
        "last_seen": 1_760_000_000_000u64 + id * 37,
    });
    (id.to_string(), value.to_string())
}

/// `(key, value)` of region `i` (0-based), keyed by `code`.
pub fn region(i: u64) -> (String, String) {
    let code = region_code(i);
    let value = json!({
        "code": code,
        "name": format!("region {i} of {}", pick(&COUNTRIES, i)),
        "timezone": pick(&TIMEZONES, i),
        "currency": pick(&CURRENCIES, i / 3),
        "tax_rate": 0.05 + (i % 7) as f64 * 0.01,
    });
    (code, value.to_string())
}

/// The customer id of order `n`: one of `customers` 95% of the time, else unknown.
pub fn order_customer(rng: &mut Rng, customers: u64) -> u64 {
    if rng.below(100) < 95 {
        1 + rng.below(customers)
    } else {
        UNKNOWN_BASE + rng.below(customers.max(1))
    }
}

/// The customer id of order `n` of the unknown-key storm: a known customer 5% of the
/// time, else an unknown id seen by no other order (every miss reaches the table).
pub fn storm_customer(rng: &mut Rng, n: u64, customers: u64) -> u64 {
    if rng.below(100) < 5 {
        1 + rng.below(customers)
    } else {
        UNKNOWN_BASE + n
    }
}

/// `(key, value)` of order `n` (1-based) for `customer_id`, keyed by `order_id`.
pub fn order(n: u64, customer_id: u64) -> (String, String) {
    let value = json!({
        "order_id": n,
        "customer_id": customer_id,
        "sku": format!("SKU-{:06}", (n * 7919) % 250_000),
        "quantity": 1 + n % 5,
        "unit_price": ((n * 31) % 20_000) as f64 / 100.0,
        "currency": pick(&CURRENCIES, n),
        "channel": pick(&CHANNELS, n / 3),
        "status": pick(&STATUSES, n / 11),
        "shipping_city": pick(&CITIES, n / 13),
        "created_at": 1_780_000_000_000u64 + n,
    });
    (n.to_string(), value.to_string())
}
