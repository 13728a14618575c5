//! `samples.csv`: written and read with the `csv` crate, held to one canonical byte form.
//!
//! Format: UTF-8, `\n` line ends (every line, the last included), a header naming exactly
//! [`columns`] in order, one row per sample. A bundle of an earlier readable schema
//! ([`crate::schema::READABLE_SCHEMAS`]) has the columns of [`columns_for`] its schema; it
//! is read with [`SamplesReader::for_schema`] and held to the same canonical form. A field containing `,`, `"`, `\r` or `\n` is
//! quoted (RFC 4180: `"` doubled); any other field is written bare (the `csv` crate's
//! `QuoteStyle::Necessary`). Integers are decimal without sign or leading zeros; an empty
//! field is "none".
//!
//! **Canonical bytes.** A file is accepted only if it equals, byte for byte, what
//! [`write_samples`] produces from the rows parsed out of it. The reader checks this row
//! by row (the header included): each record's raw bytes are compared with the writer's
//! bytes for the parsed row, so a quoted field that needs no quotes, a doubled quote
//! where none is needed, CRLF, a trailing space, a blank line, a missing final newline,
//! reordered or unknown columns, and non-canonical numbers are all errors
//! ([`CsvError::NotCanonical`] or a more specific variant), each with its line and column.
//!
//! **Streaming and caps.** [`SamplesReader`] reads from any [`Read`] one record at a time
//! through the `csv` crate's fixed buffer; besides the rows it returns, it holds at most
//! one row plus one buffer of read-ahead. Caps (each a typed error, never a panic or an
//! allocation beyond it):
//! - [`MAX_BYTES`]: the whole file, 1 GiB;
//! - [`MAX_ROW_BYTES`]: one row (header included), 64 KiB (a real row is under 1 KiB:
//!   the bench bounds `error_detail` to 400 characters);
//! - [`MAX_ROWS`]: 2^20 = 1,048,576 rows (a campaign of more attempts cannot be verified).
//!
//! Serde is not used for the rows: the stage columns are generated from
//! [`Stage::ALL`] (one definition), which a derived flat struct would have to repeat.
//! Never panics.

use std::io::{self, Read};

use crate::schema::{
    schema_stages, stage_in_schema, ContractKind, Sample, StageTimes, SCHEMA_VERSION,
};
use truecold_proto::{BootId, Clocksource, GuestPlatform};

/// Cap on the whole of `samples.csv`, bytes.
pub const MAX_BYTES: u64 = 1 << 30;
/// Cap on one row of `samples.csv` (its raw bytes, line end included).
pub const MAX_ROW_BYTES: usize = 64 * 1024;
/// Cap on the number of rows (the header not counted).
pub const MAX_ROWS: u64 = 1 << 20;

/// The `csv` crate's read buffer.
const READ_BUFFER: usize = 8 * 1024;

/// Why `samples.csv` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    #[error("samples.csv is empty (no header)")]
    Empty,
    #[error("samples.csv is larger than the cap of {cap} bytes")]
    TooLarge { cap: u64 },
    #[error("line {line}: row longer than the cap of {cap} bytes")]
    RowTooLong { line: u64, cap: usize },
    #[error("line {line}: more than {cap} rows (the cap)")]
    TooManyRows { line: u64, cap: u64 },
    #[error("line {line}, column `{column}`: not UTF-8")]
    NotUtf8 { line: u64, column: String },
    #[error("line {line}: cannot read the record")]
    Read {
        line: u64,
        #[source]
        source: csv::Error,
    },
    #[error("header: unknown column `{0}`")]
    UnknownColumn(String),
    #[error("header: missing column `{0}`")]
    MissingColumn(String),
    #[error("header: column `{0}` appears twice")]
    DuplicateColumn(String),
    #[error("header: columns out of order (expected `{expected}` at position {position}, found `{found}`)")]
    ColumnOrder {
        position: usize,
        expected: String,
        found: String,
    },
    #[error("line {line}: {got} fields, header has {want}")]
    FieldCount { line: u64, got: usize, want: usize },
    #[error("line {line}, column `{column}`: bad value `{value}` ({why})")]
    BadValue {
        line: u64,
        column: String,
        value: String,
        why: &'static str,
    },
    #[error(
        "line {line}, column `{column}` (byte {byte} of the row): not in canonical form \
         ({what}); the file must equal, byte for byte, what the writer produces from its rows"
    )]
    NotCanonical {
        line: u64,
        column: String,
        byte: usize,
        what: &'static str,
    },
    #[error("cannot write samples.csv")]
    Write(#[source] csv::Error),
}

/// The header of the schema this crate writes, in order.
pub fn columns() -> Vec<String> {
    columns_for(SCHEMA_VERSION)
}

