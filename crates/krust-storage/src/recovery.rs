//! Loading a partition's segments and recovering them after an unclean stop.
//!
//! Without the clean-shutdown marker, every segment from the one holding the recovery point
//! onward is re-validated batch by batch (size, magic, CRC, contiguous offsets); the first bad
//! byte and everything after it is cut off, later segments are deleted, and the indexes are
//! rebuilt from the surviving batches. Producer state is then rebuilt from the newest
//! snapshot plus the batches after it. Segments whose index files are missing or fail Kafka's
//! sanity check get their indexes rebuilt the same way even after a clean stop.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use tracing::{info, warn};

use crate::batch::{
    check_integrity, declared_size, BatchHeader, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD,
};
use crate::config::LogConfig;
use crate::control_batch::{read_end_txn_marker, EndTxnMarker};
use crate::error::StorageError;
use crate::file_records::{read_at, BatchScanner};
use crate::leader_epoch::EpochEntry;
use crate::log_file_utils::{
    offset_file_path, remove_if_present, sync_dir, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX,
};
use crate::producer_state::ProducerStateManager;
use crate::segment::{
    parse_offset_file_name, AppendedBatch, LogSegment, DELETED_FILE_SUFFIX, INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX,
};
use crate::txn_index::TXN_INDEX_FILE_SUFFIX;

/// Where loading a log starts from: the log dir's checkpoints and clean-shutdown marker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadParams {
    /// Offset below which the log is known to be fsynced (`recovery-point-offset-checkpoint`).
    pub recovery_point: i64,
    /// `log-start-offset-checkpoint`.
    pub log_start_offset: i64,
    /// The log dir held `.kafka_cleanshutdown`: skip the recovery scan.
    pub had_clean_shutdown: bool,
    /// `replication-offset-checkpoint`; 0 (none) starts at the log start, as Kafka's
    /// `Partition.createLog` does, so a restart never shows records no ISR confirmed.
    pub high_watermark: i64,
}

pub(crate) struct LoadedSegments {
    pub segments: BTreeMap<i64, LogSegment>,
    pub log_end_offset: i64,
    /// Where each leader epoch starts in the recovered segments, oldest first.
    pub recovered_epochs: Vec<EpochEntry>,
    pub recovered: RecoveryStats,
    /// The first recovered segment: its transaction index and those after it are rebuilt
    /// as the producer state is replayed over them.
    pub txn_index_rebuild_from: Option<i64>,
}

impl LoadedSegments {
    /// A log with no segment yet: one empty segment at `base`.
    pub(crate) fn new_log(
        dir: &Path,
        base: i64,
        config: &LogConfig,
        now_ms: i64,
    ) -> Result<Self, StorageError> {
        let segment =
            LogSegment::create(dir, base, config, now_ms).map_err(StorageError::io(dir))?;
        Ok(LoadedSegments {
            segments: BTreeMap::from([(base, segment)]),
            log_end_offset: base,
            recovered_epochs: Vec::new(),
            recovered: RecoveryStats::default(),
            txn_index_rebuild_from: None,
        })
    }
}

/// How much of a log loading re-validated batch by batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryStats {
    pub segments: usize,
    /// The `.log` bytes read and checked (before any corrupt tail was cut).
    pub bytes: u64,
}

