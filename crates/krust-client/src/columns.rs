//! Spark's Kafka source schema as Arrow columns, filled record by record.
//!
//! Columns as Spark's Kafka connector names them: key binary, value binary, topic string,
//! partition int, offset long, timestamp (Spark's TimestampType: microseconds, UTC),
//! timestampType int (0 CreateTime, 1 LogAppendTime) and, when asked, headers
//! array<struct<key string, value binary>>.

use std::sync::Arc;

use arrow_array::builder::ArrayBuilder;
use arrow_array::builder::{
    BinaryBuilder, Int32Builder, Int64Builder, ListBuilder, StringBuilder, StructBuilder,
    TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use krust_storage::records::Header;
use krust_storage::BatchError;

/// The time zone Spark's TimestampType is exchanged in over Arrow.
const UTC: &str = "UTC";

fn header_fields() -> Fields {
    Fields::from(vec![
        Field::new("key", DataType::Utf8, true),
        Field::new("value", DataType::Binary, true),
    ])
}

fn headers_type() -> DataType {
    DataType::List(Arc::new(Field::new(
        "item",
        DataType::Struct(header_fields()),
        true,
    )))
}

/// The source schema; `headers` is the last column when `include_headers`.
pub fn source_schema(include_headers: bool) -> SchemaRef {
    let mut fields = vec![
        Field::new("key", DataType::Binary, true),
        Field::new("value", DataType::Binary, true),
        Field::new("topic", DataType::Utf8, true),
        Field::new("partition", DataType::Int32, true),
        Field::new("offset", DataType::Int64, true),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
            true,
        ),
        Field::new("timestampType", DataType::Int32, true),
    ];
    if include_headers {
        fields.push(Field::new("headers", headers_type(), true));
    }
    Arc::new(Schema::new(fields))
}

/// One consumed record, borrowed from the fetched bytes.
pub struct ConsumedRecord<'a> {
    pub offset: i64,
    /// Milliseconds since the epoch, as Kafka stores it.
    pub timestamp_ms: i64,
    /// 0 CreateTime, 1 LogAppendTime (Kafka's `TimestampType.id`).
    pub timestamp_type: i32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

/// Builders for the source schema; `finish` hands out a batch and starts the next.
pub struct RecordColumns {
    schema: SchemaRef,
    key: BinaryBuilder,
    value: BinaryBuilder,
    topic: StringBuilder,
    partition: Int32Builder,
    offset: Int64Builder,
    timestamp: TimestampMicrosecondBuilder,
    timestamp_type: Int32Builder,
    headers: Option<ListBuilder<StructBuilder>>,
}

impl RecordColumns {
    pub fn new(include_headers: bool) -> Self {
        Self {
            schema: source_schema(include_headers),
            key: BinaryBuilder::new(),
            value: BinaryBuilder::new(),
            topic: StringBuilder::new(),
            partition: Int32Builder::new(),
            offset: Int64Builder::new(),
            timestamp: TimestampMicrosecondBuilder::new().with_timezone(UTC),
            timestamp_type: Int32Builder::new(),
            headers: include_headers
                .then(|| ListBuilder::new(StructBuilder::from_fields(header_fields(), 0))),
        }
    }

    /// Rows appended since the last `finish`.
    pub fn len(&self) -> usize {
        self.offset.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends one record of `topic`-`partition` with its headers (read only when the
    /// schema has them).
    pub fn push<'h>(
        &mut self,
        topic: &str,
        partition: i32,
        record: &ConsumedRecord<'_>,
        headers: impl Iterator<Item = Result<Header<'h>, BatchError>>,
    ) -> Result<(), BatchError> {
        if let Some(list) = &mut self.headers {
            let entries = list.values();
            for header in headers {
                let header = header?;
                entries
                    .field_builder::<StringBuilder>(0)
                    .expect("field 0 is the header key")
                    .append_value(String::from_utf8_lossy(header.key));
                entries
                    .field_builder::<BinaryBuilder>(1)
                    .expect("field 1 is the header value")
                    .append_option(header.value);
                entries.append(true);
            }
            list.append(true);
        }
        self.key.append_option(record.key);
        self.value.append_option(record.value);
        self.topic.append_value(topic);
        self.partition.append_value(partition);
        self.offset.append_value(record.offset);
        self.timestamp
            .append_value(record.timestamp_ms.saturating_mul(1000));
        self.timestamp_type.append_value(record.timestamp_type);
        Ok(())
    }

    /// The rows appended so far as one batch; the builders start empty again.
    pub fn finish(&mut self) -> RecordBatch {
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(self.key.finish()),
            Arc::new(self.value.finish()),
            Arc::new(self.topic.finish()),
            Arc::new(self.partition.finish()),
            Arc::new(self.offset.finish()),
            Arc::new(self.timestamp.finish()),
            Arc::new(self.timestamp_type.finish()),
        ];
        if let Some(headers) = &mut self.headers {
            columns.push(Arc::new(headers.finish()));
        }
        RecordBatch::try_new(self.schema.clone(), columns)
            .expect("the builders follow the schema they were made for")
    }
}