/// The header of a bundle of `schema`, in order.
pub fn columns_for(schema: u32) -> Vec<String> {
    let mut c: Vec<String> = [
        "index",
        "contract",
        "concurrency",
        "intended_request_ns",
        "actual_request_ns",
        "ready_ns",
        "latency_ns",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    c.extend(schema_stages(schema).map(|s| format!("{}_ns", s.name())));
    c.extend(
        [
            "boot_id",
            "host_mem_configured",
            "host_memslots",
            "host_e820_usable",
            "host_mapping_bytes",
            "host_page_size",
            "guest_mem_firmware",
            "guest_mem_total",
            "guest_cpus",
            "guest_packages",
            "guest_cores_per_package",
            "guest_threads_per_core",
            "guest_tsc_deadline_timer",
            "guest_constant_tsc",
            "guest_nonstop_tsc",
            "guest_tsc_unstable",
            "guest_clocksource",
            "protocol_errors",
            "workload",
            "ok",
            "error_kind",
            "error_detail",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    if schema >= 8 {
        c.extend(["cleanup_ok".to_string(), "cleanup_ns".to_string()]);
    }
    if schema >= 11 {
        c.push("parallel_latency_ns".to_string());
    }
    // Schema 11: the kernel's zone figures (the zone rule).
    if schema >= crate::schema::ZONES_SCHEMA {
        c.extend(ZONE_COLUMNS.iter().map(|s| s.to_string()));
    }
    c
}

/// The zone-figure columns of schema 11 ([`crate::schema::ZONES_SCHEMA`]), in order.
const ZONE_COLUMNS: [&str; 2] = ["guest_mem_present", "guest_mem_managed"];

/// Number of platform columns (all empty without a platform).
const PLATFORM_FIELDS: usize = 8;
/// Column of the first stage.
const STAGE0: usize = 7;

fn writer_builder() -> csv::WriterBuilder {
    let mut b = csv::WriterBuilder::new();
    b.delimiter(b',')
        .quote(b'"')
        .double_quote(true)
        .quote_style(csv::QuoteStyle::Necessary)
        .terminator(csv::Terminator::Any(b'\n'))
        .has_headers(false);
    b
}

fn bool_str(v: bool) -> &'static str {
    if v {
        "true"
    } else {
        "false"
    }
}

/// Fills `rec` with the fields of `s`, in [`columns_for`] `schema` order.
fn fill_record(s: &Sample, schema: u32, rec: &mut csv::StringRecord) {
    use std::fmt::Write as _;
    // One scratch buffer for every number (no allocation per field).
    let mut buf = String::with_capacity(24);
    let mut num = |rec: &mut csv::StringRecord, v: Option<&dyn std::fmt::Display>| {
        buf.clear();
        if let Some(x) = v {
            let _ = write!(buf, "{x}");
        }
        rec.push_field(&buf);
    };
    rec.clear();
    num(rec, Some(&s.index));
    rec.push_field(s.contract.as_str());
    num(rec, Some(&s.concurrency));
    num(rec, s.intended_request_ns.as_ref().map(|x| x as _));
    num(rec, Some(&s.actual_request_ns));
    num(rec, s.ready_ns.as_ref().map(|x| x as _));
    num(rec, s.latency_ns.as_ref().map(|x| x as _));
    for st in schema_stages(schema) {
        num(rec, s.stages.get(st).as_ref().map(|x| x as _));
    }
    rec.push_field(s.boot_id.as_ref().map_or("", |b| b.as_str()));
    num(rec, Some(&s.host_mem_configured));
    num(rec, s.host_memslots.as_ref().map(|x| x as _));
    num(rec, s.host_e820_usable.as_ref().map(|x| x as _));
    num(rec, s.host_mapping_bytes.as_ref().map(|x| x as _));
    num(rec, s.host_page_size.as_ref().map(|x| x as _));
    num(rec, s.guest_mem_firmware.as_ref().map(|x| x as _));
    num(rec, s.guest_mem_total.as_ref().map(|x| x as _));
    num(rec, s.guest_cpus.as_ref().map(|x| x as _));
    match &s.guest_platform {
        None => (0..PLATFORM_FIELDS).for_each(|_| rec.push_field("")),
        Some(p) => {
            num(rec, Some(&p.packages));
            num(rec, Some(&p.cores_per_package));
            num(rec, Some(&p.threads_per_core));
            rec.push_field(bool_str(p.tsc_deadline_timer));
            rec.push_field(bool_str(p.constant_tsc));
            rec.push_field(bool_str(p.nonstop_tsc));
            rec.push_field(bool_str(p.tsc_unstable));
            rec.push_field(p.clocksource.as_ref().map_or("none", |c| c.as_str()));
        }
    }
    num(rec, Some(&s.protocol_errors));
    rec.push_field(&s.workload);
    rec.push_field(bool_str(s.ok));
    rec.push_field(&s.error_kind);
    rec.push_field(&s.error_detail);
    if schema >= 8 {
        rec.push_field(s.cleanup_ok.map_or("", bool_str));
        num(rec, s.cleanup_ns.as_ref().map(|x| x as _));
    }
    if schema >= 11 {
        num(rec, s.parallel_latency_ns.as_ref().map(|x| x as _));
    }
    // Schema 11: the kernel's zone figures.
    if schema >= crate::schema::ZONES_SCHEMA {
        num(rec, s.guest_mem_present.as_ref().map(|x| x as _));
        num(rec, s.guest_mem_managed.as_ref().map(|x| x as _));
    }
}

/// Writes the samples as CSV bytes to `w` (the one canonical form).
pub fn write_samples_to<W: io::Write>(w: W, samples: &[Sample]) -> Result<(), CsvError> {
    write_schema_samples_to(w, samples, SCHEMA_VERSION)
}

/// [`write_samples_to`] with the columns of a bundle of `schema` (what a bundle of an
/// earlier readable schema holds; the bench writes only the current one).
pub fn write_schema_samples_to<W: io::Write>(
    w: W,
    samples: &[Sample],
    schema: u32,
) -> Result<(), CsvError> {
    let mut wtr = SamplesWriter::for_schema(w, schema)?;
    for s in samples {
        wtr.write(s)?;
    }
    wtr.finish().map(|_| ())
}

/// Writes `samples.csv` one row at a time (the one canonical form, what [`write_samples`]
/// gives for the same rows): the header when it is made, then each row as it is given.
/// Holds one record and the `csv` crate's buffer, whatever the number of rows.
pub struct SamplesWriter<W: io::Write> {
    wtr: csv::Writer<W>,
    schema: u32,
    rec: csv::StringRecord,
}

impl<W: io::Write> SamplesWriter<W> {
    /// Writes the header of the current schema.
    pub fn new(w: W) -> Result<Self, CsvError> {
        Self::for_schema(w, SCHEMA_VERSION)
    }

    /// Writes the header of `schema`.
    pub fn for_schema(w: W, schema: u32) -> Result<Self, CsvError> {
        let mut wtr = writer_builder().from_writer(w);
        wtr.write_record(columns_for(schema))
            .map_err(CsvError::Write)?;
        Ok(SamplesWriter {
            wtr,
            schema,
            rec: csv::StringRecord::new(),
        })
    }

    /// Writes one row.
    pub fn write(&mut self, s: &Sample) -> Result<(), CsvError> {
        fill_record(s, self.schema, &mut self.rec);
        self.wtr.write_record(&self.rec).map_err(CsvError::Write)
    }

    /// Flushes the rows written so far to the writer.
    pub fn flush(&mut self) -> Result<(), CsvError> {
        self.wtr.flush().map_err(|e| CsvError::Write(e.into()))
    }

    /// The writer, every row flushed to it.
    pub fn finish(self) -> Result<W, CsvError> {
        self.wtr
            .into_inner()
            .map_err(|e| CsvError::Write(e.into_error().into()))
    }
}

/// Writes the samples as CSV text (the one canonical form).
pub fn write_samples(samples: &[Sample]) -> String {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail, and every field is a `&str`.
    let _ = write_samples_to(&mut out, samples);
    String::from_utf8_lossy(&out).into_owned()
}

/// The caps a [`SamplesReader`] enforces; [`Caps::DEFAULT`] is what `verify` uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// The whole file, bytes.
    pub max_bytes: u64,
    /// One row (its raw bytes, line end included).
    pub max_row_bytes: usize,
    /// Rows, the header not counted.
    pub max_rows: u64,
}

impl Caps {
    /// [`MAX_BYTES`], [`MAX_ROW_BYTES`], [`MAX_ROWS`].
    pub const DEFAULT: Caps = Caps {
        max_bytes: MAX_BYTES,
        max_row_bytes: MAX_ROW_BYTES,
        max_rows: MAX_ROWS,
    };
}

impl Default for Caps {
    fn default() -> Self {
        Caps::DEFAULT
    }
}

/// Which cap a read stopped at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cap {
    Total,
    Row,
}

