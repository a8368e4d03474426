//! Setting a run up: the dimension topics and the orders produced once, then the
//! dimension tables loaded by a `lakejoin run` and compacted, before any case runs.
//! Apart from `main.rs` so that the cases' code reads without the set-up around it.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::kafka::{BulkProducer, create_topics};
use crate::lakejoin::{Lakejoin, config_head, covers, table};
use crate::util::wait_for;
use crate::{Bench, STORM_CASE, data};

impl Bench {
    /// Produces the dimension topics and the orders once.
    pub(crate) fn produce_data(&mut self) -> Result<()> {
        let s = &self.settings;
        create_topics(
            &self.bootstrap,
            &[
                (&self.customers_topic, 4),
                (&self.profiles_topic, 4),
                (&self.regions_topic, 1),
                (&self.orders.topic, s.partitions),
            ],
        )?;
        let producer = BulkProducer::new(&self.bootstrap)?;
        let started = Instant::now();
        for id in 1..=s.customers {
            let (k, v) = data::customer(id);
            producer.send(&self.customers_topic, &k, &v)?;
            let (k, v) = data::profile(id);
            producer.send(&self.profiles_topic, &k, &v)?;
        }
        for i in 0..data::REGIONS {
            let (k, v) = data::region(i);
            producer.send(&self.regions_topic, &k, &v)?;
        }
        let mut rng = data::Rng::new(0x5eed);
        for n in 1..=s.orders {
            let customer = data::order_customer(&mut rng, s.customers);
            self.orders.customer_of.push(customer);
            let (k, v) = data::order(n, customer);
            producer.send(&self.orders.topic, &k, &v)?;
        }
        if s.wants(STORM_CASE) {
            create_topics(&self.bootstrap, &[(&self.storm.topic, s.partitions)])?;
            let mut rng = data::Rng::new(0x570a);
            for n in 1..=s.orders {
                let customer = data::storm_customer(&mut rng, n, s.customers);
                self.storm.customer_of.push(customer);
                let (k, v) = data::order(n, customer);
                producer.send(&self.storm.topic, &k, &v)?;
            }
        }
        producer.flush()?;
        let hits = self.orders.known(s.customers);
        println!(
            "produced {} customers, {} profiles, {} regions, {} orders ({} with a known customer) in {:.1} s",
            s.customers,
            s.customers,
            data::REGIONS,
            s.orders,
            hits,
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// Loads the three dimension tables with one `lakejoin run` of three CDC pipelines,
    /// stops it once every record is committed, then compacts each table fully.
    pub(crate) fn load_dimensions(&self) -> Result<()> {
        let mut config = config_head(
            &self.bootstrap,
            &self.topic("load"),
            &self.warehouse,
            &self.lakejoin.kafka_properties,
        );
        let customers = self.settings.customers;
        let loads = [
            (
                "customers-cdc",
                &self.customers_topic,
                "shop.customers",
                customers,
            ),
            (
                "profiles-cdc",
                &self.profiles_topic,
                "shop.customer_profile",
                customers,
            ),
            (
                "regions-cdc",
                &self.regions_topic,
                "shop.regions",
                data::REGIONS,
            ),
        ];
        for (pipeline, topic, name, _) in loads {
            config.push_str(table(name));
            config.push_str(&format!(
                "\n[[cdc]]\nname = \"{pipeline}\"\ntopics = [\"{topic}\"]\nformat = \"upsert-json\"\ntable = \"{name}\"\n"
            ));
        }
        let started = Instant::now();
        let mut process =
            Lakejoin::start(&self.dir, "load-dimensions", &config, &self.lakejoin.binary)?;
        for (pipeline, topic, name, records) in loads {
            wait_for(
                &format!("{name} to commit every record of {topic}"),
                Duration::from_secs(900),
                || {
                    process.check_alive()?;
                    covers(&self.warehouse, name, pipeline, records)
                },
            )?;
        }
        process.stop()?;
        for (_, _, name, _) in loads {
            let output = std::process::Command::new(&self.lakejoin.binary)
                .args(["table", "compact", "--full", "--table", name, "--warehouse"])
                .arg(format!("file://{}", self.warehouse.display()))
                .output()
                .context("running lakejoin table compact")?;
            if !output.status.success() {
                bail!(
                    "lakejoin table compact --full {name} failed: {}",
                    String::from_utf8_lossy(&output.stderr)
                );
            }
        }
        println!(
            "loaded and compacted the dimension tables in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }
}
