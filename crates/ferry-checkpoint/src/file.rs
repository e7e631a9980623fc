//! Checkpoints on a local file system, laid out as Spark lays out a checkpoint location:
//!
//! ```text
//! <dir>/<job-id>/
//!   metadata                      job id, job file fingerprint, format version
//!   offsets/<N>                   checkpoint N: enumerator states, writer states, prepared commits
//!   sources/<source>/<N>/<reader> the splits reader <reader> of source <source> owned at N
//!   commits/<N>                   written once the committers published N
//!   state                         RUNNING / FINISHED / FAILED / … with the process id, for `ferry jobs`
//!   lock                          locked by the running process (see [`crate::JobLock`])
//!   discarded-<time>/             history set aside by [`FileStore::discard_history`]
//! ```
//!
//! Every file is written to a temporary name, fsynced, renamed into place and its
//! directory fsynced, so a crash leaves either the old or the new file. Every file ends
//! with a CRC-32 trailer; a torn or corrupt checkpoint is skipped, with a warning naming
//! the file, in favour of the previous one. When every checkpoint is damaged, [`latest`]
//! refuses rather than report none: starting afresh would replay every source from the
//! beginning into sinks that already hold its output. Only the last `retained` committed
//! checkpoints are kept.
//!
//! [`latest`]: CheckpointStore::latest

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use ferry_api::{FerryError, Result, Split};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::data::{CheckpointData, SinkState, SourceState};
use crate::{CheckpointStore, JobLayout};

const FORMAT_VERSION: u32 = 1;
const TRAILER: &str = "\n#crc32=";

/// Lifecycle state of a job, as `ferry jobs` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobState {
    /// A process is running it.
    Running,
    /// It ended after reading all its input.
    Finished,
    /// It stopped with a savepoint and can be resumed.
    Savepoint,
    /// It was cancelled.
    Cancelled,
    /// It failed; it can be resumed from its last checkpoint.
    Failed,
}

/// What `ferry jobs` lists for one job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobInfo {
    /// The job id.
    pub job_id: String,
    /// Its state.
    pub state: JobState,
    /// The process running it (meaningful while `Running`).
    pub pid: u32,
    /// The engine (`local` or `spark`).
    #[serde(default)]
    pub engine: String,
    /// The latest committed checkpoint.
    pub last_checkpoint: Option<u64>,
    /// Seconds since the epoch of the last update.
    pub updated: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Metadata {
    id: String,
    fingerprint: String,
    format: u32,
}

#[derive(Debug, Serialize, Deserialize)]
struct Offsets {
    id: u64,
    fingerprint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    layout: Option<JobLayout>,
    enumerators: Vec<Value>,
    readers: Vec<usize>,
    sinks: Vec<SinkState>,
}

/// The files and folders of a job directory that make up its checkpoint history: what
/// [`FileStore::discard_history`] sets aside.
const HISTORY: [&str; 4] = ["offsets", "commits", "sources", "metadata"];

/// The directory of job `job_id` under the checkpoint directory `dir`; refuses an id that
/// would name another place.
pub fn job_dir(dir: &Path, job_id: &str) -> Result<PathBuf> {
    if job_id.is_empty() || job_id.contains(['/', '\\']) || job_id.starts_with('.') {
        return Err(FerryError::config(format!(
            "invalid job id '{job_id}': use letters, digits, '-' and '_'"
        )));
    }
    Ok(dir.join(job_id))
}

/// Checkpoints of one job in a directory.
#[derive(Debug)]
pub struct FileStore {
    root: PathBuf,
    job_id: String,
    fingerprint: String,
    retained: usize,
}

impl FileStore {
    /// The store of job `job_id` under `dir`, keeping `retained` committed checkpoints.
    /// Creates the job's directory and `metadata` when absent; when present, `metadata`
    /// must be intact.
    pub fn open(dir: &Path, job_id: &str, fingerprint: &str, retained: usize) -> Result<Self> {
        let store = FileStore {
            root: job_dir(dir, job_id)?,
            job_id: job_id.to_string(),
            fingerprint: fingerprint.to_string(),
            retained: retained.max(1),
        };
        store.create_layout()?;
        Ok(store)
    }

    /// Creates the checkpoint folders and `metadata` where they are missing.
    fn create_layout(&self) -> Result<()> {
        for sub in ["offsets", "commits", "sources"] {
            fs::create_dir_all(self.root.join(sub))
                .map_err(|e| FerryError::io("checkpoint", self.root.join(sub).display(), e))?;
        }
        let meta = self.root.join("metadata");
        if !meta.exists() {
            let m = Metadata {
                id: self.job_id.clone(),
                fingerprint: self.fingerprint.clone(),
                format: FORMAT_VERSION,
            };
            write_atomic(&meta, &to_json(&m)?)?;
        }
        Ok(())
    }