/// The reader under the `csv` crate: it counts every byte against the total cap and
/// records the bytes of the current row (plus the crate's read-ahead) so they can be
/// compared with the writer's output. It refuses to grow the recording past the row cap
/// plus one read buffer, so a huge row is never buffered whole.
struct Recorder<R> {
    inner: R,
    caps: Caps,
    total: u64,
    /// Raw bytes from the start of the current record to the read position.
    buf: Vec<u8>,
    hit: Option<Cap>,
}

impl<R: Read> Read for Recorder<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.buf.len() > self.caps.max_row_bytes + READ_BUFFER {
            self.hit = Some(Cap::Row);
            return Err(io::Error::other("samples.csv row over the cap"));
        }
        let n = self.inner.read(out)?;
        self.total += n as u64;
        if self.total > self.caps.max_bytes {
            self.hit = Some(Cap::Total);
            return Err(io::Error::other("samples.csv over the cap"));
        }
        self.buf.extend_from_slice(&out[..n]);
        Ok(n)
    }
}

/// Streams [`Sample`]s out of `samples.csv`, checking the header, every value and the
/// canonical bytes of every row as it goes (see the module docs for the rules and caps).
/// After an error it returns no more rows.
pub struct SamplesReader<R: Read> {
    rdr: csv::Reader<Recorder<R>>,
    /// The bundle's schema (its columns).
    schema: u32,
    names: Vec<String>,
    record: csv::StringRecord,
    expect: csv::StringRecord,
    wtr: csv::Writer<Vec<u8>>,
    /// Byte offset (in the file) where `rdr.get_ref().buf` starts.
    base: u64,
    rows: u64,
    done: bool,
}

