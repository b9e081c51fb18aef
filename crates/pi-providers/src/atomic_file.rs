//! Replacing a small file whole, atomically: the credential store and the models store write
//! their JSON this way, so a reader (another process too) sees the old file or the new one,
//! never a part.
//!
//! The new text goes to a temporary file beside the old one (owner-only, created new), is
//! flushed to disk, renamed over the old file, and the folder is flushed so that the rename
//! survives a crash. A failed write leaves the old file and no temporary one.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Tells apart the temporary files of one process's concurrent writes.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The folder of `path`, created (owner-only) when missing.
pub(crate) fn folder(path: &Path) -> io::Result<PathBuf> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.exists() {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir)?;
    }
    Ok(dir)
}

/// Replace the file at `path` with `bytes` (see the module docs).
pub(crate) fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = folder(path)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.{}.tmp", std::process::id(), TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)));
    let written = (|| -> io::Result<()> {
        let mut open = std::fs::OpenOptions::new();
        open.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
        let mut file = open.open(&temp)?;
        io::Write::write_all(&mut file, bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp, path)?;
        // The rename is durable once the folder is.
        #[cfg(unix)]
        std::fs::File::open(&dir)?.sync_all()?;
        Ok(())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}
