//! The compression codec a record batch's attributes name (Kafka's `CompressionType` of a
//! batch, not the `compression.type` config, which is `config::CompressionType`). A leaf that
//! the batch codec and the storage errors both name.

/// The compression codec named by a batch's attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// Every codec a v2 batch can name.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
}