impl<R: Read> SamplesReader<R> {
    /// Reads and checks the header, under [`Caps::DEFAULT`].
    pub fn new(inner: R) -> Result<Self, CsvError> {
        Self::with_caps(inner, Caps::DEFAULT)
    }

    /// Reads and checks the header, under `caps`.
    pub fn with_caps(inner: R, caps: Caps) -> Result<Self, CsvError> {
        Self::for_schema(inner, SCHEMA_VERSION, caps)
    }

    /// Reads and checks the header of a bundle of `schema` (one of
    /// [`crate::schema::READABLE_SCHEMAS`]; the caller has checked it), under `caps`.
    pub fn for_schema(inner: R, schema: u32, caps: Caps) -> Result<Self, CsvError> {
        let rdr = csv::ReaderBuilder::new()
            .delimiter(b',')
            .quote(b'"')
            .double_quote(true)
            .quoting(true)
            .escape(None)
            .comment(None)
            .flexible(true)
            .has_headers(false)
            .terminator(csv::Terminator::Any(b'\n'))
            .buffer_capacity(READ_BUFFER)
            .from_reader(Recorder {
                inner,
                caps,
                total: 0,
                buf: Vec::new(),
                hit: None,
            });
        let mut me = SamplesReader {
            rdr,
            schema,
            names: columns_for(schema),
            record: csv::StringRecord::new(),
            expect: csv::StringRecord::new(),
            wtr: writer_builder().from_writer(Vec::new()),
            base: 0,
            rows: 0,
            done: false,
        };
        if !me.read_record()? {
            return Err(CsvError::Empty);
        }
        me.check_header()?;
        let header = std::mem::take(&mut me.record);
        me.check_canonical(1, &header)?;
        me.record = header;
        Ok(me)
    }

    /// The next row, `None` at the end of the file (and after an error).
    pub fn next_sample(&mut self) -> Result<Option<Sample>, CsvError> {
        if self.done {
            return Ok(None);
        }
        let r = self.next_inner();
        if !matches!(r, Ok(Some(_))) {
            self.done = true;
        }
        r
    }

    fn caps(&self) -> Caps {
        self.rdr.get_ref().caps
    }

    fn next_inner(&mut self) -> Result<Option<Sample>, CsvError> {
        if !self.read_record()? {
            // Whatever the crate skipped at the end (a blank line) is not canonical.
            if !self.rdr.get_ref().buf.is_empty() {
                return Err(CsvError::NotCanonical {
                    line: self.rdr.position().line(),
                    column: String::new(),
                    byte: 0,
                    what: "bytes after the last row (a blank line?)",
                });
            }
            return Ok(None);
        }
        let line = self.line();
        self.rows += 1;
        if self.rows > self.caps().max_rows {
            return Err(CsvError::TooManyRows {
                line,
                cap: self.caps().max_rows,
            });
        }
        if self.record.len() != self.names.len() {
            return Err(CsvError::FieldCount {
                line,
                got: self.record.len(),
                want: self.names.len(),
            });
        }
        let s = Row {
            line,
            rec: &self.record,
            names: &self.names,
            schema: self.schema,
        }
        .sample()?;
        fill_record(&s, self.schema, &mut self.expect);
        let expect = std::mem::take(&mut self.expect);
        let r = self.check_canonical(line, &expect);
        self.expect = expect;
        r?;
        Ok(Some(s))
    }

    fn line(&self) -> u64 {
        self.record.position().map_or(0, |p| p.line())
    }

