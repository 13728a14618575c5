//! A campaign's rows and evidence as they come (issue 27: the harness's own memory). Each
//! launch's row goes to the staging file of `samples.csv` and its `reports.jsonl` line to
//! the staging file of the evidence, in index order, as soon as every row before it is in
//! ([`Recorder`]); nothing of a launch stays in memory after that. At the end the rows are
//! read back once from the staged bytes ([`Recorder::finish`]): the bundle's statistics,
//! its plots and the repeated-boot-id marks are computed from what was written, and the
//! evidence is copied into the bundle from its file ([`Spool::add_to`]), never held whole.
//!
//! The staging files are anonymous (`O_TMPFILE`, or created and unlinked at once) in the
//! bundle's parent directory: whatever ends the process, nothing is left behind (as when
//! everything was held in memory), and removing the directory loses nothing. A staging file
//! that cannot be written (a full disk) moves to the system's temporary directory with what
//! it held; should that fail too, the rest stays in memory. A row is never lost; the
//! bundle's warnings say where the rows went ([`Spool::note`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use truecold_proof::bundle::{BundleInputs, StagedFile};
use truecold_proof::csv::{Caps, CsvError, SamplesReader, SamplesWriter};
use truecold_proof::schema::Sample;

/// The bytes a staging file buffers before they are written to it.
pub const FLUSH_AT: usize = 64 * 1024;

/// Why the staged rows could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum StagingError {
    #[error("reading the staged rows back")]
    Rows(#[source] CsvError),
    #[error("reading the staged evidence back")]
    Read(#[source] io::Error),
}

/// An append-only staging file: bytes are buffered up to [`FLUSH_AT`], then written at
/// the file's end (positional writes).
#[derive(Debug)]
pub struct Spool {
    /// `None`: no staging file could be made anywhere; everything is in `buf`.
    file: Option<File>,
    /// Bytes in `file` (what was written whole; a failed write's part beyond is ignored).
    len: u64,
    buf: Vec<u8>,
    /// The file can take no more: every further byte stays in `buf`.
    stuck: bool,
    /// What went wrong and where the bytes are instead (the bundle's warning).
    note: Option<String>,
    /// What the file holds, for the note.
    what: &'static str,
}

/// An anonymous file in `dir` (created when missing).
fn anonymous_in(dir: &Path) -> io::Result<File> {
    std::fs::create_dir_all(dir)?;
    tempfile::tempfile_in(dir)
}

impl Spool {
    /// A staging file in `dir`, else in the system's temporary directory, else memory.
    pub fn new(dir: &Path, what: &'static str) -> Spool {
        let mut s = Spool {
            file: None,
            len: 0,
            buf: Vec::new(),
            stuck: false,
            note: None,
            what,
        };
        match anonymous_in(dir) {
            Ok(f) => s.file = Some(f),
            Err(e) => match tempfile::tempfile() {
                Ok(f) => {
                    s.file = Some(f);
                    s.note = Some(format!(
                        "the {what} could not be staged in {} ({e}): staged in {} instead",
                        dir.display(),
                        std::env::temp_dir().display()
                    ));
                }
                Err(e2) => {
                    s.stuck = true;
                    s.note = Some(format!(
                        "the {what} could not be staged in {} ({e}) nor in {} ({e2}): held \
                         in memory",
                        dir.display(),
                        std::env::temp_dir().display()
                    ));
                }
            },
        }
        s
    }

    /// Appends `bytes` (written out once [`FLUSH_AT`] are buffered).
    pub fn append(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= FLUSH_AT {
            self.drain();
        }
    }

    /// Writes the buffer to the file; on failure moves the file (see the module docs).
    pub fn drain(&mut self) {
        if self.stuck || self.buf.is_empty() {
            return;
        }
        let Some(f) = &self.file else {
            self.stuck = true;
            return;
        };
        match f.write_all_at(&self.buf, self.len) {
            Ok(()) => {
                self.len += self.buf.len() as u64;
                self.buf.clear();
            }
            Err(e) => self.relocate(e),
        }
    }

    /// The file could not take the buffer (`e`): a new one in the system's temporary
    /// directory gets what the old one held and the buffer; else the buffer stays.
    fn relocate(&mut self, e: io::Error) {
        let moved = (|| -> io::Result<File> {
            let new = tempfile::tempfile()?;
            if let Some(old) = &self.file {
                let mut r = ReadAt {
                    file: old,
                    pos: 0,
                    end: self.len,
                };
                let mut chunk = vec![0u8; FLUSH_AT];
                let mut at = 0u64;
                loop {
                    let n = r.read(&mut chunk)?;
                    if n == 0 {
                        break;
                    }
                    new.write_all_at(&chunk[..n], at)?;
                    at += n as u64;
                }
            }
            new.write_all_at(&self.buf, self.len)?;
            Ok(new)
        })();
        let what = self.what;
        match moved {
            Ok(f) => {
                self.file = Some(f);
                self.len += self.buf.len() as u64;
                self.buf.clear();
                self.note.get_or_insert(format!(
                    "the {what}' staging file could not be written ({e}): moved to {}",
                    std::env::temp_dir().display()
                ));
            }
            Err(e2) => {
                self.stuck = true;
                self.note = Some(format!(
                    "the {what}' staging file could not be written ({e}) nor moved to {} \
                     ({e2}): the rest held in memory",
                    std::env::temp_dir().display()
                ));
            }
        }
    }

    /// Where the bytes went when the staging file did not take them (a bundle warning).
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// Everything appended so far, from the start.
    pub fn reader(&self) -> impl Read + '_ {
        let file: Box<dyn Read + '_> = match &self.file {
            Some(f) => Box::new(ReadAt {
                file: f,
                pos: 0,
                end: self.len,
            }),
            None => Box::new(io::empty()),
        };
        file.chain(&self.buf[..])
    }

    /// Everything appended so far, in memory (small spools: attribution launches).
    pub fn to_vec(&self) -> Result<Vec<u8>, StagingError> {
        let mut v = Vec::new();
        self.reader()
            .read_to_end(&mut v)
            .map_err(StagingError::Read)?;
        Ok(v)
    }

    /// Adds everything appended so far to `inputs` as the bundle file `name`: the staging
    /// file itself when it holds it all (copied in by the bundle writer: after
    /// [`Spool::drain`]), else its bytes.
    pub fn add_to(&self, name: &str, inputs: &mut BundleInputs) -> Result<(), StagingError> {
        if let (Some(f), true) = (&self.file, self.buf.is_empty()) {
            if let Ok(dup) = f.try_clone() {
                inputs.staged_files.push(StagedFile {
                    name: name.to_string(),
                    file: Arc::new(dup),
                });
                return Ok(());
            }
        }
        inputs.extra_files.push((name.to_string(), self.to_vec()?));
        Ok(())
    }

    /// A spool that holds nothing (and takes bytes in memory).
    pub fn empty() -> Spool {
        Spool {
            file: None,
            len: 0,
            buf: Vec::new(),
            stuck: true,
            note: None,
            what: "rows",
        }
    }

    /// Each line through `f` (`None`: kept as it is) into a new spool in `dir`.
    pub fn rewrite_lines(
        &self,
        dir: &Path,
        mut f: impl FnMut(&[u8]) -> Option<Vec<u8>>,
    ) -> Result<Spool, StagingError> {
        let mut out = Spool::new(dir, self.what);
        let mut r = io::BufReader::new(self.reader());
        let mut line = Vec::new();
        loop {
            line.clear();
            let n =
                io::BufRead::read_until(&mut r, b'\n', &mut line).map_err(StagingError::Read)?;
            if n == 0 {
                break;
            }
            match f(&line) {
                Some(new) => out.append(&new),
                None => out.append(&line),
            }
        }
        out.drain();
        if out.note.is_none() {
            out.note = self.note.clone();
        }
        Ok(out)
    }
}

