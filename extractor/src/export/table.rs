//! A Parquet file written a row at a time: the rows are buffered column
//! by column and go out as a row group every [`ROW_GROUP`] rows, or
//! sooner once their text reaches [`ROW_GROUP_BYTES`], so memory stays
//! bounded however many rows a file gets, and however long their text. The file is
//! staged under a hidden random name in its directory and renamed into
//! place when complete ([`Part::finish`]): a reader globbing `*.parquet`
//! never sees half a file, and a failed export leaves none.

use bytes::Bytes;
use parquet::basic::Compression;
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::{ColumnPath, Type, TypePtr};
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tempfile::NamedTempFile;

/// Rows per row group: large enough for DuckDB's readers to work in
/// parallel, small enough to hold in memory.
pub const ROW_GROUP: usize = 65_536;

/// Text buffered before a row group goes out whatever its rows: a
/// bundle's lines may each be a mebibyte, which [`ROW_GROUP`] of them
/// would make 64 GiB (and an event's text is copied into two columns).
/// The bound is per file being written: export writes a day's two on
/// each worker, so its peak is about workers × 2 × this.
pub const ROW_GROUP_BYTES: usize = 64 << 20;

/// The value of one column in one row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cell<'a> {
    Null,
    Bool(bool),
    I32(i32),
    I64(i64),
    Str(&'a str),
}

/// A column's buffered values, by physical type. Strings are packed
/// into one buffer with their ends, and become [`ByteArray`]s sharing it
/// only when written: a heap block per value cost more than the rest of
/// the row.
enum Values {
    Bool(Vec<bool>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    Bytes { packed: Vec<u8>, ends: Vec<usize> },
}

struct Column {
    name: String,
    values: Values,
    /// Definition levels of an OPTIONAL column (1: a value, 0: null);
    /// `None` for a REQUIRED one.
    defs: Option<Vec<i16>>,
}

impl Column {
    fn of(field: &Type) -> Column {
        use parquet::basic::{Repetition, Type as Physical};
        let info = field.get_basic_info();
        let values = match field.get_physical_type() {
            Physical::BOOLEAN => Values::Bool(Vec::new()),
            Physical::INT32 => Values::I32(Vec::new()),
            Physical::INT64 => Values::I64(Vec::new()),
            _ => Values::Bytes {
                packed: Vec::new(),
                ends: Vec::new(),
            },
        };
        let optional = info.has_repetition() && info.repetition() == Repetition::OPTIONAL;
        Column {
            name: info.name().to_string(),
            values,
            defs: optional.then(Vec::new),
        }
    }

    /// Appends `cell`; a cell of the wrong type, or a null in a REQUIRED
    /// column, is a bug in the table's row code.
    fn push(&mut self, cell: Cell) {
        match (&mut self.defs, cell) {
            (Some(defs), Cell::Null) => {
                defs.push(0);
                return;
            }
            (Some(defs), _) => defs.push(1),
            (None, Cell::Null) => panic!("column {} is required", self.name),
            (None, _) => {}
        }
        match (&mut self.values, cell) {
            (Values::Bool(v), Cell::Bool(x)) => v.push(x),
            (Values::I32(v), Cell::I32(x)) => v.push(x),
            (Values::I64(v), Cell::I64(x)) => v.push(x),
            (Values::Bytes { packed, ends }, Cell::Str(x)) => {
                packed.extend_from_slice(x.as_bytes());
                ends.push(packed.len());
            }
            (_, cell) => panic!("column {}: {cell:?} is of the wrong type", self.name),
        }
    }

    fn clear(&mut self) {
        match &mut self.values {
            Values::Bool(v) => v.clear(),
            Values::I32(v) => v.clear(),
            Values::I64(v) => v.clear(),
            Values::Bytes { packed, ends } => {
                packed.clear();
                ends.clear();
            }
        }
        if let Some(d) = &mut self.defs {
            d.clear();
        }
    }
}

/// A table's schema: Parquet's message type, and what its files say
/// they are.
pub struct Schema {
    /// The message type, in Parquet's schema language.
    pub message: &'static str,
    /// The `crashring.schema` key of each file's metadata: the table's
    /// name and version, e.g. `crashes 1`.
    pub version: &'static str,
    /// Columns whose values are nearly all different (an event's fields):
    /// written plainly, as a dictionary would only be tried and dropped.
    pub distinct: &'static [&'static str],
}

