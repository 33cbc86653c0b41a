//! `slice export --format parquet`: per-test coverage rows, one per test and function that ran
//! in it, for query engines (DuckDB, Spark, pandas) that read Parquet as it is. Several shards
//! of one suite are several files (or one file from several traces) that a query reads
//! together: `docs/views.md` has the spectrum query that gives `slice tests`' ranking.

use crate::analysis::display_path;
use crate::fold::LoadedTrace;
use crate::symbols::FuncId;
use crate::testrun::{counted_ids, function_kinds, FuncKind};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use rustc_hash::FxHashMap as HashMap;
use std::path::Path;
use std::sync::Arc;

/// One row: a function that ran in a test.
#[derive(Debug, Clone, PartialEq)]
pub struct TestRow {
    /// The trace directory (a shard) it was recorded in.
    pub trace: String,
    pub test: String,
    pub outcome: String,
    pub function: String,
    /// Display path (relative to the run's directory inside it), or the native object.
    pub file: String,
    pub first_line: Option<i32>,
    pub last_line: Option<i32>,
    /// Calls of the function in the test's tree.
    pub calls: i64,
    /// `program`, `site-packages`, `stdlib` or `runner` (the test runner's own code).
    pub origin: String,
    /// Whether the spectrum counts it ([`crate::testrun::counted_ids`]): the ranking's query
    /// keeps these rows.
    pub counted: bool,
}

/// The Parquet schema of [`TestRow`] (column order = field order).
pub const SCHEMA: &str = "message test_rows {
  REQUIRED BYTE_ARRAY trace (UTF8);
  REQUIRED BYTE_ARRAY test (UTF8);
  REQUIRED BYTE_ARRAY outcome (UTF8);
  REQUIRED BYTE_ARRAY function (UTF8);
  REQUIRED BYTE_ARRAY file (UTF8);
  OPTIONAL INT32 first_line;
  OPTIONAL INT32 last_line;
  REQUIRED INT64 calls;
  REQUIRED BYTE_ARRAY origin (UTF8);
  REQUIRED BOOLEAN counted;
}";

/// The rows of a loaded trace: every test with a tree, every distinct function of it.
pub fn rows(t: &LoadedTrace, trace_name: &str) -> Vec<TestRow> {
    let cwd = Path::new(&t.meta.cwd);
    let mut out = Vec::new();
    for p in &t.processes {
        if p.tests.is_empty() {
            continue;
        }
        let kinds = function_kinds(&p.funcs, cwd);
        for test in &p.tests {
            let Some(tree) = p.test_tree(test) else { continue };
            let counted = counted_ids(tree, &kinds);
            // Per function index, in first-call order: its calls over the tree.
            let mut calls: HashMap<u32, i64> = HashMap::default();
            let mut order = Vec::new();
            for node in tree.nodes.iter().skip(1) {
                let c = calls.entry(node.func).or_insert_with(|| {
                    order.push(node.func);
                    0
                });
                *c += node.count as i64;
            }
            let mut by_id: HashMap<FuncId, usize> = HashMap::default();
            for func in order {
                let Some(f) = tree.function(func) else { continue };
                let id = tree.id_of(func);
                if let Some(&i) = by_id.get(&id) {
                    let r: &mut TestRow = &mut out[i];
                    r.calls += calls[&func];
                    continue;
                }
                let origin = match kinds.get(func as usize) {
                    Some(FuncKind::Runner) => "runner",
                    _ => match crate::pathclass::origin(f) {
                        crate::pathclass::Origin::Stdlib => "stdlib",
                        crate::pathclass::Origin::SitePackages => "site-packages",
                        crate::pathclass::Origin::Program => "program",
                    },
                };
                by_id.insert(id, out.len());
                out.push(TestRow {
                    trace: trace_name.to_string(),
                    test: test.id.clone(),
                    outcome: test.outcome.name().to_string(),
                    function: f.qualname.clone(),
                    file: match (&f.file, &f.object) {
                        (Some(p), _) => display_path(p, cwd),
                        (None, Some(o)) => o.clone(),
                        (None, None) => String::new(),
                    },
                    first_line: f.first_line.and_then(|l| i32::try_from(l).ok()),
                    last_line: f.last_line.and_then(|l| i32::try_from(l).ok()),
                    calls: calls[&func],
                    origin: origin.to_string(),
                    counted: counted.contains(&id),
                });
            }
        }
    }
    out
}

