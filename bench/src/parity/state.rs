//! The per-launch lifecycle table: an embedded SQLite database (WAL journal, `synchronous =
//! FULL`) with one row per launch, moved `CREATED → RUNNING → DESTROYED` (or `CREATED →
//! DESTROYED` for a launch that failed before its VMM was spawned; see
//! [`super::lifecycle`]'s rule), each transition in its own committed transaction. A
//! transition the lifecycle does not allow is refused ([`StateError::Illegal`]) and changes
//! nothing.
//!
//! Every transition is stamped inside its transaction (CLOCK_MONOTONIC, after `BEGIN
//! IMMEDIATE` holds the write lock) and timed: [`Transition::commit_ns`] is the `COMMIT`
//! alone (with WAL + FULL: the WAL append and its fsync), [`Transition::total_ns`] the whole
//! transaction, and [`Transition::committed_at_ns`] the instant the commit had returned (a
//! launch's strict-ready must come after its RUNNING commit).
//!
//! [`StateDb::export`] writes the canonical rows as `state.csv` and returns its SHA-256 (the
//! digest the bundle records). WAL keeps `-wal` and `-shm` files beside the database while
//! it is open: keep the database out of the bundle directory (the run directory), and export
//! into the bundle.

use super::lifecycle::{self, CsvError, LaunchRow, LaunchState, STATE_CSV};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use truecold_proto::measure::now_ns;
use truecold_proto::path_io::PathIoError;

/// The table (the brief's columns; stamps are CLOCK_MONOTONIC ns).
const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS launches(
    idx INTEGER PRIMARY KEY,
    launch_id TEXT NOT NULL UNIQUE,
    state TEXT NOT NULL CHECK(state IN ('CREATED','RUNNING','DESTROYED')),
    created_ns INTEGER NOT NULL,
    running_ns INTEGER,
    destroyed_ns INTEGER,
    tap TEXT NOT NULL,
    image TEXT NOT NULL,
    outcome TEXT
)";

/// Why the lifecycle database refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("opening the lifecycle database {}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("setting up the lifecycle database {} ({step})", path.display())]
    Setup {
        path: PathBuf,
        step: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    #[error("the lifecycle database {} has {pragma} = {got}, not {want}", path.display())]
    Pragma {
        path: PathBuf,
        pragma: &'static str,
        got: String,
        want: &'static str,
    },
    #[error("launch {idx}: {} → {to} is not a legal lifecycle transition",
        from.map_or("(no row)", LaunchState::as_str))]
    Illegal {
        idx: u64,
        from: Option<LaunchState>,
        to: LaunchState,
    },
    #[error("launch {idx}: launch id `{launch_id}` is already launch {other}'s")]
    DuplicateLaunchId {
        idx: u64,
        launch_id: String,
        other: u64,
    },
    #[error("launch {idx}: outcome `{outcome}` is neither `ok` nor a failure kind ([a-z0-9_]+)")]
    BadOutcome { idx: u64, outcome: String },
    #[error("launch {idx}: {op}")]
    Sql {
        idx: u64,
        op: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    #[error("reading the lifecycle rows")]
    Rows(#[source] rusqlite::Error),
    #[error("lifecycle row {idx}: {what} `{value}` is not one the lifecycle can hold")]
    Corrupt {
        idx: i64,
        what: &'static str,
        value: String,
    },
    #[error("launch {idx}: {what} {value} does not fit SQLite's INTEGER")]
    Range {
        idx: u64,
        what: &'static str,
        value: u64,
    },
    #[error("exporting the lifecycle")]
    Csv(#[source] CsvError),
    #[error(transparent)]
    Io(#[from] PathIoError),
}

/// One committed transition and what it cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    pub idx: u64,
    /// The state before (`None`: the row did not exist).
    pub from: Option<LaunchState>,
    pub to: LaunchState,
    /// The stamp written into the row (taken once the write lock was held).
    pub at_ns: u64,
    /// When `COMMIT` had returned: the transition is durable from here.
    pub committed_at_ns: u64,
    /// The `COMMIT` alone, ns.
    pub commit_ns: u64,
    /// `BEGIN IMMEDIATE` to the commit's return, ns.
    pub total_ns: u64,
}

/// The journal settings as SQLite reads them back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pragmas {
    /// `PRAGMA journal_mode` (lowercase: `wal`).
    pub journal_mode: String,
    /// `PRAGMA synchronous` (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA).
    pub synchronous: i64,
}

/// `PRAGMA synchronous`'s value for FULL.
pub const SYNCHRONOUS_FULL: i64 = 2;

/// The exported lifecycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Export {
    /// `<dir>/state.csv`.
    pub path: PathBuf,
    /// Lowercase hex SHA-256 of the file's bytes.
    pub sha256: String,
    /// The rows written, ordered by idx.
    pub rows: Vec<LaunchRow>,
    /// Time to read the rows and write the file, ns.
    pub ns: u64,
}

