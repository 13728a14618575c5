//! `samples.csv`: a strict writer and reader.
//!
//! Format: UTF-8, `\n` line ends (every line, the last included), a header naming exactly
//! [`columns`] in order, one row per sample. A field containing `,`, `"`, `\r` or `\n` is
//! quoted (RFC 4180: `"` doubled); any other field is written bare. Integers are decimal
//! without sign or leading zeros; an empty field is "none". Unknown, missing or reordered
//! columns, wrong field counts, and non-canonical numbers are errors. Never panics.

use crate::schema::{ContractKind, Sample, Stage, StageTimes, STAGE_COUNT};
use truecold_proto::{BootId, Clocksource, GuestPlatform};

/// Why `samples.csv` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsvError {
    #[error("samples.csv is not UTF-8")]
    NotUtf8,
    #[error("samples.csv is empty (no header)")]
    Empty,
    #[error("samples.csv does not end with a newline")]
    NoFinalNewline,
    #[error("line {line}: {what}")]
    Syntax { line: usize, what: String },
    #[error("header: unknown column `{0}`")]
    UnknownColumn(String),
    #[error("header: missing column `{0}`")]
    MissingColumn(String),
    #[error("header: columns out of order (expected `{expected}` at position {position}, found `{found}`)")]
    ColumnOrder {
        position: usize,
        expected: String,
        found: String,
    },
    #[error("line {line}: {got} fields, header has {want}")]
    FieldCount {
        line: usize,
        got: usize,
        want: usize,
    },
    #[error("line {line}, column `{column}`: bad value `{value}` ({why})")]
    BadValue {
        line: usize,
        column: String,
        value: String,
        why: &'static str,
    },
}