/// Errors writing Parquet.
#[derive(Debug, thiserror::Error)]
#[error("writing Parquet: {0}")]
pub struct ParquetError(#[from] parquet::errors::ParquetError);

/// The rows as one Parquet file (one row group, Snappy-compressed columns).
pub fn to_parquet(rows: &[TestRow]) -> Result<Vec<u8>, ParquetError> {
    let schema = Arc::new(parse_message_type(SCHEMA)?);
    let props = Arc::new(WriterProperties::builder().set_compression(parquet::basic::Compression::SNAPPY).build());
    let mut buf: Vec<u8> = Vec::new();
    let mut w = SerializedFileWriter::new(&mut buf, schema, props)?;
    let mut rg = w.next_row_group()?;
    let text = |get: fn(&TestRow) -> &str| -> Vec<ByteArray> { rows.iter().map(|r| ByteArray::from(get(r))).collect() };
    let optional = |get: fn(&TestRow) -> Option<i32>| -> (Vec<i32>, Vec<i16>) {
        let values = rows.iter().filter_map(get).collect();
        let defined = rows.iter().map(|r| i16::from(get(r).is_some())).collect();
        (values, defined)
    };
    let mut column = 0;
    while let Some(mut col) = rg.next_column()? {
        match column {
            0 => col.typed::<ByteArrayType>().write_batch(&text(|r| &r.trace), None, None)?,
            1 => col.typed::<ByteArrayType>().write_batch(&text(|r| &r.test), None, None)?,
            2 => col.typed::<ByteArrayType>().write_batch(&text(|r| &r.outcome), None, None)?,
            3 => col.typed::<ByteArrayType>().write_batch(&text(|r| &r.function), None, None)?,
            4 => col.typed::<ByteArrayType>().write_batch(&text(|r| &r.file), None, None)?,
            5 => {
                let (v, d) = optional(|r| r.first_line);
                col.typed::<Int32Type>().write_batch(&v, Some(&d), None)?
            }
            6 => {
                let (v, d) = optional(|r| r.last_line);
                col.typed::<Int32Type>().write_batch(&v, Some(&d), None)?
            }
            7 => col.typed::<Int64Type>().write_batch(&rows.iter().map(|r| r.calls).collect::<Vec<_>>(), None, None)?,
            8 => col.typed::<ByteArrayType>().write_batch(&text(|r| &r.origin), None, None)?,
            _ => col.typed::<BoolType>().write_batch(&rows.iter().map(|r| r.counted).collect::<Vec<_>>(), None, None)?,
        };
        col.close()?;
        column += 1;
    }
    rg.close()?;
    w.close()?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    #[test]
    fn rows_round_trip_through_parquet() {
        let rows = vec![
            TestRow {
                trace: "s1.d".into(),
                test: "t.py::a".into(),
                outcome: "failed".into(),
                function: "f".into(),
                file: "app/f.py".into(),
                first_line: Some(3),
                last_line: Some(9),
                calls: 2,
                origin: "program".into(),
                counted: true,
            },
            TestRow {
                trace: "s1.d".into(),
                test: "t.py::a".into(),
                outcome: "failed".into(),
                function: "<lambda>".into(),
                file: "<string>".into(),
                first_line: None,
                last_line: None,
                calls: 1,
                origin: "site-packages".into(),
                counted: false,
            },
        ];
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("rows.parquet");
        std::fs::write(&path, to_parquet(&rows).unwrap()).unwrap();
        let r = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        assert_eq!(r.metadata().file_metadata().num_rows(), 2);
        let got: Vec<String> = r.get_row_iter(None).unwrap().map(|row| row.unwrap().to_string()).collect();
        assert_eq!(
            got,
            [
                r#"{trace: "s1.d", test: "t.py::a", outcome: "failed", function: "f", file: "app/f.py", first_line: 3, last_line: 9, calls: 2, origin: "program", counted: true}"#,
                r#"{trace: "s1.d", test: "t.py::a", outcome: "failed", function: "<lambda>", file: "<string>", first_line: null, last_line: null, calls: 1, origin: "site-packages", counted: false}"#
            ]
        );
    }
}
