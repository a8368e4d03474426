//! The lakejoin enrich cases: `lakejoin run` with one `[[enrich]]` pipeline of one join
//! (customers) or three chained joins (customers, their profiles, their regions), with
//! the case's cache, on an orders topic; every output record is checked.

use anyhow::Result;

use crate::lakejoin::{Lakejoin, Variant, config_head, metric, table};
use crate::report::CaseResult;
use crate::util::proc_status_kib;
use crate::{Bench, Orders, STALL, data};

/// `["a", "b"]` for the TOML of a `select`.
fn quoted(columns: &[&str]) -> String {
    columns
        .iter()
        .map(|c| format!("\"{c}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Bench {
    pub(super) fn enrich(
        &self,
        case: &str,
        cache: &str,
        joins: usize,
        orders: &Orders,
        lakejoin: &Variant,
    ) -> Result<CaseResult> {
        let output = self.new_output(case)?;
        let mut config = config_head(
            &self.bootstrap,
            &self.topic(case),
            &self.warehouse,
            &lakejoin.kafka_properties,
        );
        config.push_str(table("shop.customers"));
        if joins == 3 {
            config.push_str(table("shop.customer_profile"));
            config.push_str(table("shop.regions"));
        }
        let cache_options = if cache == "partial" {
            "cache = \"partial\"\ncache_max_rows = 1000000\n".to_owned()
        } else {
            format!("cache = \"{cache}\"\n")
        };
        config.push_str(&format!(
            r#"
[[enrich]]
name = "orders-enriched"
topics = ["{orders}"]
format = "json"
output = {{ topic = "{output}", format = "json", key = "order_id" }}
{enrich_options}

[[enrich.join]]
table = "shop.customers"
on = {{ customer_id = "id" }}
select = [{customer_select}]
prefix = "customer_"
{cache_options}"#,
            orders = orders.topic,
            customer_select = quoted(&data::CUSTOMER_SELECT),
            enrich_options = std::env::var("LAKEJOIN_ENRICH_OPTIONS").unwrap_or_default(),
        ));
        if joins == 3 {
            config.push_str(&format!(
                r#"
[[enrich.join]]
table = "shop.customer_profile"
on = {{ customer_id = "customer_id" }}
select = [{profile_select}]
prefix = "profile_"
{cache_options}
[[enrich.join]]
table = "shop.regions"
on = {{ customer_region = "code" }}
select = [{region_select}]
prefix = "region_"
{cache_options}"#,
                profile_select = quoted(&data::PROFILE_SELECT),
                region_select = quoted(&data::REGION_SELECT),
            ));
        }
        let mut process = Lakejoin::start_variant(&self.dir, case, &config, lakejoin)?;
        let pid = process.pid();
        // CPU from ready (caches loaded) to the last output acknowledged, over the orders
        // not yet consumed when it started, scaled to all of them (as for Flink below).
        // Ready says the pipeline has partitions, which lakejoin learns up to a second
        // after it starts consuming: a meter started at ready alone missed that second's
        // CPU while counting its records (session 26). Records consumed and not yet
        // produced at the start are left out, though part of their work is in the
        // window: the figure errs high, never low.
        process.wait_ready(STALL)?;
        let consumed =
            "lakejoin_records_consumed_total{pipeline=\"orders-enriched\",kind=\"enrich\"}";
        let at_start = metric(&process.metrics()?, consumed).unwrap_or(0.0) as u64;
        let meter = self.meter(pid, &[])?;
        self.wait_produced(&mut process, self.settings.orders)?;
        let n = self.settings.orders;
        let cpu = meter
            .stop()?
            .scaled(n as f64 / (n - at_start.min(n - 1)) as f64);
        let rss_mib = proc_status_kib(pid, "VmHWM").unwrap_or(0) as f64 / 1024.0;
        let metrics = process.metrics().unwrap_or_default();
        let instructions = process.stop_counting()?;
        let scan = self.scan(&output, joins, orders)?;
        let matched_kind = if joins == 1 {
            "customer"
        } else {
            "customer, profile and region"
        };
        let counter = |name: &str| -> f64 {
            metrics
                .lines()
                .filter(|l| l.starts_with(name))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum()
        };
        // Small poll batches mean the pipeline kept up with its input (see the README's
        // `lakejoin_fact_batches_total`).
        let hits = counter("lakejoin_lookup_hits_total{");
        let batch = counter("lakejoin_records_consumed_total{")
            / counter("lakejoin_fact_batches_total{").max(1.0);
        CaseResult::measured(
            &scan,
            &format!(
                "{:.1}% with {matched_kind} matched ({hits:.0} lookup hits); peak RSS {rss_mib:.0} MiB; mean poll batch {batch:.1} facts; CPU over the last {} orders consumed",
                100.0 * scan.accepted as f64 / scan.records as f64,
                self.settings.orders.saturating_sub(at_start),
            ),
        )
        .map(|r| {
            r.with_cpu(cpu)
                .with_peak_rss(rss_mib)
                .with_instructions(instructions)
        })
    }
}