    /// Starts the job anew, deliberately: moves its checkpoint history (`offsets/`,
    /// `commits/`, `sources/`, `metadata`) into `discarded-<time>/` of the job directory,
    /// untouched, and creates an empty history. Returns where it went, or `None` when there
    /// was no checkpoint to set aside. The caller must hold the job's lock.
    pub fn discard_history(&mut self) -> Result<Option<PathBuf>> {
        // A damaged `metadata` alone is history too: it would stop every run.
        let has_history = !self.ids("offsets").is_empty()
            || !self.ids("commits").is_empty()
            || fs::read_dir(self.root.join("sources")).is_ok_and(|mut rd| rd.next().is_some())
            || self.fingerprint().is_err();
        if !has_history {
            return Ok(None);
        }
        let aside = create_discard_dir(&self.root)?;
        for name in HISTORY {
            let from = self.root.join(name);
            if from.exists() {
                fs::rename(&from, aside.join(name))
                    .map_err(|e| FerryError::io("checkpoint", from.display(), e))?;
            }
        }
        self.create_layout()?;
        Ok(Some(aside))
    }

    /// The job's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The fingerprint of the job file the job was first started with.
    pub fn fingerprint(&self) -> Result<String> {
        let m: Metadata = read_checked(&self.root.join("metadata"))?;
        if m.format != FORMAT_VERSION {
            return Err(FerryError::external(
                "checkpoint",
                format!(
                    "{}: format version {} is not supported",
                    self.root.join("metadata").display(),
                    m.format
                ),
            ));
        }
        Ok(m.fingerprint)
    }

    /// Records the job's state for `ferry jobs`.
    pub fn set_state(&self, info: &JobInfo) -> Result<()> {
        write_atomic(&self.root.join("state"), &to_json(info)?)
    }

    /// Reads the job state of the job directory `job_dir`.
    pub fn read_state(job_dir: &Path) -> Result<JobInfo> {
        read_checked(&job_dir.join("state"))
    }

    fn ids(&self, sub: &str) -> Vec<u64> {
        let mut ids: Vec<u64> = fs::read_dir(self.root.join(sub))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
                    .collect()
            })
            .unwrap_or_default();
        ids.sort_unstable();
        ids
    }

    fn load(&self, id: u64) -> Result<CheckpointData> {
        let offsets: Offsets = read_checked(&self.root.join("offsets").join(id.to_string()))?;
        let mut sources = Vec::new();
        for (s, (enumerator, readers)) in offsets
            .enumerators
            .into_iter()
            .zip(offsets.readers)
            .enumerate()
        {
            let mut splits = Vec::with_capacity(readers);
            for r in 0..readers {
                let p = self.reader_path(s, id, r);
                splits.push(read_checked::<Vec<Split>>(&p)?);
            }
            sources.push(SourceState {
                enumerator,
                readers: splits,
            });
        }
        Ok(CheckpointData {
            id,
            fingerprint: offsets.fingerprint,
            layout: offsets.layout,
            sources,
            sinks: offsets.sinks,
        })
    }

    fn reader_path(&self, source: usize, id: u64, reader: usize) -> PathBuf {
        self.root
            .join("sources")
            .join(source.to_string())
            .join(id.to_string())
            .join(reader.to_string())
    }

    fn prune(&self) {
        let committed = self.ids("commits");
        if committed.len() <= self.retained {
            return;
        }
        let keep_from = committed[committed.len() - self.retained];
        for id in self.ids("offsets").into_iter().filter(|i| *i < keep_from) {
            let _ = fs::remove_file(self.root.join("offsets").join(id.to_string()));
            let _ = fs::remove_file(self.root.join("commits").join(id.to_string()));
            if let Ok(rd) = fs::read_dir(self.root.join("sources")) {
                for e in rd.flatten() {
                    let _ = fs::remove_dir_all(e.path().join(id.to_string()));
                }
            }
        }
        for id in committed.into_iter().filter(|i| *i < keep_from) {
            let _ = fs::remove_file(self.root.join("commits").join(id.to_string()));
        }
    }
}

impl CheckpointStore for FileStore {
    fn save(&mut self, data: &CheckpointData) -> Result<()> {
        // Reader states first: offsets/N is what makes checkpoint N exist.
        for (s, src) in data.sources.iter().enumerate() {
            for (r, splits) in src.readers.iter().enumerate() {
                let p = self.reader_path(s, data.id, r);
                if let Some(parent) = p.parent() {
                    fs::create_dir_all(parent)
                        .map_err(|e| FerryError::io("checkpoint", parent.display(), e))?;
                }
                write_atomic(&p, &to_json(splits)?)?;
            }
        }
        let offsets = Offsets {
            id: data.id,
            fingerprint: data.fingerprint.clone(),
            layout: data.layout.clone(),
            enumerators: data.sources.iter().map(|s| s.enumerator.clone()).collect(),
            readers: data.sources.iter().map(|s| s.readers.len()).collect(),
            sinks: data.sinks.clone(),
        };
        write_atomic(
            &self.root.join("offsets").join(data.id.to_string()),
            &to_json(&offsets)?,
        )
    }

