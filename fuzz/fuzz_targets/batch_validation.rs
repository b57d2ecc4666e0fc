//! Produced record sets through krust-storage's `LogValidator`: batches a producer would
//! write, compressed with every codec, then forged (record counts, lengths, corrupt compressed
//! bytes, truncation). Any input must be accepted or refused with an error, never a panic,
//! an abort or an allocation sized by a forged count.
#![no_main]

use arbitrary::Arbitrary;
use krust_fuzz::FuzzBatch;
use krust_storage::batch::BatchHeader;
use krust_storage::records::batch_records;
use krust_storage::{LogConfig, TimestampType};
use libfuzzer_sys::fuzz_target;

const NOW: i64 = 1_700_000_000_000;

#[derive(Arbitrary, Debug)]
struct Input {
    batches: Vec<FuzzBatch>,
    log_append_time: bool,
}

fuzz_target!(|input: Input| {
    let records: Vec<u8> = input.batches.iter().flat_map(|b| b.encode(NOW)).collect();
    let config = LogConfig {
        message_timestamp_type: if input.log_append_time {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        },
        ..LogConfig::default()
    };
    let accepted = krust_storage::fuzzing::validate_records(&records, &config, NOW);
    if accepted.is_ok() {
        // ListOffsets walks stored batches again, straight from the log.
        let header = BatchHeader::parse(&records).expect("an accepted batch has a header");
        let walked = batch_records(&records[..header.size_in_bytes()], &header)
            .expect("an accepted batch decompresses");
        assert_eq!(walked.count(), header.records_count as usize);
    }
});
