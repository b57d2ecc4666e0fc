//! The columns of Spark's Kafka sink schema in an Arrow batch: value (required), key, topic,
//! partition and headers (optional), found by name. value and key may be binary or string,
//! as Spark's connector accepts both.

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{
    Array, GenericBinaryArray, GenericListArray, GenericStringArray, Int32Array, RecordBatch,
    StructArray,
};
use arrow_schema::DataType;

use crate::error::ClientError;

/// A binary or string column read as bytes; its type resolved once, not per row.
pub(crate) enum BytesColumn<'a> {
    Binary(&'a GenericBinaryArray<i32>),
    LargeBinary(&'a GenericBinaryArray<i64>),
    Utf8(&'a GenericStringArray<i32>),
    LargeUtf8(&'a GenericStringArray<i64>),
}

impl<'a> BytesColumn<'a> {
    fn new(array: &'a dyn Array, column: &str) -> Result<Self, ClientError> {
        Ok(match array.data_type() {
            DataType::Binary => Self::Binary(array.as_binary::<i32>()),
            DataType::LargeBinary => Self::LargeBinary(array.as_binary::<i64>()),
            DataType::Utf8 => Self::Utf8(array.as_string::<i32>()),
            DataType::LargeUtf8 => Self::LargeUtf8(array.as_string::<i64>()),
            other => {
                return Err(ClientError::InvalidRows(format!(
                    "column {column} must be binary or string, not {other}"
                )))
            }
        })
    }

    pub(crate) fn get(&self, row: usize) -> Option<&'a [u8]> {
        match self {
            Self::Binary(a) => a.is_valid(row).then(|| a.value(row)),
            Self::LargeBinary(a) => a.is_valid(row).then(|| a.value(row)),
            Self::Utf8(a) => a.is_valid(row).then(|| a.value(row).as_bytes()),
            Self::LargeUtf8(a) => a.is_valid(row).then(|| a.value(row).as_bytes()),
        }
    }
}

/// One row's headers: a slice of the headers column's struct entries.
pub(crate) struct RowHeaders<'a> {
    keys: BytesColumn<'a>,
    values: BytesColumn<'a>,
    range: std::ops::Range<usize>,
}

impl<'a> RowHeaders<'a> {
    pub(crate) fn len(&self) -> usize {
        self.range.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)> + '_ {
        self.range
            .clone()
            .map(|i| (self.keys.get(i).unwrap_or_default(), self.values.get(i)))
    }
}

/// The sink columns of one batch.
pub(crate) struct SinkRows<'a> {
    pub(crate) len: usize,
    pub(crate) value: BytesColumn<'a>,
    pub(crate) key: Option<BytesColumn<'a>>,
    pub(crate) topic: Option<BytesColumn<'a>>,
    pub(crate) partition: Option<&'a Int32Array>,
    headers: Option<(&'a GenericListArray<i32>, &'a StructArray)>,
}

impl<'a> SinkRows<'a> {
    pub(crate) fn new(batch: &'a RecordBatch) -> Result<Self, ClientError> {
        let column = |name: &str| batch.column_by_name(name).map(|c| c.as_ref());
        let value = column("value").ok_or_else(|| {
            ClientError::InvalidRows("the required value column is missing".to_string())
        })?;
        let partition = match column("partition") {
            None => None,
            Some(array) => Some(array.as_primitive_opt::<Int32Type>().ok_or_else(|| {
                ClientError::InvalidRows(format!(
                    "column partition must be int, not {}",
                    array.data_type()
                ))
            })?),
        };
        let headers = match column("headers") {
            None => None,
            Some(array) => Some(headers_column(array)?),
        };
        Ok(Self {
            len: batch.num_rows(),
            value: BytesColumn::new(value, "value")?,
            key: column("key")
                .map(|c| BytesColumn::new(c, "key"))
                .transpose()?,
            topic: column("topic")
                .map(|c| BytesColumn::new(c, "topic"))
                .transpose()?,
            partition,
            headers,
        })
    }

    /// The headers of `row` (none when the column is absent or null).
    pub(crate) fn headers(&self, row: usize) -> Option<RowHeaders<'a>> {
        let (list, entries) = self.headers?;
        if list.is_null(row) {
            return None;
        }
        let offsets = list.value_offsets();
        Some(RowHeaders {
            keys: BytesColumn::new(entries.column(0).as_ref(), "headers.key").ok()?,
            values: BytesColumn::new(entries.column(1).as_ref(), "headers.value").ok()?,
            range: offsets[row] as usize..offsets[row + 1] as usize,
        })
    }
}

fn headers_column(
    array: &dyn Array,
) -> Result<(&GenericListArray<i32>, &StructArray), ClientError> {
    let invalid = || {
        ClientError::InvalidRows(format!(
            "column headers must be array<struct<key string, value binary>>, not {}",
            array.data_type()
        ))
    };
    let list = array.as_list_opt::<i32>().ok_or_else(invalid)?;
    let entries = list.values().as_struct_opt().ok_or_else(invalid)?;
    if entries.num_columns() != 2 {
        return Err(invalid());
    }
    BytesColumn::new(entries.column(0).as_ref(), "headers.key")?;
    BytesColumn::new(entries.column(1).as_ref(), "headers.value")?;
    Ok((list, entries))
}