/// The header, in order.
pub fn columns() -> Vec<String> {
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
    c.extend(Stage::ALL.iter().map(|s| format!("{}_ns", s.name())));
    c.extend(
        [
            "boot_id",
            "host_mem_configured",
            "host_memslots",
            "host_e820_usable",
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
            "workload",
            "ok",
            "error_kind",
            "error_detail",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    c
}

fn push_field(out: &mut String, f: &str) {
    if f.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&f.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(f);
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

/// The eight platform fields: all empty without a platform.
fn platform_fields(p: Option<&GuestPlatform>) -> [String; PLATFORM_FIELDS] {
    let b = |v: bool| if v { "true" } else { "false" }.to_string();
    match p {
        None => Default::default(),
        Some(p) => [
            p.packages.to_string(),
            p.cores_per_package.to_string(),
            p.threads_per_core.to_string(),
            b(p.tsc_deadline_timer),
            b(p.constant_tsc),
            b(p.nonstop_tsc),
            b(p.tsc_unstable),
            p.clocksource
                .as_ref()
                .map_or("none", |c| c.as_str())
                .to_string(),
        ],
    }
}

const PLATFORM_FIELDS: usize = 8;

/// Writes the samples as CSV text.
pub fn write_samples(samples: &[Sample]) -> String {
    let mut out = columns().join(",");
    out.push('\n');
    for s in samples {
        let mut fields = vec![
            s.index.to_string(),
            s.contract.as_str().to_string(),
            s.concurrency.to_string(),
            opt(s.intended_request_ns),
            s.actual_request_ns.to_string(),
            opt(s.ready_ns),
            opt(s.latency_ns),
        ];
        fields.extend(s.stages.0.iter().map(|v| opt(*v)));
        fields.extend([
            opt(s.boot_id.as_ref()),
            s.host_mem_configured.to_string(),
            opt(s.host_memslots),
            opt(s.host_e820_usable),
            opt(s.guest_mem_firmware),
            opt(s.guest_mem_total),
            opt(s.guest_cpus),
        ]);
        fields.extend(platform_fields(s.guest_platform.as_ref()));
        fields.extend([
            s.workload.clone(),
            if s.ok { "true" } else { "false" }.to_string(),
            s.error_kind.clone(),
            s.error_detail.clone(),
        ]);
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_field(&mut out, f);
        }
        out.push('\n');
    }
    out
}

/// Splits CSV text into records of fields; `(line number, fields)`.
fn records(text: &str) -> Result<Vec<(usize, Vec<String>)>, CsvError> {
    if text.is_empty() {
        return Err(CsvError::Empty);
    }
    if !text.ends_with('\n') {
        return Err(CsvError::NoFinalNewline);
    }
    let mut out = Vec::new();
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut line = 1usize;
    let mut record_line = 1usize;
    let mut chars = text.chars().peekable();
    // At the start of a field.
    let mut at_start = true;
    while let Some(c) = chars.next() {
        if at_start && c == '"' {
            // Quoted field: until a lone `"`.
            loop {
                match chars.next() {
                    None => {
                        return Err(CsvError::Syntax {
                            line: record_line,
                            what: "unterminated quoted field".into(),
                        })
                    }
                    Some('"') => {
                        if chars.peek() == Some(&'"') {
                            chars.next();
                            field.push('"');
                        } else {
                            break;
                        }
                    }
                    Some(ch) => {
                        if ch == '\n' {
                            line += 1;
                        }
                        field.push(ch);
                    }
                }
            }
            match chars.peek() {
                Some(',') | Some('\n') => {}
                _ => {
                    return Err(CsvError::Syntax {
                        line,
                        what: "text after a closing quote".into(),
                    })
                }
            }
            at_start = false;
            continue;
        }
        match c {
            ',' => {
                fields.push(std::mem::take(&mut field));
                at_start = true;
            }
            '\n' => {
                fields.push(std::mem::take(&mut field));
                out.push((record_line, std::mem::take(&mut fields)));
                line += 1;
                record_line = line;
                at_start = true;
            }
            '"' | '\r' => {
                return Err(CsvError::Syntax {
                    line,
                    what: format!("unquoted field contains {c:?}"),
                })
            }
            _ => {
                field.push(c);
                at_start = false;
            }
        }
    }
    Ok(out)
}

struct Row<'a> {
    line: usize,
    fields: &'a [String],
    names: &'a [String],
}

impl Row<'_> {
    fn bad(&self, i: usize, why: &'static str) -> CsvError {
        CsvError::BadValue {
            line: self.line,
            column: self.names.get(i).cloned().unwrap_or_default(),
            value: self.fields.get(i).cloned().unwrap_or_default(),
            why,
        }
    }
    fn str(&self, i: usize) -> &str {
        self.fields.get(i).map(String::as_str).unwrap_or("")
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
}

/// Parses `samples.csv` strictly. Row order and values are returned as written; the
/// verifier judges them.
pub fn read_samples(bytes: &[u8]) -> Result<Vec<Sample>, CsvError> {
    let text = std::str::from_utf8(bytes).map_err(|_| CsvError::NotUtf8)?;
    let recs = records(text)?;
    let want = columns();
    let (_, header) = recs.first().ok_or(CsvError::Empty)?;
    for h in header {
        if !want.contains(h) {
            return Err(CsvError::UnknownColumn(h.clone()));
        }
    }
    for w in &want {
        if !header.contains(w) {
            return Err(CsvError::MissingColumn(w.clone()));
        }
    }
    if header.len() != want.len() {
        return Err(CsvError::Syntax {
            line: 1,
            what: "duplicate column in header".into(),
        });
    }
    for (i, (h, w)) in header.iter().zip(&want).enumerate() {
        if h != w {
            return Err(CsvError::ColumnOrder {
                position: i,
                expected: w.clone(),
                found: h.clone(),
            });
        }
    }
    let mut out = Vec::with_capacity(recs.len().saturating_sub(1));
    for (line, fields) in recs.iter().skip(1) {
        if fields.len() != want.len() {
            return Err(CsvError::FieldCount {
                line: *line,
                got: fields.len(),
                want: want.len(),
            });
        }
        let r = Row {
            line: *line,
            fields,
            names: &want,
        };
        let mut stages = StageTimes::default();
        let s0 = 7;
        for k in 0..STAGE_COUNT {
            stages.0[k] = r.opt_u64(s0 + k)?;
        }
        let m = s0 + STAGE_COUNT;
        let boot_id = match r.str(m) {
            "" => None,
            b => Some(BootId::parse(b).ok_or_else(|| r.bad(m, "not a boot id UUID"))?),
        };
        if boot_id.is_some_and(|b| b.as_str() != r.str(m)) {
            return Err(r.bad(m, "not a boot id UUID"));
        }
        let p = PLATFORM_FIELDS;
        let ok = r.bool(m + 8 + p)?;
        out.push(Sample {
            index: r.u64(0)?,
            contract: ContractKind::parse(r.str(1))
                .ok_or_else(|| r.bad(1, "want linux or probe"))?,
            concurrency: r.u32(2)?,
            intended_request_ns: r.opt_u64(3)?,
            actual_request_ns: r.u64(4)?,
            ready_ns: r.opt_u64(5)?,
            latency_ns: r.opt_u64(6)?,
            stages,
            boot_id,
            host_mem_configured: r.u64(m + 1)?,
            host_memslots: r.opt_u64(m + 2)?,
            host_e820_usable: r.opt_u64(m + 3)?,
            guest_mem_firmware: r.opt_u64(m + 4)?,
            guest_mem_total: r.opt_u64(m + 5)?,
            guest_cpus: r.opt_u32(m + 6)?,
            guest_platform: r.platform(m + 7)?,
            protocol_errors: 0, // MERGE-TODO: column
            workload: r.str(m + 7 + p).to_string(),
            ok,
            error_kind: r.str(m + 9 + p).to_string(),
            error_detail: r.str(m + 10 + p).to_string(),
        });
    }
    Ok(out)
}