/// The open lifecycle database.
#[derive(Debug)]
pub struct StateDb {
    conn: Connection,
    path: PathBuf,
}

impl StateDb {
    /// Opens (creating if absent) the database at `path`, sets `journal_mode = WAL` and
    /// `synchronous = FULL`, reads both back (refusing a database where either did not
    /// take), and creates the `launches` table if absent.
    pub fn open(path: &Path) -> Result<StateDb, StateError> {
        let conn = Connection::open(path).map_err(|source| StateError::Open {
            path: path.into(),
            source,
        })?;
        let setup = |step, source| StateError::Setup {
            path: path.into(),
            step,
            source,
        };
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
            .map_err(|e| setup("journal_mode = WAL", e))?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(|e| setup("synchronous = FULL", e))?;
        conn.execute_batch(SCHEMA)
            .map_err(|e| setup("the launches table", e))?;
        let db = StateDb {
            conn,
            path: path.into(),
        };
        let p = db.pragmas()?;
        if p.journal_mode != "wal" {
            return Err(StateError::Pragma {
                path: path.into(),
                pragma: "journal_mode",
                got: p.journal_mode,
                want: "wal",
            });
        }
        if p.synchronous != SYNCHRONOUS_FULL {
            return Err(StateError::Pragma {
                path: path.into(),
                pragma: "synchronous",
                got: p.synchronous.to_string(),
                want: "2 (FULL)",
            });
        }
        Ok(db)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads `journal_mode` and `synchronous` back from SQLite.
    pub fn pragmas(&self) -> Result<Pragmas, StateError> {
        let setup = |step, source| StateError::Setup {
            path: self.path.clone(),
            step,
            source,
        };
        let journal_mode = self
            .conn
            .pragma_query_value(None, "journal_mode", |r| r.get::<_, String>(0))
            .map_err(|e| setup("reading journal_mode", e))?
            .to_ascii_lowercase();
        let synchronous = self
            .conn
            .pragma_query_value(None, "synchronous", |r| r.get::<_, i64>(0))
            .map_err(|e| setup("reading synchronous", e))?;
        Ok(Pragmas {
            journal_mode,
            synchronous,
        })
    }

    /// `(no row) → CREATED`: inserts launch `idx` with its id, tap and per-launch image.
    pub fn created(
        &mut self,
        idx: u64,
        launch_id: &str,
        tap: &str,
        image: &str,
    ) -> Result<Transition, StateError> {
        self.transition(idx, LaunchState::Created, |tx, at| {
            let other: Option<i64> = tx
                .query_row(
                    "SELECT idx FROM launches WHERE launch_id = ?1",
                    params![launch_id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(|source| StateError::Sql {
                    idx,
                    op: "looking up the launch id",
                    source,
                })?;
            if let Some(other) = other {
                return Err(StateError::DuplicateLaunchId {
                    idx,
                    launch_id: launch_id.into(),
                    other: other as u64,
                });
            }
            tx.execute(
                "INSERT INTO launches(idx, launch_id, state, created_ns, tap, image) \
                 VALUES (?1, ?2, 'CREATED', ?3, ?4, ?5)",
                params![sql_int(idx, "idx", idx)?, launch_id, at, tap, image],
            )
            .map(drop)
            .map_err(|source| StateError::Sql {
                idx,
                op: "inserting the CREATED row",
                source,
            })
        })
    }

    /// `CREATED → RUNNING`: the launch's VMM was spawned.
    pub fn running(&mut self, idx: u64) -> Result<Transition, StateError> {
        self.transition(idx, LaunchState::Running, |tx, at| {
            tx.execute(
                "UPDATE launches SET state = 'RUNNING', running_ns = ?2 WHERE idx = ?1",
                params![sql_int(idx, "idx", idx)?, at],
            )
            .map(drop)
            .map_err(|source| StateError::Sql {
                idx,
                op: "updating the row to RUNNING",
                source,
            })
        })
    }

    /// `CREATED|RUNNING → DESTROYED` with the launch's outcome ([`lifecycle::OUTCOME_OK`] or a
    /// failure kind, `[a-z0-9_]+`).
    pub fn destroyed(&mut self, idx: u64, outcome: &str) -> Result<Transition, StateError> {
        let kind = !outcome.is_empty()
            && outcome
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !kind {
            return Err(StateError::BadOutcome {
                idx,
                outcome: outcome.into(),
            });
        }
        self.transition(idx, LaunchState::Destroyed, |tx, at| {
            tx.execute(
                "UPDATE launches SET state = 'DESTROYED', destroyed_ns = ?2, outcome = ?3 \
                 WHERE idx = ?1",
                params![sql_int(idx, "idx", idx)?, at, outcome],
            )
            .map(drop)
            .map_err(|source| StateError::Sql {
                idx,
                op: "updating the row to DESTROYED",
                source,
            })
        })
    }

    /// One transition: `BEGIN IMMEDIATE`, the row's current state, the legality check, the
    /// stamp, `write`, `COMMIT` (timed). Any error rolls the transaction back.
    fn transition(
        &mut self,
        idx: u64,
        to: LaunchState,
        write: impl FnOnce(&rusqlite::Transaction<'_>, i64) -> Result<(), StateError>,
    ) -> Result<Transition, StateError> {
        let key = sql_int(idx, "idx", idx)?;
        let t0 = now_ns();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|source| StateError::Sql {
                idx,
                op: "BEGIN IMMEDIATE",
                source,
            })?;
        let cur: Option<String> = tx
            .query_row(
                "SELECT state FROM launches WHERE idx = ?1",
                params![key],
                |r| r.get(0),
            )
            .optional()
            .map_err(|source| StateError::Sql {
                idx,
                op: "reading the row's state",
                source,
            })?;
        let from = match cur {
            None => None,
            Some(s) => Some(LaunchState::parse(&s).ok_or(StateError::Corrupt {
                idx: key,
                what: "state",
                value: s,
            })?),
        };
        if !LaunchState::legal(from, to) {
            // Dropping `tx` rolls back (nothing was written).
            return Err(StateError::Illegal { idx, from, to });
        }
        let at_ns = now_ns();
        write(&tx, sql_int(idx, "stamp", at_ns)?)?;
        let c0 = now_ns();
        tx.commit().map_err(|source| StateError::Sql {
            idx,
            op: "COMMIT",
            source,
        })?;
        let committed_at_ns = now_ns();
        Ok(Transition {
            idx,
            from,
            to,
            at_ns,
            committed_at_ns,
            commit_ns: committed_at_ns.saturating_sub(c0),
            total_ns: committed_at_ns.saturating_sub(t0),
        })
    }

    /// Every row, ordered by idx.
    pub fn rows(&self) -> Result<Vec<LaunchRow>, StateError> {
        let mut st = self
            .conn
            .prepare(
                "SELECT idx, launch_id, state, created_ns, running_ns, destroyed_ns, tap, \
                 image, outcome FROM launches ORDER BY idx",
            )
            .map_err(StateError::Rows)?;
        type Raw = (
            i64,
            String,
            String,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            String,
            String,
            Option<String>,
        );
        let raw = st
            .query_map([], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                ))
            })
            .map_err(StateError::Rows)?
            .collect::<Result<Vec<Raw>, _>>()
            .map_err(StateError::Rows)?;
        raw.into_iter()
            .map(|(idx, launch_id, state, c, r, d, tap, image, outcome)| {
                let corrupt = |what, value: String| StateError::Corrupt { idx, what, value };
                let stamp = |what, v: Option<i64>| match v {
                    None => Ok(None),
                    Some(v) => u64::try_from(v)
                        .map(Some)
                        .map_err(|_| corrupt(what, v.to_string())),
                };
                Ok(LaunchRow {
                    idx: u64::try_from(idx).map_err(|_| corrupt("idx", idx.to_string()))?,
                    state: LaunchState::parse(&state).ok_or_else(|| corrupt("state", state))?,
                    launch_id,
                    created_ns: stamp("created_ns", c)?,
                    running_ns: stamp("running_ns", r)?,
                    destroyed_ns: stamp("destroyed_ns", d)?,
                    tap,
                    image,
                    outcome,
                })
            })
            .collect()
    }

    /// Writes the canonical rows as `<dir>/state.csv` (a temporary file, fsynced, renamed
    /// into place) and returns the file's SHA-256.
    pub fn export(&self, dir: &Path) -> Result<Export, StateError> {
        let t0 = now_ns();
        let rows = self.rows()?;
        let bytes = lifecycle::csv_bytes(&rows).map_err(StateError::Csv)?;
        let path = dir.join(STATE_CSV);
        write_atomic(&path, &bytes).map_err(PathIoError::at("write", &path))?;
        Ok(Export {
            sha256: truecold_proof::digest::sha256_hex(&bytes),
            path,
            rows,
            ns: now_ns().saturating_sub(t0),
        })
    }
}

/// `v` as SQLite's INTEGER (i64).
fn sql_int(idx: u64, what: &'static str, v: u64) -> Result<i64, StateError> {
    i64::try_from(v).map_err(|_| StateError::Range {
        idx,
        what,
        value: v,
    })
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("csv.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests;