    fn mark_committed(&mut self, id: u64) -> Result<()> {
        write_atomic(
            &self.root.join("commits").join(id.to_string()),
            &to_json(&serde_json::json!({ "id": id }))?,
        )?;
        self.prune();
        Ok(())
    }

    fn latest(&mut self) -> Result<Option<(CheckpointData, bool)>> {
        let committed = self.ids("commits");
        let mut damaged = Vec::new();
        for id in self.ids("offsets").into_iter().rev() {
            match self.load(id) {
                Ok(data) => return Ok(Some((data, committed.contains(&id)))),
                Err(e) => {
                    tracing::warn!("skipping checkpoint {id}: {e}");
                    damaged.push(match e {
                        FerryError::External { message, .. } => message,
                        other => other.to_string(),
                    });
                }
            }
        }
        if damaged.is_empty() {
            return Ok(None);
        }
        // History without one intact checkpoint: a fresh start would replay every source
        // from the beginning, so it must be the user's decision.
        damaged.reverse();
        Err(FerryError::config(format!(
            "job '{}' has checkpoint history in {} but no intact checkpoint: {}. Nothing can be resumed, and starting from scratch would read every source again from the beginning; to start anew deliberately, run with --from-scratch (moves the old checkpoints into {}/discarded-<time>/) or use a new --job-id",
            self.job_id,
            self.root.display(),
            damaged.join("; "),
            self.root.display()
        )))
    }
}

/// Creates a new `discarded-<time>` folder in the job directory `root`, where a deliberate
/// fresh start sets the old history aside.
pub fn create_discard_dir(root: &Path) -> Result<PathBuf> {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    for n in 0..100 {
        let name = if n == 0 {
            format!("discarded-{stamp}")
        } else {
            format!("discarded-{stamp}-{n}")
        };
        let p = root.join(name);
        match fs::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(FerryError::io("checkpoint", p.display(), e)),
        }
    }
    Err(FerryError::external(
        "checkpoint",
        format!("{}: too many discarded-{stamp} folders", root.display()),
    ))
}

fn to_json<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(v)
        .map_err(|e| FerryError::internal(format!("cannot encode checkpoint: {e}")))
}