/// Opens every segment of the partition directory, recovering what needs it.
pub(crate) fn load_segments(
    dir: &Path,
    config: &LogConfig,
    params: &LoadParams,
    now_ms: i64,
) -> Result<LoadedSegments, StorageError> {
    let bases = segment_base_offsets(dir)?;
    let Some(&last_base) = bases.last() else {
        return LoadedSegments::new_log(dir, params.log_start_offset.max(0), config, now_ms);
    };
    let recover_from = (!params.had_clean_shutdown).then(|| {
        bases
            .iter()
            .copied()
            .take_while(|base| *base <= params.recovery_point)
            .last()
            .unwrap_or(bases[0])
    });
    let mut segments = BTreeMap::new();
    let mut recovered_epochs = Vec::new();
    let mut damaged = false;
    let mut recovered = RecoveryStats::default();
    let mut txn_index_rebuild_from = None;
    for &base in &bases {
        if damaged {
            warn!(dir = %dir.display(), base, "deleting segment after a damaged one");
            LogSegment::open(dir, base, config, false, now_ms)
                .and_then(LogSegment::delete_files)
                .map_err(StorageError::io(dir))?;
            continue;
        }
        let mut segment = LogSegment::open(dir, base, config, base == last_base, now_ms)
            .map_err(StorageError::io(dir))?;
        if let Some(reason) = segment.txn_index.corruption() {
            warn!(dir = %dir.display(), base, reason, "rebuilding a corrupt transaction index");
        }
        let must_recover = recover_from.is_some_and(|from| base >= from);
        if must_recover || segment.needs_index_rebuild() {
            recovered.segments += 1;
            recovered.bytes += segment.size();
            txn_index_rebuild_from.get_or_insert(base);
            let truncated = recover_segment(&mut segment, config, &mut recovered_epochs)
                .map_err(StorageError::io(dir))?;
            if truncated > 0 {
                warn!(dir = %dir.display(), base, truncated, "truncated a corrupt segment tail");
                damaged = true;
            }
            if base != last_base && !damaged {
                segment
                    .on_become_inactive()
                    .map_err(StorageError::io(dir))?;
            }
        }
        segments.insert(base, segment);
    }
    let active = segments
        .values_mut()
        .next_back()
        .expect("at least one segment was loaded");
    active
        .prepare_for_appends(config)
        .map_err(StorageError::io(dir))?;
    let log_end_offset = active.next_offset().map_err(StorageError::io(dir))?;
    Ok(LoadedSegments {
        segments,
        log_end_offset,
        recovered_epochs,
        recovered,
        txn_index_rebuild_from,
    })
}

/// Base offsets of the `.log` files; index files without a `.log` file and `*.deleted` files
/// are deleted. A segment replacement the log cleaner left unfinished is completed or undone
/// first.
fn segment_base_offsets(dir: &Path) -> Result<Vec<i64>, StorageError> {
    let mut listing = list_segment_files(dir)?;
    if listing.interrupted_swap {
        complete_interrupted_swaps(dir).map_err(StorageError::io(dir))?;
        listing = list_segment_files(dir)?;
    }
    let SegmentFiles {
        mut bases,
        index_files,
        ..
    } = listing;
    bases.sort_unstable();
    for (base, path) in index_files {
        if bases.binary_search(&base).is_err() {
            fs::remove_file(&path).map_err(StorageError::io(&path))?;
        }
    }
    Ok(bases)
}

/// A partition directory's segment files, as one `readdir` found them.
struct SegmentFiles {
    bases: Vec<i64>,
    index_files: Vec<(i64, PathBuf)>,
    /// A `.cleaned` or `.swap` file is present.
    interrupted_swap: bool,
}

