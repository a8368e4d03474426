//! Turning consumed facts into output records: decode, join, encode.
//!
//! Facts are enriched a poll batch at a time: every join looks up the batch's keys in one
//! [`LookupTable::get_many`](crate::lookup::LookupTable::get_many) call. A fact that
//! has to wait (`wait_for_cdc` not yet covered) or retry a miss leaves the batch and is
//! finished on its own path ([`enrich_one`]), from the start, so what it does is exactly
//! what a fact enriched alone does.
//!
//! Only a fault of the fact itself (it does not decode, its key does not convert, its
//! output does not encode) makes a dead letter. A fault of what the fact depends on (a
//! lookup's store or local files, the schema registry) says nothing about the fact: the
//! fact is held and tried again with backoff, on its own, until it succeeds, and its offset
//! is not committed meanwhile; the pipeline reports the fault on `/health/ready`. Without
//! that, an S3 throttle or a registry restart would drop good facts from the output.

use std::sync::Arc;
use std::time::{Duration, Instant};

use smallvec::{SmallVec, smallvec};
use tokio::sync::watch;

use super::join::{Facts, Join, JoinKey};
use crate::codec::{Fact, FactDecoder, KafkaRecord, OutputEncoder};
use crate::config::EnrichConfig;
use crate::error::Error;
use crate::kafka::Consumed;
use crate::lookup::RowFields;
use crate::observe::PipelineMetrics;
use crate::table::datum::Datum;

/// An output record: its key (`None`: the fact's own) and payload, in one buffer (one
/// allocation per record, not one for each).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Output {
    /// The key's bytes, if any, then the payload's.
    bytes: Vec<u8>,
    key_len: Option<usize>,
}

impl Output {
    /// The key set by `output.key` (`None`: the fact's own key is kept).
    pub(crate) fn key(&self) -> Option<&[u8]> {
        self.bytes.get(..self.key_len?)
    }

    pub(crate) fn payload(&self) -> &[u8] {
        self.bytes
            .get(self.key_len.unwrap_or(0)..)
            .unwrap_or_default()
    }
}

/// A fact's output records: nearly always one (inline).
pub(crate) type Outputs = SmallVec<[Output; 1]>;

/// A fact whose lookups finished: what to produce (nothing: dropped), or why not.
pub(crate) type Enriched = (Consumed, std::result::Result<Outputs, FactError>);

/// Why a fact was not turned into output records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FactError {
    /// The fact itself is bad: it goes to the dead-letter topic with this reason.
    Bad(String),
    /// Something the fact depends on failed (a lookup, the schema registry); the fact is
    /// held and tried again.
    Held(String),
    /// Shutdown came while the fact was held: it is neither produced nor committed, so
    /// the next run reads it again.
    Unfinished,
}

impl FactError {
    /// A lookup's error: never the fact's fault.
    pub(crate) fn held(error: Error) -> Self {
        FactError::Held(error.to_string())
    }
}

/// First wait before a held fact is tried again; it doubles up to [`HOLD_MAX`].
const HOLD_FIRST: Duration = Duration::from_millis(100);
const HOLD_MAX: Duration = Duration::from_secs(30);

/// What a batch gives back: facts finished, in input order, and facts that left the batch
/// to wait or retry, which the caller enriches one by one (only when the pipeline is
/// unordered; ordered batches finish them before returning).
#[derive(Default)]
pub(crate) struct BatchOutcome {
    pub(crate) done: Vec<Enriched>,
    pub(crate) deferred: Vec<Consumed>,
}

/// What a pipeline's fact futures share.
pub(crate) struct Enricher {
    pub(crate) config: EnrichConfig,
    pub(crate) joins: Vec<Join>,
    pub(crate) decoder: FactDecoder,
    pub(crate) encoder: OutputEncoder,
    pub(crate) metrics: Arc<PipelineMetrics>,
    /// Ends the wait of held facts.
    pub(crate) shutdown: watch::Receiver<bool>,
}

