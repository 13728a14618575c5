//! Bounded memory: `samples.csv` is parsed row by row. One test in its own binary, so no
//! other test's allocations move the process's peak RSS (`VmHWM`) while it measures.
use std::io::{self, Read};
use truecold_proof::csv::{read_samples_from, write_samples, SamplesReader};
use truecold_proof::schema::{ContractKind, Sample, Stage};

/// Rows streamed through the parser (about 230 MB of CSV).
const ROWS: u64 = 1_000_000;
/// Rows collected into a `Vec<Sample>` (the bound is linear in it; measured at 1e6 rows:
/// the peak grew 505 MiB for 503.5 MiB of rows, 528 bytes each).
const COLLECTED: u64 = 200_000;

/// A row like the committed probe bundle's (every host stage, no guest data).
fn sample(i: u64) -> Sample {
    let mut s = Sample::new(i, ContractKind::Probe, 1, 17_179_869_184);
    s.actual_request_ns = 4_605_173_611_468;
    s.ready_ns = Some(s.actual_request_ns + 176_422_368);
    s.latency_ns = Some(176_422_368);
    for (k, st) in Stage::ALL.iter().enumerate() {
        s.stages.set(*st, Some(1_300_375 + k as u64 * 7_919));
    }
    s.host_memslots = Some(17_179_869_184);
    s.host_e820_usable = Some(17_179_869_184);
    s.guest_mem_firmware = Some(17_179_869_184);
    s.ok = true;
    s
}

/// `samples.csv` with `n` rows, generated as it is read (it holds one row at a time):
/// rows differ only in their index.
struct Generated {
    next: u64,
    n: u64,
    /// The writer's row for [`sample`] after its index field.
    rest: String,
    buf: Vec<u8>,
    pos: usize,
    bytes: u64,
}

impl Generated {
    fn new(n: u64) -> Self {
        let header = write_samples(&[]);
        let row = write_samples(&[sample(0)]).split_off(header.len());
        Generated {
            next: 0,
            n,
            rest: row.trim_start_matches('0').to_string(),
            buf: header.into_bytes(),
            pos: 0,
            bytes: 0,
        }
    }
}

impl Read for Generated {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.buf.len() {
            if self.next == self.n {
                return Ok(0);
            }
            self.buf = format!("{}{}", self.next, self.rest).into_bytes();
            self.pos = 0;
            self.next += 1;
        }
        let k = out.len().min(self.buf.len() - self.pos);
        out[..k].copy_from_slice(&self.buf[self.pos..self.pos + k]);
        self.pos += k;
        self.bytes += k as u64;
        Ok(k)
    }
}

/// Peak resident set so far, bytes.
fn vm_hwm() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

/// Resets the peak to the current RSS (Linux ≥ 4.0); returns whether it could. Where it
/// cannot, each baseline is the peak so far, which is the (small) start-up peak for part 1
/// and part 1's peak (+2 MiB) for part 2.
fn reset_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

const MIB: u64 = 1 << 20;

#[test]
fn a_million_rows_parse_in_bounded_memory() {
    // 1. Streaming, rows dropped as they come: the parser itself must stay flat while
    //    ~200 MB pass through it (the hand-written reader held the whole text, every
    //    field as a String and every row: 2.1 GiB at this size).
    reset_hwm();
    let before = vm_hwm();
    let mut src = Generated::new(ROWS);
    let mut rdr = SamplesReader::new(&mut src).unwrap();
    let mut n = 0u64;
    let mut last = None;
    while let Some(s) = rdr.next_sample().unwrap() {
        assert_eq!(s.index, n);
        n += 1;
        last = Some(s);
    }
    let mut want = sample(0);
    want.index = ROWS - 1;
    assert_eq!(last, Some(want));
    drop(rdr);
    let streamed = vm_hwm().saturating_sub(before);
    assert_eq!(n, ROWS);
    eprintln!(
        "streaming {ROWS} rows ({} MB): peak RSS grew {:.1} MiB",
        src.bytes / 1_000_000,
        streamed as f64 / MIB as f64
    );
    assert!(src.bytes > 150_000_000, "{} bytes", src.bytes);
    assert!(
        streamed < 16 * MIB,
        "streaming parse grew the peak RSS by {streamed} bytes"
    );

    // 2. Collected into a Vec<Sample>: the rows themselves, and not much more.
    reset_hwm();
    let before = vm_hwm();
    let rows = read_samples_from(Generated::new(COLLECTED)).unwrap();
    let collected = vm_hwm().saturating_sub(before);
    let row_bytes = rows.len() as u64 * std::mem::size_of::<Sample>() as u64;
    eprintln!(
        "collecting {COLLECTED} rows: peak RSS grew {:.1} MiB; the rows are {:.1} MiB ({} bytes each)",
        collected as f64 / MIB as f64,
        row_bytes as f64 / MIB as f64,
        std::mem::size_of::<Sample>()
    );
    assert_eq!(rows.len() as u64, COLLECTED);
    assert!(
        collected < row_bytes + row_bytes / 4 + 16 * MIB,
        "collecting grew the peak RSS by {collected} bytes for {row_bytes} bytes of rows"
    );
}