/// The rows' staging file as the CSV writer's output.
impl Write for Spool {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.append(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.drain();
        Ok(())
    }
}

/// Reads `file` from `pos` to `end` with positional reads.
struct ReadAt<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.end.saturating_sub(self.pos);
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// The caps for reading the staged rows back: only the writer's own bytes are read, so
/// none but the row cap applies (a campaign may have more rows than `verify` reads).
const READ_BACK: Caps = Caps {
    max_bytes: u64::MAX,
    max_row_bytes: 1 << 30,
    max_rows: u64::MAX,
};

/// One arm's rows and evidence, staged in index order as they come.
pub struct Recorder {
    rows: SamplesWriter<Spool>,
    reports: Spool,
    dir: PathBuf,
    /// Rows that finished before an earlier index (concurrent lanes): held until it is in.
    held: BTreeMap<u64, (Sample, String)>,
    /// The next index to stage.
    next: u64,
}

/// What a recorder staged: the rows, read back in index order, and the evidence's file.
#[derive(Debug)]
pub struct Recorded {
    pub samples: Vec<Sample>,
    pub reports: Spool,
    /// Where staged bytes went when a staging file did not take them.
    pub notes: Vec<String>,
}

impl Recorder {
    /// Staging files in `dir` (the bundle's parent directory), the first index 0.
    pub fn new(dir: &Path) -> Result<Recorder, StagingError> {
        Ok(Recorder {
            rows: SamplesWriter::new(Spool::new(dir, "rows")).map_err(StagingError::Rows)?,
            reports: Spool::new(dir, "reports"),
            dir: dir.to_path_buf(),
            held: BTreeMap::new(),
            next: 0,
        })
    }