/// A joined fact of a batch: (fact index, join index, matched). Counted in the metrics
/// once its fact finishes in the batch.
type JoinOutcome = (usize, usize, bool);

/// Where a fact of a batch stands.
enum Progress<'a> {
    /// The facts it has become so far (one per match of each join so far).
    Joining(Facts<'a>),
    /// A dead letter ([`FactError::Bad`], with the reason).
    Failed(FactError),
    /// Something it depends on failed: it is finished on its own path, which holds it.
    Held,
    /// Left the batch to wait or retry.
    OnItsOwn,
}

impl Enricher {
    /// Enriches one fact on its own, holding it while what it depends on fails.
    pub(crate) async fn enrich(self: Arc<Self>, message: Consumed) -> BatchOutcome {
        let mut shutdown = self.shutdown.clone();
        let mut wait = HOLD_FIRST;
        let mut held = false;
        let result = loop {
            let result = enrich_one(
                &message.record(),
                &self.decoder,
                &self.joins,
                &self.encoder,
                &self.config,
                &self.metrics,
            )
            .await;
            let Err(FactError::Held(reason)) = result else {
                if held {
                    self.metrics.set_hold_fault(None);
                }
                break result;
            };
            PipelineMetrics::add(&self.metrics.held_retries, 1);
            if !held || wait == HOLD_MAX {
                tracing::warn!(
                    pipeline = %self.config.name,
                    topic = message.topic(),
                    partition = message.partition(),
                    offset = message.offset(),
                    error = %reason,
                    retry_in = ?wait,
                    "fact held: a lookup or the schema registry failed; trying again"
                );
            }
            self.metrics
                .set_hold_fault(Some(format!("facts held, trying again: {reason}")));
            held = true;
            if *shutdown.borrow() {
                break Err(FactError::Unfinished);
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.changed() => break Err(FactError::Unfinished),
            }
            wait = (wait * 2).min(HOLD_MAX);
        };
        BatchOutcome {
            done: vec![(message, result)],
            deferred: Vec::new(),
        }
    }

    /// Enriches a batch of facts with one lookup per join for the whole batch.
    pub(crate) async fn enrich_batch(self: Arc<Self>, messages: Vec<Consumed>) -> BatchOutcome {
        let mut progress = Vec::with_capacity(messages.len());
        for message in &messages {
            let record = message.record();
            let decoded = match self.decoder.prepare(&record).await {
                Ok(()) => self.decoder.decode(&record),
                Err(e) => Err(e),
            };
            progress.push(match decoded {
                Ok(Some(fact)) => {
                    Progress::Joining(smallvec![with_room_for_joins(fact, &self.joins)])
                }
                // A tombstone carries no fact.
                Ok(None) => Progress::Joining(Facts::new()),
                Err(e) if e.is_transient() => Progress::Held,
                Err(e) => Progress::Failed(FactError::Bad(e.to_string())),
            });
        }
        // Every joined fact's outcome, counted once its fact finishes here (a fact that
        // leaves the batch is counted on its own path), and each join's lookup time per
        // key.
        let mut matches: Vec<JoinOutcome> = Vec::with_capacity(messages.len());
        let mut shares = Vec::with_capacity(self.joins.len());
        for (j, join) in self.joins.iter().enumerate() {
            shares.push(
                self.join_batch(j, join, &messages, &mut progress, &mut matches)
                    .await,
            );
        }
        self.record_joins(&progress, &matches, &shares);
        // `None`: the fact left the batch.
        let results: Vec<Option<std::result::Result<Outputs, FactError>>> = progress
            .into_iter()
            .map(|state| match state {
                Progress::Joining(facts) => Some(encode_all(&facts, &self.encoder, &self.config)),
                Progress::Failed(e) => Some(Err(e)),
                Progress::OnItsOwn | Progress::Held => None,
            })
            .collect();
        let mut outcome = BatchOutcome::default();
        let mut on_their_own = Vec::new();
        for (message, result) in messages.into_iter().zip(results) {
            match result {
                Some(result) => outcome.done.push((message, result)),
                None => {
                    on_their_own.push(outcome.done.len());
                    outcome.deferred.push(message);
                }
            }
        }
        if self.config.ordered && !outcome.deferred.is_empty() {
            // Finish them here, concurrently, and put each back in its place.
            let finished = futures::future::join_all(
                std::mem::take(&mut outcome.deferred)
                    .into_iter()
                    .map(|m| self.clone().enrich(m)),
            )
            .await;
            for (place, done) in on_their_own.into_iter().zip(finished).rev() {
                outcome.done.splice(place..place, done.done);
            }
        }
        outcome
    }

