//! Kafka's crash-safe replacement of cleaned segments. A rewritten group is written as
//! `<base>.log.cleaned` (+ indexes) and fsynced; under the log's lock it is renamed to `.swap`
//! (the commit point), the old segments are deleted, and the `.swap` files take the final
//! names. Loading a log finishes what a crash interrupted: `.cleaned` files are deleted (the
//! old segments are intact), and a `.swap` segment replaces the segments its offsets cover.

use std::fs::{self, File};
use std::io;
use std::path::Path;
use std::sync::Arc;

use tracing::info;

use crate::file_records::BatchScanner;
use crate::log::Log;
use crate::retention::schedule_removal;
use crate::segment::{
    offset_file_path, parse_offset_file_name, remove_if_present, LogSegment, INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX,
};
use crate::txn_index::TXN_INDEX_FILE_SUFFIX;

pub(crate) const CLEANED_FILE_SUFFIX: &str = ".cleaned";
pub(crate) const SWAP_FILE_SUFFIX: &str = ".swap";

const SEGMENT_FILE_SUFFIXES: [&str; 4] = [
    LOG_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
];

/// Replaces the segments `old` (base offsets and the files the cleaner read) with `cleaned`;
/// false, with `cleaned` deleted, if the log closed or any of them is no longer in the log.
pub(crate) fn replace_segments(
    log: &mut Log,
    old: &[(i64, Arc<File>)],
    mut cleaned: LogSegment,
) -> io::Result<bool> {
    let unchanged = !log.closed
        && old.iter().all(|(base, file)| {
            log.segments
                .get(base)
                .is_some_and(|segment| Arc::ptr_eq(segment.log_file(), file))
        });
    if !unchanged {
        cleaned.delete_files()?;
        return Ok(false);
    }
    cleaned.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)?;
    sync_dir(log.dir())?;
    // As Kafka does, the replaced files are renamed `.deleted` (loading removes them) and
    // removed after file.delete.delay.ms, so a fetch reading them finishes first.
    let mut replaced = Vec::new();
    for (base, _) in old {
        if let Some(segment) = log.segments.remove(base) {
            replaced.extend(segment.rename_for_deletion()?);
        }
    }
    cleaned.change_file_suffixes(SWAP_FILE_SUFFIX, "")?;
    sync_dir(log.dir())?;
    log.segments.insert(cleaned.base_offset(), cleaned);
    match &log.scheduler {
        Some(scheduler) => schedule_removal(scheduler, replaced, log.config().file_delete_delay_ms),
        None => {
            for path in replaced {
                remove_if_present(&path)?;
            }
        }
    }
    Ok(true)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A `.cleaned` or `.swap` file: a replacement a crash interrupted.
pub(crate) fn is_interrupted_swap_file(name: &str) -> bool {
    name.ends_with(CLEANED_FILE_SUFFIX) || name.ends_with(SWAP_FILE_SUFFIX)
}

/// Finishes or undoes a replacement a crash interrupted, before the log's segments load.
pub(crate) fn complete_interrupted_swaps(dir: &Path) -> io::Result<()> {
    let mut swaps = Vec::new();
    let mut bases = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(CLEANED_FILE_SUFFIX) {
            info!(file = %entry.path().display(), "deleting an unfinished cleaned segment");
            fs::remove_file(entry.path())?;
        } else if let Some(base) = SEGMENT_FILE_SUFFIXES
            .iter()
            .find_map(|suffix| parse_offset_file_name(name, &format!("{suffix}{SWAP_FILE_SUFFIX}")))
        {
            swaps.push(base);
        } else if let Some(base) = parse_offset_file_name(name, LOG_FILE_SUFFIX) {
            bases.push(base);
        }
    }
    swaps.sort_unstable();
    swaps.dedup();
    for &base in &swaps {
        let swap_path =
            offset_file_path(dir, base, &format!("{LOG_FILE_SUFFIX}{SWAP_FILE_SUFFIX}"));
        // Without a `.log.swap` the log file was renamed already: the old segments are gone
        // and only the indexes' renames are left.
        if swap_path.exists() {
            let end = next_offset(&swap_path, base)?;
            for &old in bases.iter().filter(|old| (base..end).contains(*old)) {
                for suffix in SEGMENT_FILE_SUFFIXES {
                    remove_if_present(&offset_file_path(dir, old, suffix))?;
                }
            }
        }
        for suffix in SEGMENT_FILE_SUFFIXES {
            let swapped = offset_file_path(dir, base, &format!("{suffix}{SWAP_FILE_SUFFIX}"));
            match fs::rename(&swapped, offset_file_path(dir, base, suffix)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        info!(dir = %dir.display(), base, "completed an interrupted segment swap");
    }
    if !swaps.is_empty() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// The offset after the last batch of the segment file at `path` (`base + 1` if it is empty:
/// the segment at `base` is the only one it replaces).
fn next_offset(path: &Path, base: i64) -> io::Result<i64> {
    let file = File::open(path)?;
    let size = file.metadata()?.len();
    let mut scanner = BatchScanner::new(&file, 0, size);
    let mut next = base + 1;
    while let Some((_, header)) = scanner.next_header()? {
        next = next.max(header.last_offset() + 1);
    }
    Ok(next)
}