impl Schema {
    /// The parsed message type; the text is this program's own.
    pub fn parse(&self) -> Result<TypePtr, ParquetError> {
        parse_message_type(self.message).map(Arc::new)
    }
}

/// One Parquet file being written.
pub struct Part {
    writer: SerializedFileWriter<BufWriter<File>>,
    staged: NamedTempFile,
    path: PathBuf,
    columns: Vec<Column>,
    buffered: usize,
    /// Bytes of text among the buffered rows.
    buffered_bytes: usize,
    rows: u64,
}

/// Why a Parquet file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PartError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: {source}")]
    Parquet {
        path: PathBuf,
        #[source]
        source: ParquetError,
    },
}

impl Part {
    /// Starts `path` (its directory must exist) with `schema`.
    pub fn create(path: &Path, schema: &Schema) -> Result<Part, PartError> {
        let io_error = |source| PartError::Io {
            path: path.to_path_buf(),
            source,
        };
        let parquet_error = |source| PartError::Parquet {
            path: path.to_path_buf(),
            source,
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        let staged = tempfile::Builder::new()
            .prefix(".part-")
            .suffix(".staged")
            .tempfile_in(dir)
            .map_err(io_error)?;
        let file = staged.as_file().try_clone().map_err(io_error)?;
        let message = schema.parse().map_err(parquet_error)?;
        let columns = message.get_fields().iter().map(|f| Column::of(f)).collect();
        let mut properties = WriterProperties::builder();
        for &name in schema.distinct {
            properties = properties.set_column_dictionary_enabled(ColumnPath::from(name), false);
        }
        let properties = properties
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("crashring {}", env!("CARGO_PKG_VERSION")))
            .set_key_value_metadata(Some(vec![KeyValue::new(
                "crashring.schema".into(),
                schema.version.to_string(),
            )]))
            .build();
        let writer = SerializedFileWriter::new(
            BufWriter::with_capacity(1 << 20, file),
            message,
            Arc::new(properties),
        )
        .map_err(parquet_error)?;
        Ok(Part {
            writer,
            staged,
            path: path.to_path_buf(),
            columns,
            buffered: 0,
            buffered_bytes: 0,
            rows: 0,
        })
    }