    /// Counts the joins of the facts that finished in the batch (still joining), per
    /// join at once.
    fn record_joins(
        &self,
        progress: &[Progress<'_>],
        matches: &[JoinOutcome],
        shares: &[Duration],
    ) {
        let mut counts = vec![(0u64, 0u64); shares.len()];
        for &(i, j, hit) in matches {
            if let (Some(Progress::Joining(_)), Some((hits, misses))) =
                (progress.get(i), counts.get_mut(j))
            {
                *if hit { hits } else { misses } += 1;
            }
        }
        for (j, ((hits, misses), share)) in counts.into_iter().zip(shares).enumerate() {
            self.metrics.record_joins(j, hits, misses, *share);
        }
    }

    /// Join `j` for every fact of the batch still joining; returns the time per key of
    /// the lookup and of adding its columns (each fact's share of it).
    async fn join_batch<'a>(
        &self,
        j: usize,
        join: &'a Join,
        messages: &[Consumed],
        progress: &mut [Progress<'a>],
        matches: &mut Vec<JoinOutcome>,
    ) -> Duration {
        // The keys of every fact (`None`: a missing or null key field, a miss).
        let mut keys: Vec<(usize, Option<JoinKey>)> = Vec::with_capacity(messages.len());
        for (i, (message, state)) in messages.iter().zip(progress.iter_mut()).enumerate() {
            let Progress::Joining(facts) = state else {
                continue;
            };
            if join.must_wait(message.timestamp().to_millis()) {
                *state = Progress::OnItsOwn;
                continue;
            }
            let before = keys.len();
            for fact in facts.iter() {
                match join.key(fact) {
                    Ok(key) => keys.push((i, key)),
                    Err(reason) => {
                        keys.truncate(before);
                        *state = Progress::Failed(reason);
                        break;
                    }
                }
            }
        }
        let started = Instant::now();
        let key_refs: Vec<Option<&[Datum]>> = keys.iter().map(|(_, k)| k.as_deref()).collect();
        // Keys are in fact order, a fact's keys one per form of it: each fact is taken out
        // of `progress` at its first key, joined form by form, and put back after its last.
        let mut current: Option<Joined<'a>> = None;
        let found = join
            .visit_many(&key_refs, |k, rows| {
                let Some(&(i, ref key)) = keys.get(k) else {
                    return Ok(());
                };
                if current.as_ref().is_none_or(|c| c.fact != i) {
                    if let Some(done) = current.take() {
                        done.finish(progress);
                    }
                    current = progress.get_mut(i).map(|state| Joined::take(i, state));
                }
                if let Some(joined) = current.as_mut() {
                    joined.join_form(j, join, key.is_some(), rows, matches);
                }
                Ok(())
            })
            .await;
        if let Some(done) = current.take() {
            done.finish(progress);
        }
        if found.is_err() {
            // The lookup failed, not the facts: each is held on its own path (and counts
            // no join here).
            for &(i, _) in &keys {
                if let Some(state) = progress.get_mut(i) {
                    *state = Progress::Held;
                }
            }
            return Duration::ZERO;
        }
        started.elapsed() / u32::try_from(keys.len().max(1)).unwrap_or(u32::MAX)
    }
}

/// A fact of a batch while one join adds its columns to each of its forms.
struct Joined<'a> {
    /// Its index in the batch.
    fact: usize,
    /// Its forms not joined yet (empty unless it was still joining).
    forms: smallvec::IntoIter<[Fact<'a>; 1]>,
    /// What it becomes.
    joined: Facts<'a>,
    /// A form missed and the join retries misses: the fact leaves the batch.
    miss_to_retry: bool,
    /// How it ended if not joining: the state it had (not joining), or a failure here.
    ended: Option<Progress<'a>>,
}

impl<'a> Joined<'a> {
    /// Takes fact `fact`'s forms out of its `state`.
    fn take(fact: usize, state: &mut Progress<'a>) -> Self {
        match std::mem::replace(state, Progress::OnItsOwn) {
            Progress::Joining(forms) => Joined {
                fact,
                forms: forms.into_iter(),
                joined: Facts::new(),
                miss_to_retry: false,
                ended: None,
            },
            // Only joining facts have keys; keep whatever else it was.
            other => Joined {
                fact,
                forms: Facts::new().into_iter(),
                joined: Facts::new(),
                miss_to_retry: false,
                ended: Some(other),
            },
        }
    }

