//! Kafka's crash-safe replacement of cleaned segments. A rewritten group is written as
//! `<base>.log.cleaned` (+ indexes) and fsynced; under the log's lock it is renamed to `.swap`
//! (the commit point), the old segments are deleted, and the `.swap` files take the final
//! names. Loading a log finishes what a crash interrupted (`recovery`): `.cleaned` files are
//! deleted (the old segments are intact), and a `.swap` segment replaces the segments its
//! offsets cover.

use std::fs::File;
use std::io;
use std::sync::Arc;

use crate::log::Log;
use crate::log_file_utils::{sync_dir, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX};
use crate::scheduler::schedule_removal;
use crate::segment::{remove_if_present, LogSegment};

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