    /// Appends a row: one cell per column, in the schema's order.
    pub fn push(&mut self, row: &[Cell]) -> Result<(), PartError> {
        assert_eq!(
            row.len(),
            self.columns.len(),
            "a row of {}",
            self.path.display()
        );
        for (column, &cell) in self.columns.iter_mut().zip(row) {
            column.push(cell);
            if let Cell::Str(text) = cell {
                self.buffered_bytes += text.len();
            }
        }
        self.buffered += 1;
        self.rows += 1;
        if self.buffered == ROW_GROUP || self.buffered_bytes >= ROW_GROUP_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Rows pushed so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes the buffered rows as a row group.
    fn flush(&mut self) -> Result<(), PartError> {
        if self.buffered == 0 {
            return Ok(());
        }
        let error = |source| PartError::Parquet {
            path: self.path.clone(),
            source,
        };
        let mut group = self.writer.next_row_group().map_err(error)?;
        for column in &mut self.columns {
            let Some(mut out) = group.next_column().map_err(error)? else {
                break;
            };
            let defs = column.defs.as_deref();
            match &mut column.values {
                Values::Bool(v) => out.typed::<BoolType>().write_batch(v, defs, None),
                Values::I32(v) => out.typed::<Int32Type>().write_batch(v, defs, None),
                Values::I64(v) => out.typed::<Int64Type>().write_batch(v, defs, None),
                Values::Bytes { packed, ends } => {
                    let all = Bytes::from(std::mem::take(packed));
                    let mut start = 0;
                    let values: Vec<ByteArray> = ends
                        .iter()
                        .map(|&end| {
                            let v = all.slice(start..end).into();
                            start = end;
                            v
                        })
                        .collect();
                    out.typed::<ByteArrayType>()
                        .write_batch(&values, defs, None)
                }
            }
            .map_err(error)?;
            out.close().map_err(error)?;
            column.clear();
        }
        group.close().map_err(error)?;
        self.buffered = 0;
        self.buffered_bytes = 0;
        Ok(())
    }

    /// Writes what is left and the footer, and renames the file into
    /// place (replacing a file of the same name).
    pub fn finish(mut self) -> Result<PathBuf, PartError> {
        self.flush()?;
        let path = self.path.clone();
        let parquet_error = |source| PartError::Parquet {
            path: path.clone(),
            source,
        };
        let io_error = |source| PartError::Io {
            path: path.clone(),
            source,
        };
        let mut out = self.writer.into_inner().map_err(parquet_error)?;
        io::Write::flush(&mut out).map_err(io_error)?;
        out.get_ref().sync_all().map_err(io_error)?;
        self.staged.persist(&path).map_err(|e| io_error(e.error))?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::{Cell, Part, Schema, ROW_GROUP, ROW_GROUP_BYTES};
    use parquet::file::reader::{FileReader, SerializedFileReader};

    const SCHEMA: Schema = Schema {
        message: "message t { REQUIRED INT64 n; OPTIONAL BYTE_ARRAY s (STRING); REQUIRED BOOLEAN odd; OPTIONAL INT32 small; }",
        version: "t 1",
        distinct: &["s"],
    };

    #[test]
    fn rows_come_back_as_written_across_row_groups() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let mut part = Part::create(&path, &SCHEMA).unwrap();
        let total = ROW_GROUP + 10;
        for n in 0..total {
            let text = format!("row {n}");
            let s = if n % 3 == 0 {
                Cell::Null
            } else {
                Cell::Str(&text)
            };
            let small = if n % 5 == 0 {
                Cell::I32(n as i32)
            } else {
                Cell::Null
            };
            part.push(&[Cell::I64(n as i64), s, Cell::Bool(n % 2 == 1), small])
                .unwrap();
        }
        assert_eq!(part.finish().unwrap(), path);
        // Only the finished file is left in the directory.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);

        let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        let meta = reader.metadata();
        assert_eq!(meta.num_row_groups(), 2);
        assert_eq!(meta.file_metadata().num_rows(), total as i64);
        let kv = meta.file_metadata().key_value_metadata().unwrap();
        assert_eq!(kv[0].key, "crashring.schema");
        assert_eq!(kv[0].value.as_deref(), Some("t 1"));
        for (n, row) in reader.get_row_iter(None).unwrap().enumerate() {
            let row = row.unwrap().to_string();
            let s = if n % 3 == 0 {
                "null".to_string()
            } else {
                format!("\"row {n}\"")
            };
            let small = if n % 5 == 0 {
                n.to_string()
            } else {
                "null".into()
            };
            assert_eq!(
                row,
                format!("{{n: {n}, s: {s}, odd: {}, small: {small}}}", n % 2 == 1)
            );
        }
    }

    #[test]
    fn rows_of_long_text_go_out_before_their_text_passes_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let mut part = Part::create(&path, &SCHEMA).unwrap();
        // A mebibyte a line, as a bundle's longest lines.
        let text = "x".repeat(1 << 20);
        let rows = 2 * (ROW_GROUP_BYTES >> 20) + 1;
        for n in 0..rows {
            part.push(&[
                Cell::I64(n as i64),
                Cell::Str(&text),
                Cell::Bool(false),
                Cell::Null,
            ])
            .unwrap();
            assert!(part.buffered_bytes < ROW_GROUP_BYTES);
        }
        part.finish().unwrap();
        let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        assert_eq!(reader.metadata().num_row_groups(), 3);
        assert_eq!(reader.metadata().file_metadata().num_rows(), rows as i64);
    }

    #[test]
    fn an_unfinished_part_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut part = Part::create(&dir.path().join("t.parquet"), &SCHEMA).unwrap();
        part.push(&[Cell::I64(1), Cell::Null, Cell::Bool(true), Cell::Null])
            .unwrap();
        drop(part);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