    /// Stages row `s` and its `reports.jsonl` line once every row before it is in.
    pub fn record(&mut self, s: Sample, report_line: String) {
        if s.index != self.next {
            self.held.insert(s.index, (s, report_line));
            return;
        }
        self.stage(&s, &report_line);
        while let Some((s, l)) = self.held.remove(&self.next) {
            self.stage(&s, &l);
        }
    }

    fn stage(&mut self, s: &Sample, line: &str) {
        // A spool takes every byte: the CSV writer cannot fail on it.
        let _ = self.rows.write(s);
        self.reports.append(line.as_bytes());
        self.next = s.index + 1;
    }

    /// Rows held behind an earlier index (tests: bounded by the rows in flight).
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Stages what is held (in index order, past any index that never came), writes every
    /// buffer out and reads the rows back.
    pub fn finish(mut self) -> Result<Recorded, StagingError> {
        for (_, (s, l)) in std::mem::take(&mut self.held) {
            let _ = self.rows.write(&s);
            self.reports.append(l.as_bytes());
        }
        let mut rows = self.rows.finish().map_err(StagingError::Rows)?;
        rows.drain();
        self.reports.drain();
        let mut samples = Vec::new();
        let mut r = SamplesReader::with_caps(io::BufReader::new(rows.reader()), READ_BACK)
            .map_err(StagingError::Rows)?;
        while let Some(s) = r.next_sample().map_err(StagingError::Rows)? {
            samples.push(s);
        }
        let notes = [rows.note(), self.reports.note()]
            .into_iter()
            .flatten()
            .map(str::to_string)
            .collect();
        Ok(Recorded {
            samples,
            reports: self.reports,
            notes,
        })
    }

    /// The directory the staging files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use truecold_proof::schema::ContractKind;

    fn row(i: u64) -> Sample {
        let mut s = Sample::new(i, ContractKind::Probe, 1, 1 << 26);
        s.actual_request_ns = 1_000 + i;
        s.error_kind = "deadline".into();
        s.error_detail = format!("row {i}, with \"quotes\", commas\nand a newline");
        s
    }

    /// Rows given out of order are held only until the rows before them are in, staged in
    /// index order, and read back as they were given; an index that never came is skipped.
    #[test]
    fn rows_are_staged_in_index_order_and_read_back_whole() {
        let d = tempfile::tempdir().unwrap();
        let mut r = Recorder::new(d.path()).unwrap();
        for i in [1u64, 2, 0, 4, 3, 7, 6] {
            r.record(row(i), format!("{{\"index\":{i}}}\n"));
            assert!(r.held() <= 2, "{}", r.held());
        }
        assert_eq!(r.held(), 2, "5 never came: 6 and 7 are held");
        let done = r.finish().unwrap();
        let want: Vec<Sample> = [0, 1, 2, 3, 4, 6, 7].map(row).to_vec();
        assert_eq!(done.samples, want);
        let text = String::from_utf8(done.reports.to_vec().unwrap()).unwrap();
        let idx: Vec<&str> = text.lines().collect();
        assert_eq!(idx.len(), 7);
        assert!(idx[5].contains(":6}") && idx[6].contains(":7}"), "{text}");
        assert!(done.notes.is_empty());
        // The staging files are anonymous: nothing is left in the directory.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    /// A directory that cannot hold a staging file: the system's temporary directory does,
    /// and the note says so; the bytes are all there, in the bundle inputs as a staged file.
    #[test]
    fn a_spool_that_cannot_be_made_in_its_directory_moves_and_says_so() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("not-a-directory");
        std::fs::write(&file, b"x").unwrap();
        let mut s = Spool::new(&file.join("sub"), "reports");
        let big = vec![b'a'; FLUSH_AT + 10];
        s.append(&big);
        s.append(b"end\n");
        s.drain();
        assert!(
            s.note().is_some_and(|n| n.contains("staged in")),
            "{:?}",
            s.note()
        );
        let mut inputs = BundleInputs::default();
        s.add_to("reports.jsonl", &mut inputs).unwrap();
        assert_eq!(inputs.staged_files.len(), 1);
        let mut got = Vec::new();
        std::io::Read::read_to_end(
            &mut ReadAt {
                file: &inputs.staged_files[0].file,
                pos: 0,
                end: u64::MAX,
            },
            &mut got,
        )
        .unwrap();
        assert_eq!(got.len(), FLUSH_AT + 14);
        assert!(got.ends_with(b"aend\n"));
    }
}
