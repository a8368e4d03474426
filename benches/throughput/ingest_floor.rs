//! The floor under any CDC ingest of the orders: a loop written for this data that reads
//! each order into Arrow column builders and writes them as zstd Parquet files, and
//! nothing else.
//!
//! Why: the CDC ingest target (≥ 0.8× the passthrough's records/s) only means something
//! next to what the work itself costs on this machine. This loop does the least any ingest
//! into Parquet must do: consume, validate and decode every record, encode and compress
//! its columns, write the files. It keeps no table (no key order, merge, sequence numbers,
//! buckets, manifests, snapshots, commits or compaction), so no table writer can use less
//! CPU per row; lakejoin's CDC ingest is measured against it.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use arrow::array::{ArrayRef, Float64Builder, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use rdkafka::message::Message;
use serde::Deserialize;

use crate::loops::{MAX_BATCH, consumer, poll_batch};

/// An order as `data::order` writes it; strings borrowed from the payload unless escaped.
#[derive(Deserialize)]
struct Order<'a> {
    order_id: i64,
    customer_id: i64,
    #[serde(borrow)]
    sku: Cow<'a, str>,
    quantity: i64,
    unit_price: f64,
    #[serde(borrow)]
    currency: Cow<'a, str>,
    #[serde(borrow)]
    channel: Cow<'a, str>,
    #[serde(borrow)]
    status: Cow<'a, str>,
    #[serde(borrow)]
    shipping_city: Cow<'a, str>,
    created_at: i64,
}

/// The orders' columns, as the `shop.orders` table of the CDC case has them.
fn schema() -> SchemaRef {
    let field = |name: &str, kind: DataType| Field::new(name, kind, false);
    Arc::new(Schema::new(vec![
        field("order_id", DataType::Int64),
        field("customer_id", DataType::Int64),
        field("sku", DataType::Utf8),
        field("quantity", DataType::Int64),
        field("unit_price", DataType::Float64),
        field("currency", DataType::Utf8),
        field("channel", DataType::Utf8),
        field("status", DataType::Utf8),
        field("shipping_city", DataType::Utf8),
        field("created_at", DataType::Int64),
    ]))
}

/// One column builder per field of [`schema`].
struct Columns {
    order_id: Int64Builder,
    customer_id: Int64Builder,
    sku: StringBuilder,
    quantity: Int64Builder,
    unit_price: Float64Builder,
    currency: StringBuilder,
    channel: StringBuilder,
    status: StringBuilder,
    shipping_city: StringBuilder,
    created_at: Int64Builder,
    rows: usize,
}

impl Columns {
    fn with_capacity(rows: usize) -> Self {
        let text = || StringBuilder::with_capacity(rows, rows * 12);
        Columns {
            order_id: Int64Builder::with_capacity(rows),
            customer_id: Int64Builder::with_capacity(rows),
            sku: text(),
            quantity: Int64Builder::with_capacity(rows),
            unit_price: Float64Builder::with_capacity(rows),
            currency: text(),
            channel: text(),
            status: text(),
            shipping_city: text(),
            created_at: Int64Builder::with_capacity(rows),
            rows: 0,
        }
    }

    fn push(&mut self, o: &Order<'_>) {
        self.order_id.append_value(o.order_id);
        self.customer_id.append_value(o.customer_id);
        self.sku.append_value(&o.sku);
        self.quantity.append_value(o.quantity);
        self.unit_price.append_value(o.unit_price);
        self.currency.append_value(&o.currency);
        self.channel.append_value(&o.channel);
        self.status.append_value(&o.status);
        self.shipping_city.append_value(&o.shipping_city);
        self.created_at.append_value(o.created_at);
        self.rows += 1;
    }

    /// The rows pushed since the last call, as one batch; the builders start empty again.
    fn finish(&mut self, schema: &SchemaRef) -> Result<RecordBatch> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.order_id.finish()),
            Arc::new(self.customer_id.finish()),
            Arc::new(self.sku.finish()),
            Arc::new(self.quantity.finish()),
            Arc::new(self.unit_price.finish()),
            Arc::new(self.currency.finish()),
            Arc::new(self.channel.finish()),
            Arc::new(self.status.finish()),
            Arc::new(self.shipping_city.finish()),
            Arc::new(self.created_at.finish()),
        ];
        self.rows = 0;
        Ok(RecordBatch::try_new(schema.clone(), columns)?)
    }
}

/// What the floor loop did: when it had its first order, when its last file was closed.
pub struct IngestSpan {
    pub first: Instant,
    pub last: Instant,
    pub files: usize,
    pub bytes: u64,
}

/// Consumes `n` orders from every partition of `input` and writes them to `dir` as
/// Parquet files of `rows_per_file` rows (zstd level 1, Paimon's default; dictionaries
/// as parquet-rs chooses).
pub fn hand_written_ingest(
    bootstrap: &str,
    input: &str,
    n: u64,
    dir: &Path,
    rows_per_file: usize,
) -> Result<IngestSpan> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let consumer = consumer(bootstrap, input)?;
    let schema = schema();
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1)?))
        .build();
    let mut columns = Columns::with_capacity(rows_per_file);
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut consumed = 0u64;
    let mut first = None;
    let (mut files, mut bytes) = (0, 0);
    while consumed < n {
        poll_batch(&consumer, MAX_BATCH, &mut batch)?;
        first.get_or_insert_with(Instant::now);
        for m in batch.drain(..) {
            let order: Order<'_> = serde_json::from_slice(m.payload().unwrap_or_default())
                .with_context(|| format!("the order at offset {} is not one", m.offset()))?;
            columns.push(&order);
            consumed += 1;
            if columns.rows >= rows_per_file || consumed == n {
                let path = dir.join(format!("data-{files}.parquet"));
                let file = std::fs::File::create(&path)
                    .with_context(|| format!("creating {}", path.display()))?;
                let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props.clone()))?;
                writer.write(&columns.finish(&schema)?)?;
                writer.close()?;
                files += 1;
                bytes += std::fs::metadata(&path)?.len();
            }
        }
    }
    Ok(IngestSpan {
        first: first.context("no order consumed")?,
        last: Instant::now(),
        files,
        bytes,
    })
}