    /// Reads one record into `self.record`; `false` at the end.
    fn read_record(&mut self) -> Result<bool, CsvError> {
        let at = self.rdr.position().line();
        let e = match self.rdr.read_record(&mut self.record) {
            Ok(more) => return Ok(more),
            Err(e) => e,
        };
        let caps = self.caps();
        Err(match self.rdr.get_ref().hit {
            Some(Cap::Total) => CsvError::TooLarge {
                cap: caps.max_bytes,
            },
            Some(Cap::Row) => CsvError::RowTooLong {
                line: at,
                cap: caps.max_row_bytes,
            },
            None => match e.kind() {
                csv::ErrorKind::Utf8 { pos, err } => CsvError::NotUtf8 {
                    line: pos.as_ref().map_or(at, |p| p.line()),
                    column: self.names.get(err.field()).cloned().unwrap_or_default(),
                },
                _ => CsvError::Read {
                    line: at,
                    source: e,
                },
            },
        })
    }

    fn check_header(&self) -> Result<(), CsvError> {
        let header = &self.record;
        for (i, h) in header.iter().enumerate() {
            if !self.names.iter().any(|w| w == h) {
                if h.ends_with('\r') && self.names.iter().any(|w| w == h.trim_end_matches('\r')) {
                    return Err(CsvError::NotCanonical {
                        line: 1,
                        column: h.trim_end_matches('\r').to_string(),
                        byte: 0,
                        what: "carriage return (CRLF line end?)",
                    });
                }
                return Err(CsvError::UnknownColumn(h.to_string()));
            }
            if header.iter().take(i).any(|x| x == h) {
                return Err(CsvError::DuplicateColumn(h.to_string()));
            }
        }
        for w in &self.names {
            if !header.iter().any(|h| h == w) {
                return Err(CsvError::MissingColumn(w.clone()));
            }
        }
        for (i, (h, w)) in header.iter().zip(&self.names).enumerate() {
            if h != w {
                return Err(CsvError::ColumnOrder {
                    position: i,
                    expected: w.clone(),
                    found: h.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Compares the raw bytes of the record just read with the writer's bytes for
    /// `expect`, then drops them from the recording.
    fn check_canonical(&mut self, line: u64, expect: &csv::StringRecord) -> Result<(), CsvError> {
        let end = self.rdr.position().byte();
        let len = end.saturating_sub(self.base) as usize;
        let cap = self.caps().max_row_bytes;
        if len > cap {
            return Err(CsvError::RowTooLong { line, cap });
        }
        // The writer's output accumulates; start a fresh one now and then (it holds one
        // row plus at most 1 MiB of rows already checked).
        if self.wtr.get_ref().len() > 1 << 20 {
            self.wtr = writer_builder().from_writer(Vec::new());
        }
        let from = self.wtr.get_ref().len();
        self.wtr.write_record(expect).map_err(CsvError::Write)?;
        self.wtr.flush().map_err(|e| CsvError::Write(e.into()))?;
        let want: &[u8] = self.wtr.get_ref().get(from..).unwrap_or_default();
        let rec = &mut self.rdr.get_mut().buf;
        let got = rec.get(..len).unwrap_or(rec.as_slice());
        if got != want {
            let byte = got
                .iter()
                .zip(want.iter())
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(want.len()));
            return Err(CsvError::NotCanonical {
                line,
                column: self
                    .names
                    .get(field_at(want, byte))
                    .cloned()
                    .unwrap_or_default(),
                byte,
                what: why_not_canonical(got, want, byte),
            });
        }
        rec.drain(..len);
        self.base = end;
        Ok(())
    }
}

impl<R: Read> Iterator for SamplesReader<R> {
    type Item = Result<Sample, CsvError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_sample().transpose()
    }
}

/// The field (0-based) that byte `at` of a canonical row falls in.
fn field_at(row: &[u8], at: usize) -> usize {
    let mut field = 0;
    let mut quoted = false;
    for &b in row.iter().take(at) {
        match b {
            b'"' => quoted = !quoted,
            b',' if !quoted => field += 1,
            _ => {}
        }
    }
    field
}

/// A short reason why `got` differs from the writer's `want` at byte `at`.
fn why_not_canonical(got: &[u8], want: &[u8], at: usize) -> &'static str {
    match (got.get(at), want.get(at)) {
        (Some(b'\r'), _) => "carriage return (CRLF line end?)",
        (Some(b'"'), _) => "quotes the writer does not write",
        (Some(b' ' | b'\t'), _) => "extra whitespace",
        (None, Some(b'\n')) => "no final newline",
        (Some(b'\n'), _) => "an extra line break (a blank line?)",
        (_, Some(b'"')) => "a field the writer quotes is not quoted",
        _ => "differs from the writer's output",
    }
}

/// Parses `samples.csv` strictly from a reader (streaming, under [`Caps::DEFAULT`]).
pub fn read_samples_from<R: Read>(r: R) -> Result<Vec<Sample>, CsvError> {
    read_schema_samples_from(r, SCHEMA_VERSION)
}

/// [`read_samples_from`] for a bundle of `schema` (see [`SamplesReader::for_schema`]).
pub fn read_schema_samples_from<R: Read>(r: R, schema: u32) -> Result<Vec<Sample>, CsvError> {
    let mut rdr = SamplesReader::for_schema(r, schema, Caps::DEFAULT)?;
    let mut out = Vec::new();
    while let Some(s) = rdr.next_sample()? {
        out.push(s);
    }
    out.shrink_to_fit();
    Ok(out)
}

/// Parses `samples.csv` strictly. Row order and values are returned as written; the
/// verifier judges them.
pub fn read_samples(bytes: &[u8]) -> Result<Vec<Sample>, CsvError> {
    read_samples_from(bytes)
}

/// One record being turned into a [`Sample`].
struct Row<'a> {
    line: u64,
    rec: &'a csv::StringRecord,
    names: &'a [String],
    schema: u32,
}

impl Row<'_> {
    fn bad(&self, i: usize, why: &'static str) -> CsvError {
        CsvError::BadValue {
            line: self.line,
            column: self.names.get(i).cloned().unwrap_or_default(),
            value: self.str(i).to_string(),
            why,
        }
    }
    fn str(&self, i: usize) -> &str {
        self.rec.get(i).unwrap_or("")
    }
    fn opt_u64(&self, i: usize) -> Result<Option<u64>, CsvError> {
        let v = self.str(i);
        if v.is_empty() {
            return Ok(None);
        }
        if !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.bad(i, "not a decimal integer"));
        }
        if v.len() > 1 && v.starts_with('0') {
            return Err(self.bad(i, "leading zero"));
        }
        v.parse::<u64>()
            .map(Some)
            .map_err(|_| self.bad(i, "out of range"))
    }
    fn u64(&self, i: usize) -> Result<u64, CsvError> {
        self.opt_u64(i)?.ok_or_else(|| self.bad(i, "required"))
    }
    fn opt_u32(&self, i: usize) -> Result<Option<u32>, CsvError> {
        match self.opt_u64(i)? {
            None => Ok(None),
            Some(v) => u32::try_from(v)
                .map(Some)
                .map_err(|_| self.bad(i, "out of range")),
        }
    }
    fn u32(&self, i: usize) -> Result<u32, CsvError> {
        self.opt_u32(i)?.ok_or_else(|| self.bad(i, "required"))
    }
    fn bool(&self, i: usize) -> Result<bool, CsvError> {
        match self.str(i) {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(self.bad(i, "want true or false")),
        }
    }
    /// The platform fields starting at `i`: all empty (none) or all present.
    fn platform(&self, i: usize) -> Result<Option<GuestPlatform>, CsvError> {
        if (i..i + PLATFORM_FIELDS).all(|k| self.str(k).is_empty()) {
            return Ok(None);
        }
        let cs = i + PLATFORM_FIELDS - 1;
        let clocksource = match self.str(cs) {
            "none" => None,
            v => Some(
                Clocksource::parse(v)
                    .filter(|c| c.as_str() == v)
                    .ok_or_else(|| self.bad(cs, "not a clocksource name"))?,
            ),
        };
        Ok(Some(GuestPlatform {
            packages: self.u32(i)?,
            cores_per_package: self.u32(i + 1)?,
            threads_per_core: self.u32(i + 2)?,
            tsc_deadline_timer: self.bool(i + 3)?,
            constant_tsc: self.bool(i + 4)?,
            nonstop_tsc: self.bool(i + 5)?,
            tsc_unstable: self.bool(i + 6)?,
            clocksource,
        }))
    }

    fn sample(&self) -> Result<Sample, CsvError> {
        let mut stages = StageTimes::default();
        let mut m = STAGE0;
        for (st, v) in crate::schema::Stage::ALL.iter().zip(stages.0.iter_mut()) {
            if stage_in_schema(*st, self.schema) {
                *v = self.opt_u64(m)?;
                m += 1;
            }
        }
        // `m` is now the column of `boot_id`.
        let boot_id = match self.str(m) {
            "" => None,
            b => Some(
                BootId::parse(b)
                    .filter(|id| id.as_str() == b)
                    .ok_or_else(|| self.bad(m, "not a boot id UUID"))?,
            ),
        };
        let p = PLATFORM_FIELDS;
        Ok(Sample {
            index: self.u64(0)?,
            contract: ContractKind::parse(self.str(1))
                .ok_or_else(|| self.bad(1, "want linux or probe"))?,
            concurrency: self.u32(2)?,
            intended_request_ns: self.opt_u64(3)?,
            actual_request_ns: self.u64(4)?,
            ready_ns: self.opt_u64(5)?,
            latency_ns: self.opt_u64(6)?,
            stages,
            boot_id,
            host_mem_configured: self.u64(m + 1)?,
            host_memslots: self.opt_u64(m + 2)?,
            host_e820_usable: self.opt_u64(m + 3)?,
            host_mapping_bytes: self.opt_u64(m + 4)?,
            host_page_size: self.opt_u64(m + 5)?,
            guest_mem_firmware: self.opt_u64(m + 6)?,
            guest_mem_total: self.opt_u64(m + 7)?,
            guest_cpus: self.opt_u32(m + 8)?,
            guest_platform: self.platform(m + 9)?,
            protocol_errors: self.u64(m + 9 + p)?,
            workload: self.str(m + 10 + p).to_string(),
            ok: self.bool(m + 11 + p)?,
            error_kind: self.str(m + 12 + p).to_string(),
            error_detail: self.str(m + 13 + p).to_string(),
            cleanup_ok: if self.schema >= 8 {
                match self.str(m + 14 + p) {
                    "" => None,
                    _ => Some(self.bool(m + 14 + p)?),
                }
            } else {
                None
            },
            cleanup_ns: if self.schema >= 8 {
                self.opt_u64(m + 15 + p)?
            } else {
                None
            },
            parallel_latency_ns: if self.schema >= 11 {
                self.opt_u64(m + 16 + p)?
            } else {
                None
            },
            // Schema 11: the kernel's zone figures, after `parallel_latency_ns`.
            guest_mem_present: if self.schema >= crate::schema::ZONES_SCHEMA {
                self.opt_u64(m + 17 + p)?
            } else {
                None
            },
            guest_mem_managed: if self.schema >= crate::schema::ZONES_SCHEMA {
                self.opt_u64(m + 18 + p)?
            } else {
                None
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(i: u64) -> Sample {
        let mut s = Sample::new(i, ContractKind::Probe, 1, 1 << 30);
        s.actual_request_ns = 1_000 + i;
        s.ready_ns = Some(2_000 + i);
        s.latency_ns = Some(1_000);
        s.ok = true;
        s
    }

    fn text(n: u64) -> String {
        write_samples(&(0..n).map(sample).collect::<Vec<_>>())
    }

    fn err(t: &str) -> CsvError {
        match read_samples(t.as_bytes()) {
            Err(e) => e,
            Ok(v) => panic!("accepted {} rows of {t:?}", v.len()),
        }
    }

    #[test]
    fn round_trip_and_canonical() {
        let t = text(3);
        let v = read_samples(t.as_bytes()).unwrap();
        assert_eq!(v, (0..3).map(sample).collect::<Vec<_>>());
        assert_eq!(write_samples(&v), t);
    }

    #[test]
    fn quoting_a_bare_field_is_not_canonical() {
        let t = text(2).replacen(",probe,", ",\"probe\",", 1);
        match err(&t) {
            CsvError::NotCanonical {
                line, column, what, ..
            } => {
                assert_eq!((line, column.as_str()), (2, "contract"));
                assert!(what.contains("quotes"), "{what}");
            }
            e => panic!("{e}"),
        }
        // A quoted header name too.
        let t = text(1).replacen("index", "\"index\"", 1);
        assert!(matches!(err(&t), CsvError::NotCanonical { line: 1, .. }));
    }

    #[test]
    fn crlf_blank_lines_and_missing_newline_are_not_canonical() {
        let t = text(2).replace('\n', "\r\n");
        assert!(
            matches!(err(&t), CsvError::NotCanonical { line: 1, .. }),
            "{}",
            err(&t)
        );
        let t = text(2) + "\n";
        assert!(
            matches!(err(&t), CsvError::NotCanonical { .. }),
            "{}",
            err(&t)
        );
        let mut t = text(2);
        t.pop();
        match err(&t) {
            CsvError::NotCanonical { line: 3, what, .. } => assert_eq!(what, "no final newline"),
            e => panic!("{e}"),
        }
        // A blank line between rows.
        let t = text(2).replacen("\n0,", "\n\n0,", 1);
        assert!(
            matches!(err(&t), CsvError::NotCanonical { .. }),
            "{}",
            err(&t)
        );
        // Trailing space in a value.
        let t = text(2).replacen(",probe,", ",probe ,", 1);
        assert!(
            matches!(err(&t), CsvError::BadValue { line: 2, .. }),
            "{}",
            err(&t)
        );
        let t = text(2).replacen("\n1,", "\n1 ,", 1);
        assert!(
            matches!(err(&t), CsvError::BadValue { line: 3, .. }),
            "{}",
            err(&t)
        );
    }

    #[test]
    fn invalid_utf8_is_typed_with_line_and_column() {
        let mut b = text(3).into_bytes();
        // The last field (empty) of the row on line 3 gets a stray byte.
        let nl: Vec<usize> = b
            .iter()
            .enumerate()
            .filter(|x| *x.1 == b'\n')
            .map(|x| x.0)
            .collect();
        b.insert(nl[2], 0xff);
        match read_samples(&b) {
            Err(CsvError::NotUtf8 { line, column }) => {
                assert_eq!((line, Some(&column)), (3, columns().last()))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn header_errors_are_typed() {
        let t = text(1);
        assert!(
            matches!(err(&t.replacen("index", "idx", 1)), CsvError::UnknownColumn(c) if c == "idx")
        );
        assert!(matches!(
            err(&t.replacen("index,contract", "contract,index", 1)),
            CsvError::ColumnOrder { position: 0, .. }
        ));
        assert!(matches!(
            err(&t.replacen("index,contract", "contract,contract", 1)),
            CsvError::DuplicateColumn(c) if c == "contract"
        ));
        assert!(matches!(err(""), CsvError::Empty));
    }

    #[test]
    fn values_and_field_counts_are_typed_with_line_and_column() {
        let t = text(2).replacen("\n1,probe,1,", "\n1,probe,01,", 1);
        match err(&t) {
            CsvError::BadValue {
                line, column, why, ..
            } => assert_eq!(
                (line, column.as_str(), why),
                (3, "concurrency", "leading zero")
            ),
            e => panic!("{e}"),
        }
        let t = text(2).replacen("\n1,probe,", "\n1,probe,,", 1);
        assert!(matches!(err(&t), CsvError::FieldCount { line: 3, .. }));
    }

    #[test]
    fn row_cap_is_a_typed_error() {
        let mut s = sample(0);
        s.error_detail = "x".repeat(MAX_ROW_BYTES + 1);
        let t = write_samples(&[s]);
        assert!(
            matches!(err(&t), CsvError::RowTooLong { line: 2, .. }),
            "{}",
            err(&t)
        );
        // A row far over the cap stops early instead of being buffered whole: the
        // recording never exceeds the cap plus one read buffer.
        let mut s = sample(0);
        s.error_detail = "x".repeat(64 * MAX_ROW_BYTES);
        let t = write_samples(&[s]);
        let mut counted = Counting(t.as_bytes(), 0);
        let e = read_samples_from(&mut counted).unwrap_err();
        assert!(matches!(e, CsvError::RowTooLong { .. }), "{e}");
        assert!(
            counted.1 <= MAX_ROW_BYTES + 4 * READ_BUFFER,
            "read {}",
            counted.1
        );
    }

    struct Counting<'a>(&'a [u8], usize);
    impl Read for Counting<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.0.read(out)?;
            self.1 += n;
            Ok(n)
        }
    }

    /// The same row forever (indexes repeat: the reader does not judge them, the
    /// verifier does).
    struct Endless(Vec<u8>, usize);
    impl Read for Endless {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = out.len().min(self.0.len() - self.1);
            out[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
            self.1 = (self.1 + n) % self.0.len();
            Ok(n)
        }
    }

    #[test]
    fn total_and_row_count_caps_are_typed_errors() {
        let header = text(0).into_bytes();
        assert!(SamplesReader::new(header.as_slice())
            .unwrap()
            .next_sample()
            .unwrap()
            .is_none());
        let row = text(1).into_bytes()[header.len()..].to_vec();
        let read = |caps: Caps| {
            let mut src = header.as_slice().chain(Endless(row.clone(), 0));
            let mut rdr = SamplesReader::with_caps(&mut src, caps).unwrap();
            let mut n = 0u64;
            let e = loop {
                match rdr.next_sample() {
                    Ok(Some(_)) => n += 1,
                    Ok(None) => panic!("endless input ended"),
                    Err(e) => break e,
                }
            };
            assert!(rdr.next_sample().unwrap().is_none(), "stops after an error");
            (n, e)
        };
        let (n, e) = read(Caps {
            max_rows: 1000,
            ..Caps::DEFAULT
        });
        assert!(matches!(e, CsvError::TooManyRows { cap: 1000, .. }), "{e}");
        assert_eq!(n, 1000);
        let cap = 100 * 1024;
        let (n, e) = read(Caps {
            max_bytes: cap,
            ..Caps::DEFAULT
        });
        assert!(matches!(e, CsvError::TooLarge { .. }), "{e}");
        let rows_in_cap = (cap - header.len() as u64) / row.len() as u64;
        assert!(
            n <= rows_in_cap && n + 100 > rows_in_cap,
            "{n} rows of {rows_in_cap}"
        );
    }
}