    /// Joins the next form with `rows`, the rows of its key (`has_key`: not a missing
    /// or null key field).
    fn join_form(
        &mut self,
        j: usize,
        join: &'a Join,
        has_key: bool,
        rows: &[RowFields<'_>],
        matches: &mut Vec<JoinOutcome>,
    ) {
        if self.ended.is_some() {
            return;
        }
        let Some(form) = self.forms.next() else {
            return;
        };
        if rows.is_empty() && has_key && join.retries() {
            self.miss_to_retry = true;
        }
        match join.emit(form, rows, &mut self.joined) {
            Ok(hit) => matches.push((self.fact, j, hit)),
            // A looked-up row that did not read back: held on its own path.
            Err(FactError::Held(_)) => self.ended = Some(Progress::Held),
            Err(reason) => self.ended = Some(Progress::Failed(reason)),
        }
    }

    /// Puts the fact back in `progress`, as what it became.
    fn finish(self, progress: &mut [Progress<'a>]) {
        let state = match self.ended {
            Some(ended) => ended,
            None if self.miss_to_retry => Progress::OnItsOwn,
            None => Progress::Joining(self.joined),
        };
        if let Some(slot) = progress.get_mut(self.fact) {
            *slot = state;
        }
    }
}

/// Decodes and joins one fact on its own: the records to produce (none when an INNER
/// join dropped it, several when a join matched several rows); `Err` is a bad record for
/// the dead-letter topic.
pub(crate) async fn enrich_one(
    record: &KafkaRecord<'_>,
    decoder: &FactDecoder,
    joins: &[Join],
    encoder: &OutputEncoder,
    config: &EnrichConfig,
    metrics: &PipelineMetrics,
) -> std::result::Result<Outputs, FactError> {
    decoder.prepare(record).await.map_err(|e| {
        if e.is_transient() {
            FactError::Held(e.to_string())
        } else {
            FactError::Bad(e.to_string())
        }
    })?;
    let Some(fact) = decoder
        .decode(record)
        .map_err(|e| FactError::Bad(e.to_string()))?
    else {
        // A tombstone carries no fact.
        return Ok(Outputs::new());
    };
    let mut facts: Facts<'_> = smallvec![with_room_for_joins(fact, joins)];
    for (i, join) in joins.iter().enumerate() {
        let mut joined = Facts::with_capacity(facts.len());
        for fact in facts {
            let started = Instant::now();
            let matched = join
                .apply(fact, record.timestamp_ms, metrics, &mut joined)
                .await?;
            metrics.record_join(i, matched, started.elapsed());
        }
        facts = joined;
    }
    encode_all(&facts, encoder, config)
}

/// Bytes of JSON reserved per joined column before the joins run (a number, or a short
/// string and its quotes); a join whose columns are longer makes room for itself.
const JSON_BYTES_PER_COLUMN: usize = 24;

/// A decoded fact with room for what all of `joins` add: one allocation, where growing
/// it join after join took one each (and a copy).
fn with_room_for_joins<'a>(mut fact: Fact<'a>, joins: &[Join]) -> Fact<'a> {
    let columns: usize = joins.iter().map(Join::added_columns).sum();
    fact.reserve(columns, columns * JSON_BYTES_PER_COLUMN);
    fact
}

/// The output records of a fact's joined forms.
fn encode_all(
    facts: &[Fact<'_>],
    encoder: &OutputEncoder,
    config: &EnrichConfig,
) -> std::result::Result<Outputs, FactError> {
    facts
        .iter()
        .map(|fact| {
            let mut bytes = Vec::with_capacity(fact.encoded_len_hint() + 16);
            let key_len = match &config.output.key {
                Some(path) => fact
                    .write_record_key(path, &mut bytes)
                    .map_err(|e| FactError::Bad(e.to_string()))?
                    .then_some(bytes.len()),
                None => None,
            };
            fact.encode_into(encoder, &mut bytes)
                .map_err(|e| FactError::Bad(e.to_string()))?;
            Ok(Output { bytes, key_len })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use rdkafka::Timestamp;
    use serde_json::{Value, json};

    use super::*;
    use crate::lookup::{LookupSpec, LookupTable, Strategy as Cache, TableLookups};
    use crate::lsm::point_lookup::{LookupOptions, PointLookup};
    use crate::lsm::writer::TableWriter;
    use crate::pipeline::enrich::JoinPlan;
    use crate::table::Warehouse;
    use crate::table::datum::Row;
    use crate::table::row_kind::RowKind;

    /// Two joins: customers by primary key (LEFT), then the customer's country's
    /// stores by a non-key column (INNER, several matches), as a pipeline builds them.
    const CONFIG: &str = r#"
        [kafka]
        bootstrap_servers = "unused:9092"
        [warehouse]
        uri = "memory://"
        [[table]]
        name = "shop.customers"
        columns = [{ name = "id", type = "INT" }, { name = "name", type = "STRING" }, { name = "country", type = "STRING" }]
        primary_key = ["id"]
        buckets = 2
        [[table]]
        name = "shop.stores"
        columns = [{ name = "store", type = "INT" }, { name = "country", type = "STRING" }]
        primary_key = ["store"]
        buckets = 1
        [[enrich]]
        name = "orders"
        topics = ["orders"]
        output = { topic = "out", key = "order_id" }
        [[enrich.join]]
        table = "shop.customers"
        on = { customer_id = "id" }
        select = ["name", "country"]
        cache = "full"
        [[enrich.join]]
        table = "shop.stores"
        kind = "inner"
        on = { country = "country" }
        select = ["store"]
        cache = "full"
    "#;

    /// The pipeline of `CONFIG`, its customers joined through a `customers` cache (the
    /// stores join, on a non-key column, needs `full`).
    async fn enricher(ordered: bool, customers: Cache) -> Arc<Enricher> {
        let mut config = crate::config::from_toml("test", CONFIG).unwrap();
        config.enrich[0].ordered = ordered;
        let warehouse = Warehouse::from_uri("memory://", &BTreeMap::new()).unwrap();
        let mut joins = Vec::new();
        let mut join_metrics = Vec::new();
        let rows: [(&str, Vec<Row>); 2] = [
            (
                "shop.customers",
                (0..6)
                    .map(|id| {
                        vec![
                            Datum::Int(id),
                            Datum::String(format!("c{id}").into()),
                            Datum::String(["ch", "de", "fr"][id as usize % 3].into()),
                        ]
                    })
                    .collect(),
            ),
            (
                "shop.stores",
                vec![
                    vec![Datum::Int(1), Datum::String("ch".into())],
                    vec![Datum::Int(2), Datum::String("ch".into())],
                    vec![Datum::Int(3), Datum::String("de".into())],
                ],
            ),
        ];
        for ((table_config, join_config), (_, table_rows)) in
            config.tables.iter().zip(&config.enrich[0].join).zip(rows)
        {
            let table = crate::pipeline::open_or_create(
                &warehouse,
                &table_config.name,
                table_config.to_schema().unwrap(),
            )
            .await
            .unwrap();
            let mut writer = TableWriter::new(table.clone(), "test").await.unwrap();
            for row in table_rows {
                writer.write(RowKind::Insert, row).unwrap();
            }
            writer.commit(BTreeMap::new()).await.unwrap();
            let point = Arc::new(
                PointLookup::open(table.clone(), LookupOptions::default())
                    .await
                    .unwrap(),
            );
            let plan = JoinPlan::new(join_config, table.schema()).unwrap();
            let spec = LookupSpec {
                strategy: if table_config.name == "shop.customers" {
                    customers.clone()
                } else {
                    Cache::Full
                },
                key_columns: plan.key_columns.clone(),
                projection: plan.projection.clone(),
                partition: None,
            };
            let lookup = Arc::new(LookupTable::new(point.clone(), spec).unwrap());
            TableLookups::new(point, vec![lookup.clone()])
                .load()
                .await
                .unwrap();
            join_metrics.push(crate::observe::JoinMetrics::new(&table_config.name));
            joins.push(Join::new(join_config, plan, lookup, None));
        }
        let e = &config.enrich[0];
        Arc::new(Enricher {
            config: e.clone(),
            joins,
            decoder: crate::pipeline::fact_decoder(e).unwrap(),
            encoder: crate::pipeline::output_encoder(&e.output).unwrap(),
            metrics: Arc::new(PipelineMetrics::with_joins(join_metrics)),
            shutdown: watch::channel(false).1,
        })
    }

    /// Facts of every kind a batch meets: matches, unknown and null keys, a key of the
    /// wrong type, bad JSON, a tombstone, a fact without a join key.
    fn payload(kind: u8, n: i64) -> Option<Vec<u8>> {
        let fact = match kind {
            0 => json!({"order_id": n, "customer_id": n % 8}),
            1 => json!({"order_id": n, "customer_id": null}),
            2 => json!({"order_id": n, "customer_id": "not a number"}),
            3 => return Some(b"{not json".to_vec()),
            4 => return None,
            _ => json!({"order_id": n}),
        };
        Some(fact.to_string().into_bytes())
    }

    fn message(kind: u8, offset: i64) -> Consumed {
        Consumed::of(&rdkafka::message::OwnedMessage::new(
            payload(kind, offset),
            Some(offset.to_string().into_bytes()),
            "orders".into(),
            Timestamp::CreateTime(1_000 + offset),
            0,
            offset,
            None,
        ))
    }

    fn results(outcome: &[Enriched]) -> Vec<(i64, std::result::Result<Outputs, FactError>)> {
        outcome
            .iter()
            .map(|(m, r)| (m.offset(), r.clone()))
            .collect()
    }

    #[tokio::test]
    async fn a_batch_joins_hits_misses_and_bad_records() {
        let enricher = enricher(true, Cache::Full).await;
        // Customers 0 (ch: two stores), 1 (de: one), 2 (fr: none, INNER drops it), 7
        // (unknown: LEFT gives nulls, then INNER on a null country drops it); bad JSON.
        let messages = vec![
            message(0, 0),
            message(0, 1),
            message(0, 2),
            message(0, 7),
            message(3, 8),
        ];
        let done = enricher.enrich_batch(messages).await.done;
        let outputs: Vec<std::result::Result<Vec<Value>, FactError>> = done
            .into_iter()
            .map(|(_, r)| {
                r.map(|records| {
                    records
                        .iter()
                        .map(|output| serde_json::from_slice(output.payload()).unwrap())
                        .collect()
                })
            })
            .collect();
        let store = |order: i64, customer: &str, store: i64| {
            let country = ["ch", "de"][order as usize];
            json!({"order_id": order, "customer_id": order, "name": customer, "country": country, "store": store})
        };
        assert_eq!(outputs[0], Ok(vec![store(0, "c0", 1), store(0, "c0", 2)]));
        assert_eq!(outputs[1], Ok(vec![store(1, "c1", 3)]));
        assert_eq!(outputs[2], Ok(vec![]));
        assert_eq!(outputs[3], Ok(vec![]));
        assert!(
            matches!(&outputs[4], Err(FactError::Bad(e)) if e.contains("JSON")),
            "{:?}",
            outputs[4]
        );
    }

    /// An output record's key (`output.key`) and payload share one buffer and read back
    /// apart: a string key as its text, a number as its JSON, no key field as the fact's
    /// own key (`None`), and no `output.key` as no key of its own either.
    #[test]
    fn output_records_read_back_their_key_and_payload() {
        let mut config = crate::config::from_toml("test", CONFIG).unwrap().enrich[0].clone();
        let payloads: [(&str, Option<&[u8]>); 3] = [
            (r#"{"order_id": "o-1", "n": 1}"#, Some(b"o-1")),
            (r#"{"order_id": 42}"#, Some(b"42")),
            (r#"{"n": 2}"#, None),
        ];
        for (payload, key) in payloads {
            let fact = Fact::raw(payload.as_bytes()).unwrap();
            let outputs = encode_all(&[fact], &OutputEncoder::Json, &config).unwrap();
            assert_eq!(outputs.len(), 1);
            assert_eq!(outputs[0].key(), key, "{payload}");
            assert_eq!(outputs[0].payload(), payload.as_bytes());
        }
        config.output.key = None;
        let fact = Fact::raw(payloads[0].0.as_bytes()).unwrap();
        let outputs = encode_all(&[fact], &OutputEncoder::Json, &config).unwrap();
        assert_eq!(outputs[0].key(), None);
        assert_eq!(outputs[0].payload(), payloads[0].0.as_bytes());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

        /// A batch gives exactly what enriching each fact on its own gives, in order,
        /// and counts each fact's hits and misses once, whatever the cache (a batch reads
        /// a `full` cache's rows in place, a fact on its own copies them out).
        #[test]
        fn a_batch_equals_its_facts_enriched_one_by_one(
            kinds in prop::collection::vec(0u8..6, 1..40),
            customers in prop::sample::select(vec![0usize, 1, 2]),
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let partial = crate::lookup::PartialOptions {
                    max_rows: 4,
                    max_bytes: None,
                    expire_after_write: None,
                    expire_after_access: None,
                    cache_missing_keys: true,
                };
                let cache = || [Cache::Full, Cache::Partial(partial.clone()), Cache::None][customers].clone();
                let batched = enricher(true, cache()).await;
                let single = enricher(true, cache()).await;
                let messages: Vec<Consumed> = kinds
                    .iter()
                    .enumerate()
                    .map(|(i, &k)| message(k, i as i64))
                    .collect();
                let outcome = batched.clone().enrich_batch(messages.clone()).await;
                prop_assert!(outcome.deferred.is_empty());
                let mut expected = Vec::new();
                for m in messages {
                    expected.extend(single.clone().enrich(m).await.done);
                }
                prop_assert_eq!(results(&outcome.done), results(&expected));
                for (a, b) in [
                    (&batched.metrics.join_hits, &single.metrics.join_hits),
                    (&batched.metrics.join_misses, &single.metrics.join_misses),
                ] {
                    prop_assert_eq!(PipelineMetrics::get(a), PipelineMetrics::get(b));
                }
                for (a, b) in batched.metrics.joins.iter().zip(&single.metrics.joins) {
                    prop_assert_eq!(PipelineMetrics::get(&a.hits), PipelineMetrics::get(&b.hits));
                    prop_assert_eq!(PipelineMetrics::get(&a.misses), PipelineMetrics::get(&b.misses));
                }
                Ok(())
            })?;
        }
    }
}