fn list_segment_files(dir: &Path) -> Result<SegmentFiles, StorageError> {
    let mut listing = SegmentFiles {
        bases: Vec::new(),
        index_files: Vec::new(),
        interrupted_swap: false,
    };
    for entry in fs::read_dir(dir).map_err(StorageError::io(dir))? {
        let entry = entry.map_err(StorageError::io(dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        listing.interrupted_swap |= is_interrupted_swap_file(name);
        if name.ends_with(DELETED_FILE_SUFFIX) {
            // Left by a retention pass whose delayed removal the stop cut short (Kafka's
            // LogLoader removes them too).
            let path = entry.path();
            fs::remove_file(&path).map_err(StorageError::io(&path))?;
        } else if let Some(base) = parse_offset_file_name(name, LOG_FILE_SUFFIX) {
            listing.bases.push(base);
        } else if let Some(base) = parse_offset_file_name(name, INDEX_FILE_SUFFIX)
            .or_else(|| parse_offset_file_name(name, TIME_INDEX_FILE_SUFFIX))
            .or_else(|| parse_offset_file_name(name, TXN_INDEX_FILE_SUFFIX))
        {
            listing.index_files.push((base, entry.path()));
        }
    }
    Ok(listing)
}

/// Re-validates a segment from its first byte, rebuilding its indexes; cuts the file at the
/// first invalid batch. Adds the start of each newer leader epoch to `epochs` (as Kafka's
/// recovery does). Returns the number of bytes cut off.
pub(crate) fn recover_segment(
    segment: &mut LogSegment,
    config: &LogConfig,
    epochs: &mut Vec<EpochEntry>,
) -> io::Result<u64> {
    segment.reset_for_rebuild();
    // Rebuilt from the markers as the producer state is replayed over the segment.
    segment.txn_index.reset()?;
    segment.prepare_for_appends(config)?;
    let file = std::sync::Arc::clone(segment.log_file());
    let file_size = file.metadata()?.len();
    let base_offset = segment.base_offset();
    let mut position = 0u64;
    let mut previous_last_offset = base_offset - 1;
    while position + RECORD_BATCH_OVERHEAD as u64 <= file_size {
        let length_prefix = read_at(&file, position, LOG_OVERHEAD)?;
        let size = match declared_size(&length_prefix) {
            Some(Ok(size)) if position + size as u64 <= file_size => size,
            _ => break,
        };
        let bytes = read_at(&file, position, size)?;
        let Ok(header) = check_integrity(&bytes) else {
            break;
        };
        // Offsets only grow (the cleaner leaves gaps): a batch whose base offset (outside the
        // CRC) does not follow its predecessor is as corrupt as a CRC mismatch.
        let in_order = header.base_offset > previous_last_offset
            && header.last_offset_delta >= 0
            && header.last_offset() - base_offset <= i64::from(i32::MAX);
        if !in_order {
            break;
        }
        segment.index_batch(
            position,
            &AppendedBatch {
                last_offset: header.last_offset(),
                max_timestamp: header.max_timestamp,
                size: size as u64,
            },
        );
        let epoch = header.partition_leader_epoch;
        if epoch >= 0 && epochs.last().is_none_or(|latest| epoch > latest.epoch) {
            epochs.push(EpochEntry {
                epoch,
                start_offset: header.base_offset,
            });
        }
        previous_last_offset = header.last_offset();
        position += size as u64;
    }
    if position < file_size {
        file.set_len(position)?;
    }
    segment.set_size(position);
    Ok(file_size - position)
}

/// Applies the batches between the producer state's snapshot offset and the log end. The
/// segments from `rebuild_txn_index_from` on get the aborted transactions their markers end
/// appended to their (emptied) transaction indexes, as Kafka's segment recovery does.
pub(crate) fn replay_producer_state(
    state: &mut ProducerStateManager,
    segments: &mut BTreeMap<i64, LogSegment>,
    log_end_offset: i64,
    rebuild_txn_index_from: Option<i64>,
) -> io::Result<()> {
    let from = state.map_end_offset();
    if from >= log_end_offset {
        return Ok(());
    }
    let first_base = segments
        .range(..=from)
        .next_back()
        .map_or(i64::MIN, |(base, _)| *base);
    for (base, segment) in segments.range_mut(first_base..) {
        let rebuild = rebuild_txn_index_from.is_some_and(|first| *base >= first);
        let start = segment.index_position(from);
        let file = std::sync::Arc::clone(segment.log_file());
        let mut scanner = BatchScanner::new(&file, start, segment.size());
        while let Some((position, header)) = scanner.next_header()? {
            if header.last_offset() < from {
                continue;
            }
            let marker = stored_marker(segment, position, &header)?;
            let completed = state.replay(&header, marker);
            if let Some((txn, last_stable_offset)) = completed.filter(|_| rebuild) {
                segment.append_aborted_txn(&txn, last_stable_offset)?;
            }
        }
    }
    state.advance_to(log_end_offset);
    Ok(())
}

/// The transaction marker of a stored control batch; a garbled one is logged and skipped.
fn stored_marker(
    segment: &LogSegment,
    position: u64,
    header: &BatchHeader,
) -> io::Result<Option<EndTxnMarker>> {
    if !header.is_control() || !header.has_producer_id() {
        return Ok(None);
    }
    let bytes = read_at(segment.log_file(), position, header.size_in_bytes())?;
    Ok(read_end_txn_marker(&bytes, header).unwrap_or_else(|error| {
        warn!(
            segment = %segment.log_path().display(),
            offset = header.base_offset,
            %error,
            "ignoring a control batch that is not a transaction marker"
        );
        None
    }))
}

const SEGMENT_FILE_SUFFIXES: [&str; 4] = [
    LOG_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
];

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
