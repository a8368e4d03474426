//! Reading manifest files and lists written by lakejoin, Java Paimon or pypaimon. Fields
//! are resolved by name in the writer's schema once per file (the `*Layout`s), then read
//! by position per record, so the Java and pypaimon styles, older layouts with fewer or
//! nullable fields, other field orders and unknown extra fields all decode.

use super::model::{
    DataFileMeta, FileKind, FileSource, ManifestEntry, ManifestFileMeta, SimpleStats,
};
use crate::avro::{self, Container, Node, Record, Val};
use crate::error::{Error, Result};

/// Most bytes the blocks of one container file may decompress to, all blocks together.
///
/// Why: every block of a file is decompressed and kept until the file is decoded, and a
/// zstd block can expand ~30,000-fold, so a 68 KB manifest held 3 GB. Honest files are
/// far smaller: Paimon rolls a manifest at `manifest.target-file-size` (8 MiB by default)
/// of *compressed* bytes, and manifests compress about 3 to 1 (30,000 entries with
/// random file names and stats: 3.8 MB zstd, 11 MB raw), so a full manifest decompresses
/// to some 25 MiB; manifest lists and index manifests hold one small entry per manifest
/// or index file. 256 MiB is 10 times that, and 32 times the target size for a file that
/// did not compress at all.
pub(crate) const MAX_CONTAINER_DECOMPRESSED_BYTES: usize = 256 << 20;
const _: () = assert!(MAX_CONTAINER_DECOMPRESSED_BYTES >= 32 * (8 << 20));

/// Decodes a manifest file written by lakejoin, Java Paimon or pypaimon.
pub fn decode_manifest(bytes: &[u8]) -> Result<Vec<ManifestEntry>> {
    let file = read_container(bytes)?;
    let layout = EntryLayout::new(top_record(&file.schema, "manifest")?)?;
    file.records(|v| layout.read(v))
}

/// Decodes a manifest list written by lakejoin, Java Paimon or pypaimon.
pub fn decode_manifest_list(bytes: &[u8]) -> Result<Vec<ManifestFileMeta>> {
    let file = read_container(bytes)?;
    let layout = FileMetaLayout::new(top_record(&file.schema, "manifest list")?)?;
    file.records(|v| layout.read(v))
}

/// A Paimon metadata file (manifest, manifest list, index manifest) as a container file,
/// decompressed up to [`MAX_CONTAINER_DECOMPRESSED_BYTES`].
pub(super) fn read_container(bytes: &[u8]) -> Result<Container> {
    Ok(avro::read_container(
        bytes,
        MAX_CONTAINER_DECOMPRESSED_BYTES,
    )?)
}

pub(super) fn top_record<'s>(schema: &'s Node, what: &str) -> Result<&'s Record> {
    schema.as_record().ok_or_else(|| {
        Error::format(format!(
            "{what} schema is neither a record nor a union holding one record"
        ))
    })
}

/// Positions of the known fields of a writer's record, resolved once per file.
struct Fields<'s> {
    record: &'s Record,
    path: &'static str,
}

impl<'s> Fields<'s> {
    fn index(&self, name: &str) -> Option<usize> {
        self.record.field_index(name)
    }

    /// The record schema of the nested record field `name`, if the writer has that field.
    fn nested(&self, name: &'static str, path: &'static str) -> Result<Option<Fields<'s>>> {
        let Some(i) = self.index(name) else {
            return Ok(None);
        };
        match self.record.fields.get(i).and_then(|f| f.node.as_record()) {
            Some(record) => Ok(Some(Fields { record, path })),
            None => Err(Error::format(format!(
                "{}.{name} is not a record in the writer schema",
                self.path
            ))),
        }
    }
}

/// The values of one decoded record, taken out by the positions a layout resolved.
/// `Val::Null` stands for both "null" and "field absent".
pub(super) struct Values<'a>(Vec<Val<'a>>);

impl<'a> Values<'a> {
    /// The fields of the record `v` (at `path`, for errors).
    pub(super) fn of(v: Val<'a>, path: &str) -> Result<Self> {
        match v {
            Val::Record(fields) => Ok(Values(fields)),
            Val::Null => Err(missing(path)),
            other => Err(mismatch(path, &other)),
        }
    }