/// Writes `body` plus a CRC trailer to `path` atomically and durably.
pub fn write_atomic(path: &Path, body: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| FerryError::internal(format!("{} has no directory", path.display())))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp"));
    let io = |e| FerryError::io("checkpoint", tmp.display(), e);
    let mut f = fs::File::create(&tmp).map_err(io)?;
    f.write_all(body).map_err(io)?;
    writeln!(f, "{TRAILER}{:08x}", crc32fast::hash(body)).map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    fs::rename(&tmp, path).map_err(|e| FerryError::io("checkpoint", path.display(), e))?;
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Reads a file written by [`write_atomic`], verifying its checksum.
pub fn read_checked<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let bytes = fs::read(path).map_err(|e| FerryError::io("checkpoint", path.display(), e))?;
    let corrupt = |why: &str| {
        FerryError::external("checkpoint", format!("{}: corrupt ({why})", path.display()))
    };
    let text = std::str::from_utf8(&bytes).map_err(|_| corrupt("not UTF-8"))?;
    let at = text
        .rfind(TRAILER)
        .ok_or_else(|| corrupt("no checksum; truncated?"))?;
    let (body, trailer) = text.split_at(at);
    let crc = u32::from_str_radix(trailer[TRAILER.len()..].trim(), 16)
        .map_err(|_| corrupt("unreadable checksum"))?;
    if crc32fast::hash(body.as_bytes()) != crc {
        return Err(corrupt("checksum mismatch"));
    }
    serde_json::from_str(body).map_err(|e| corrupt(&e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn data(id: u64) -> CheckpointData {
        CheckpointData {
            id,
            fingerprint: "f".into(),
            layout: None,
            sources: vec![SourceState {
                enumerator: json!({"pending": []}),
                readers: vec![
                    vec![Split {
                        id: "s0".into(),
                        state: json!(id),
                    }],
                    vec![],
                ],
            }],
            sinks: vec![SinkState {
                writers: vec![Some(json!({"w": id}))],
                commits: vec![json!({"file": id})],
            }],
        }
    }

    #[test]
    fn saves_and_loads_the_latest_checkpoint_with_its_commit_mark() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path(), "job", "f", 3).unwrap();
        s.save(&data(1)).unwrap();
        s.mark_committed(1).unwrap();
        s.save(&data(2)).unwrap();
        let (d, committed) = s.latest().unwrap().unwrap();
        assert_eq!(d, data(2));
        assert!(!committed);
        assert!(dir.path().join("job/sources/0/2/0").exists());
    }

    #[test]
    fn a_corrupt_latest_checkpoint_falls_back_to_the_previous_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path(), "job", "f", 3).unwrap();
        s.save(&data(1)).unwrap();
        s.mark_committed(1).unwrap();
        s.save(&data(2)).unwrap();
        let p = dir.path().join("job/offsets/2");
        let mut bytes = fs::read(&p).unwrap();
        bytes[3] ^= 0x20;
        fs::write(&p, bytes).unwrap();
        let (d, committed) = s.latest().unwrap().unwrap();
        assert_eq!(d.id, 1);
        assert!(committed);
    }

    #[test]
    fn a_truncated_reader_state_invalidates_its_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path(), "job", "f", 3).unwrap();
        s.save(&data(1)).unwrap();
        s.save(&data(2)).unwrap();
        let p = dir.path().join("job/sources/0/2/0");
        let bytes = fs::read(&p).unwrap();
        fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
        assert_eq!(s.latest().unwrap().unwrap().0.id, 1);
        let e = read_checked::<Value>(&p).unwrap_err().to_string();
        assert!(e.contains("sources/0/2/0: corrupt"), "{e}");
    }

    #[test]
    fn keeps_only_the_retained_committed_checkpoints() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path(), "job", "f", 2).unwrap();
        for id in 1..=5 {
            s.save(&data(id)).unwrap();
            s.mark_committed(id).unwrap();
        }
        assert_eq!(s.ids("offsets"), vec![4, 5]);
        assert_eq!(s.ids("commits"), vec![4, 5]);
        assert!(!dir.path().join("job/sources/0/3").exists());
    }

    fn corrupt(p: &Path) {
        let mut bytes = fs::read(p).unwrap();
        bytes[3] ^= 0x20;
        fs::write(p, bytes).unwrap();
    }

    #[test]
    fn history_without_an_intact_checkpoint_is_refused_naming_the_damaged_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path(), "job", "f", 3).unwrap();
        assert!(s.latest().unwrap().is_none(), "no history: a fresh start");
        s.save(&data(1)).unwrap();
        s.mark_committed(1).unwrap();
        s.save(&data(2)).unwrap();
        corrupt(&dir.path().join("job/offsets/1"));
        let r = dir.path().join("job/sources/0/2/0");
        fs::write(&r, b"{").unwrap();
        let e = s.latest().unwrap_err();
        assert!(e.is_user_error(), "{e}");
        let e = e.to_string();
        for needle in [
            "job 'job' has checkpoint history in",
            "but no intact checkpoint:",
            "offsets/1: corrupt (checksum mismatch)",
            "sources/0/2/0: corrupt (no checksum; truncated?)",
            "--from-scratch",
            "new --job-id",
        ] {
            assert!(e.contains(needle), "{needle} missing from: {e}");
        }
    }

    #[test]
    fn discarding_the_history_sets_it_aside_untouched_and_starts_empty() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path(), "job", "f", 3).unwrap();
        assert_eq!(s.discard_history().unwrap(), None, "nothing to set aside");
        s.save(&data(1)).unwrap();
        s.mark_committed(1).unwrap();
        corrupt(&dir.path().join("job/offsets/1"));
        let before = fs::read(dir.path().join("job/offsets/1")).unwrap();
        let aside = s.discard_history().unwrap().unwrap();
        assert!(aside.starts_with(dir.path().join("job")), "{aside:?}");
        let name = aside.file_name().unwrap().to_string_lossy().to_string();
        assert!(name.starts_with("discarded-"), "{name}");
        assert_eq!(fs::read(aside.join("offsets/1")).unwrap(), before);
        assert!(aside.join("commits/1").exists() && aside.join("metadata").exists());
        assert!(s.latest().unwrap().is_none());
        assert_eq!(s.fingerprint().unwrap(), "f");
        s.save(&data(1)).unwrap();
        assert_eq!(s.latest().unwrap().unwrap().0.id, 1);
        // A second fresh start in the same second gets a folder of its own.
        let again = s.discard_history().unwrap().unwrap();
        assert_ne!(again, aside);
        // A damaged `metadata` alone is set aside too.
        corrupt(&dir.path().join("job/metadata"));
        assert!(s.fingerprint().is_err());
        assert!(s.discard_history().unwrap().is_some());
        assert_eq!(s.fingerprint().unwrap(), "f");
    }

    #[test]
    fn rejects_job_ids_that_would_escape_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert!(FileStore::open(dir.path(), "../x", "f", 1).is_err());
    }
}