    /// Moves the value at `index` out (an absent field: `Null`).
    pub(super) fn take(&mut self, index: Option<usize>) -> Val<'a> {
        index
            .and_then(|i| self.0.get_mut(i))
            .map(|v| std::mem::replace(v, Val::Null))
            .unwrap_or(Val::Null)
    }

    /// The field at `index` converted by `convert` (`long`, `string`, ...), or `None`.
    pub(super) fn opt<T>(
        &mut self,
        index: Option<usize>,
        path: &str,
        convert: impl FnOnce(Val<'a>, &str) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        convert(self.take(index), path)
    }

    /// [`Values::opt`] for a field that must be present and not null.
    pub(super) fn req<T>(
        &mut self,
        index: Option<usize>,
        path: &str,
        convert: impl FnOnce(Val<'a>, &str) -> Result<Option<T>>,
    ) -> Result<T> {
        self.opt(index, path, convert)?.ok_or_else(|| missing(path))
    }
}

struct StatsLayout {
    min_values: Option<usize>,
    max_values: Option<usize>,
    null_counts: Option<usize>,
}

impl StatsLayout {
    fn new(fields: Option<Fields<'_>>) -> Option<Self> {
        fields.map(|f| StatsLayout {
            min_values: f.index("_MIN_VALUES"),
            max_values: f.index("_MAX_VALUES"),
            null_counts: f.index("_NULL_COUNTS"),
        })
    }

    fn read(layout: &Option<Self>, v: Val<'_>, path: &'static str) -> Result<SimpleStats> {
        let (Some(layout), Val::Record(_)) = (layout, &v) else {
            return Err(missing(path));
        };
        let mut s = Values::of(v, path)?;
        Ok(SimpleStats {
            min_values: s.req(layout.min_values, path, bytes)?,
            max_values: s.req(layout.max_values, path, bytes)?,
            null_counts: s.opt(layout.null_counts, path, null_counts)?,
        })
    }
}

struct EntryLayout {
    kind: Option<usize>,
    partition: Option<usize>,
    bucket: Option<usize>,
    total_buckets: Option<usize>,
    file: Option<usize>,
    f: FileLayout,
}

/// Positions in `_FILE`; all `None` when the writer has no `_FILE`, and then the first
/// record reports it missing.
#[derive(Default)]
struct FileLayout {
    file_name: Option<usize>,
    file_size: Option<usize>,
    row_count: Option<usize>,
    min_key: Option<usize>,
    max_key: Option<usize>,
    key_stats: Option<usize>,
    key_stats_layout: Option<StatsLayout>,
    value_stats: Option<usize>,
    value_stats_layout: Option<StatsLayout>,
    min_sequence_number: Option<usize>,
    max_sequence_number: Option<usize>,
    schema_id: Option<usize>,
    level: Option<usize>,
    extra_files: Option<usize>,
    creation_time: Option<usize>,
    delete_row_count: Option<usize>,
    embedded_file_index: Option<usize>,
    file_source: Option<usize>,
    value_stats_cols: Option<usize>,
    external_path: Option<usize>,
    first_row_id: Option<usize>,
    write_cols: Option<usize>,
}

impl EntryLayout {
    fn new(record: &Record) -> Result<Self> {
        let top = Fields {
            record,
            path: "manifest entry",
        };
        let f = match top.nested("_FILE", "_FILE")? {
            Some(f) => FileLayout::new(&f)?,
            None => FileLayout::default(),
        };
        Ok(EntryLayout {
            kind: top.index("_KIND"),
            partition: top.index("_PARTITION"),
            bucket: top.index("_BUCKET"),
            total_buckets: top.index("_TOTAL_BUCKETS"),
            file: top.index("_FILE"),
            f,
        })
    }

    fn read(&self, v: Val<'_>) -> Result<ManifestEntry> {
        let mut top = Values::of(v, "manifest entry")?;
        let kind = match top.req(self.kind, "_KIND", long)? {
            0 => FileKind::Add,
            1 => FileKind::Delete,
            other => return Err(Error::format(format!("unknown manifest _KIND {other}"))),
        };
        Ok(ManifestEntry {
            kind,
            partition: top.req(self.partition, "_PARTITION", bytes)?,
            bucket: top.req(self.bucket, "_BUCKET", int)?,
            total_buckets: top.req(self.total_buckets, "_TOTAL_BUCKETS", int)?,
            file: self.f.read(top.take(self.file))?,
        })
    }
}

impl FileLayout {
    fn new(f: &Fields<'_>) -> Result<Self> {
        Ok(FileLayout {
            file_name: f.index("_FILE_NAME"),
            file_size: f.index("_FILE_SIZE"),
            row_count: f.index("_ROW_COUNT"),
            min_key: f.index("_MIN_KEY"),
            max_key: f.index("_MAX_KEY"),
            key_stats: f.index("_KEY_STATS"),
            key_stats_layout: StatsLayout::new(f.nested("_KEY_STATS", "_FILE._KEY_STATS")?),
            value_stats: f.index("_VALUE_STATS"),
            value_stats_layout: StatsLayout::new(f.nested("_VALUE_STATS", "_FILE._VALUE_STATS")?),
            min_sequence_number: f.index("_MIN_SEQUENCE_NUMBER"),
            max_sequence_number: f.index("_MAX_SEQUENCE_NUMBER"),
            schema_id: f.index("_SCHEMA_ID"),
            level: f.index("_LEVEL"),
            extra_files: f.index("_EXTRA_FILES"),
            creation_time: f.index("_CREATION_TIME"),
            delete_row_count: f.index("_DELETE_ROW_COUNT"),
            embedded_file_index: f.index("_EMBEDDED_FILE_INDEX"),
            file_source: f.index("_FILE_SOURCE"),
            value_stats_cols: f.index("_VALUE_STATS_COLS"),
            external_path: f.index("_EXTERNAL_PATH"),
            first_row_id: f.index("_FIRST_ROW_ID"),
            write_cols: f.index("_WRITE_COLS"),
        })
    }

    fn read(&self, v: Val<'_>) -> Result<DataFileMeta> {
        let mut f = Values::of(v, "_FILE")?;
        let l = self;
        Ok(DataFileMeta {
            file_name: f.req(l.file_name, "_FILE._FILE_NAME", string)?,
            file_size: f.req(l.file_size, "_FILE._FILE_SIZE", long)?,
            row_count: f.req(l.row_count, "_FILE._ROW_COUNT", long)?,
            min_key: f.req(l.min_key, "_FILE._MIN_KEY", bytes)?,
            max_key: f.req(l.max_key, "_FILE._MAX_KEY", bytes)?,
            key_stats: StatsLayout::read(
                &l.key_stats_layout,
                f.take(l.key_stats),
                "_FILE._KEY_STATS",
            )?,
            value_stats: StatsLayout::read(
                &l.value_stats_layout,
                f.take(l.value_stats),
                "_FILE._VALUE_STATS",
            )?,
            min_sequence_number: f.req(
                l.min_sequence_number,
                "_FILE._MIN_SEQUENCE_NUMBER",
                long,
            )?,
            max_sequence_number: f.req(
                l.max_sequence_number,
                "_FILE._MAX_SEQUENCE_NUMBER",
                long,
            )?,
            schema_id: f.req(l.schema_id, "_FILE._SCHEMA_ID", long)?,
            level: f.req(l.level, "_FILE._LEVEL", int)?,
            // Java's oldest layouts lacked it; an absent list means "no sidecars".
            extra_files: f
                .opt(l.extra_files, "_FILE._EXTRA_FILES", strings)?
                .unwrap_or_default(),
            creation_time: f.opt(l.creation_time, "_FILE._CREATION_TIME", long)?,
            delete_row_count: f.opt(l.delete_row_count, "_FILE._DELETE_ROW_COUNT", long)?,
            embedded_file_index: f.opt(
                l.embedded_file_index,
                "_FILE._EMBEDDED_FILE_INDEX",
                bytes,
            )?,
            file_source: f.opt(l.file_source, "_FILE._FILE_SOURCE", file_source)?,
            value_stats_cols: f.opt(l.value_stats_cols, "_FILE._VALUE_STATS_COLS", strings)?,
            external_path: f.opt(l.external_path, "_FILE._EXTERNAL_PATH", string)?,
            first_row_id: f.opt(l.first_row_id, "_FILE._FIRST_ROW_ID", long)?,
            write_cols: f.opt(l.write_cols, "_FILE._WRITE_COLS", strings)?,
        })
    }
}

struct FileMetaLayout {
    file_name: Option<usize>,
    file_size: Option<usize>,
    num_added_files: Option<usize>,
    num_deleted_files: Option<usize>,
    partition_stats: Option<usize>,
    partition_stats_layout: Option<StatsLayout>,
    schema_id: Option<usize>,
    min_bucket: Option<usize>,
    max_bucket: Option<usize>,
    min_level: Option<usize>,
    max_level: Option<usize>,
    min_row_id: Option<usize>,
    max_row_id: Option<usize>,
}

impl FileMetaLayout {
    fn new(record: &Record) -> Result<Self> {
        let f = Fields {
            record,
            path: "manifest file meta",
        };
        Ok(FileMetaLayout {
            file_name: f.index("_FILE_NAME"),
            file_size: f.index("_FILE_SIZE"),
            num_added_files: f.index("_NUM_ADDED_FILES"),
            num_deleted_files: f.index("_NUM_DELETED_FILES"),
            partition_stats: f.index("_PARTITION_STATS"),
            partition_stats_layout: StatsLayout::new(
                f.nested("_PARTITION_STATS", "_PARTITION_STATS")?,
            ),
            schema_id: f.index("_SCHEMA_ID"),
            min_bucket: f.index("_MIN_BUCKET"),
            max_bucket: f.index("_MAX_BUCKET"),
            min_level: f.index("_MIN_LEVEL"),
            max_level: f.index("_MAX_LEVEL"),
            min_row_id: f.index("_MIN_ROW_ID"),
            max_row_id: f.index("_MAX_ROW_ID"),
        })
    }

    fn read(&self, v: Val<'_>) -> Result<ManifestFileMeta> {
        let mut m = Values::of(v, "manifest file meta")?;
        let l = self;
        Ok(ManifestFileMeta {
            file_name: m.req(l.file_name, "_FILE_NAME", string)?,
            file_size: m.req(l.file_size, "_FILE_SIZE", long)?,
            num_added_files: m.req(l.num_added_files, "_NUM_ADDED_FILES", long)?,
            num_deleted_files: m.req(l.num_deleted_files, "_NUM_DELETED_FILES", long)?,
            partition_stats: StatsLayout::read(
                &l.partition_stats_layout,
                m.take(l.partition_stats),
                "_PARTITION_STATS",
            )?,
            schema_id: m.req(l.schema_id, "_SCHEMA_ID", long)?,
            min_bucket: m.opt(l.min_bucket, "_MIN_BUCKET", int)?,
            max_bucket: m.opt(l.max_bucket, "_MAX_BUCKET", int)?,
            min_level: m.opt(l.min_level, "_MIN_LEVEL", int)?,
            max_level: m.opt(l.max_level, "_MAX_LEVEL", int)?,
            min_row_id: m.opt(l.min_row_id, "_MIN_ROW_ID", long)?,
            max_row_id: m.opt(l.max_row_id, "_MAX_ROW_ID", long)?,
        })
    }
}

// Conversions of one value, for `Values::opt`/`req`: `Val::Null` is `None`.

fn missing(path: &str) -> Error {
    Error::format(format!("manifest field {path} is missing or null"))
}

pub(super) fn mismatch(path: &str, v: &Val<'_>) -> Error {
    Error::format(format!(
        "manifest field {path} has an unexpected type ({})",
        v.describe()
    ))
}

pub(super) fn long(v: Val<'_>, path: &str) -> Result<Option<i64>> {
    match v {
        Val::Null => Ok(None),
        Val::Long(x) => Ok(Some(x)),
        other => Err(mismatch(path, &other)),
    }
}

pub(super) fn int(v: Val<'_>, path: &str) -> Result<Option<i32>> {
    long(v, path)?
        .map(|x| {
            i32::try_from(x)
                .map_err(|_| Error::format(format!("manifest field {path} = {x} overflows int")))
        })
        .transpose()
}

pub(super) fn bytes(v: Val<'_>, path: &str) -> Result<Option<Vec<u8>>> {
    match v {
        Val::Null => Ok(None),
        Val::Bytes(b) => Ok(Some(b.to_vec())),
        other => Err(mismatch(path, &other)),
    }
}

pub(super) fn string(v: Val<'_>, path: &str) -> Result<Option<String>> {
    match v {
        Val::Null => Ok(None),
        Val::Bytes(b) => std::str::from_utf8(b)
            .map(|s| Some(s.to_string()))
            .map_err(|_| Error::format(format!("manifest field {path} is not valid UTF-8"))),
        other => Err(mismatch(path, &other)),
    }
}

/// An array, each item converted by `item` (which may allow nulls).
fn array<T>(
    v: Val<'_>,
    path: &str,
    mut item: impl FnMut(Val<'_>, &str) -> Result<T>,
) -> Result<Option<Vec<T>>> {
    match v {
        Val::Null => Ok(None),
        Val::Array(items) => items
            .into_iter()
            .map(|v| item(v, path))
            .collect::<Result<Vec<_>>>()
            .map(Some),
        other => Err(mismatch(path, &other)),
    }
}

fn strings(v: Val<'_>, path: &str) -> Result<Option<Vec<String>>> {
    array(v, path, |v, path| {
        string(v, path)?.ok_or_else(|| missing(path))
    })
}

fn null_counts(v: Val<'_>, path: &str) -> Result<Option<Vec<Option<i64>>>> {
    array(v, path, long)
}

fn file_source(v: Val<'_>, path: &str) -> Result<Option<FileSource>> {
    match v {
        Val::Null => Ok(None),
        Val::Long(0) => Ok(Some(FileSource::Append)),
        Val::Long(1) => Ok(Some(FileSource::Compact)),
        // Early pypaimon releases declared the field as a string.
        Val::Bytes(b) if b.eq_ignore_ascii_case(b"APPEND") || b == b"0" => {
            Ok(Some(FileSource::Append))
        }
        Val::Bytes(b) if b.eq_ignore_ascii_case(b"COMPACT") || b == b"1" => {
            Ok(Some(FileSource::Compact))
        }
        Val::Long(x) => Err(Error::format(format!("unknown {path} {x}"))),
        other => Err(mismatch(path, &other)),
    }
}
