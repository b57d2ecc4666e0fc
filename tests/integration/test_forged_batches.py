"""A compressed batch that lies about its record count is refused; nothing stored can later
make the broker decode it, and the broker stays up.

The forged batch is the one from the report: ~100 bytes of gzip claiming 2^31-1 records. It
used to be accepted, and a ListOffsets by timestamp then aborted the broker while decoding it.
"""

from __future__ import annotations

import struct

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

from . import wire
from .broker_process import BrokerProcess
from .clients import CLIENTS_BY_NAME, consume_all
from .clients.confluent import create_topic
from .records import now_ms

API_LIST_OFFSETS = 2
GZIP = 1
CORRUPT_MESSAGE = 2
INVALID_RECORD = 87
# Offsets of the v2 batch header fields the forger rewrites.
LAST_OFFSET_DELTA = 23
RECORDS_COUNT = 57
ATTRIBUTES = 21
CRC = 17
confluent = CLIENTS_BY_NAME["confluent-kafka"]


def gzip_batch(values: list[bytes], timestamp_ms: int) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=GZIP,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for offset, value in enumerate(values):
        builder.append(offset, timestamp=timestamp_ms, key=None, value=value, headers=[])
    return builder.build()


def forge_record_count(batch: bytearray, count: int) -> bytes:
    """Claim `count` records (lastOffsetDelta to match) and fix the CRC, as an attacker would."""
    struct.pack_into(">i", batch, RECORDS_COUNT, count)
    struct.pack_into(">i", batch, LAST_OFFSET_DELTA, count - 1)
    struct.pack_into(">I", batch, CRC, calc_crc32c(bytes(batch[ATTRIBUTES:])))
    return bytes(batch)


def list_offsets_v1(sock, topic: str, partition: int, timestamp_ms: int) -> tuple[int, int]:
    """ListOffsets v1 for one partition: (error code, offset)."""
    partitions = wire.array([wire.int32(partition) + struct.pack(">q", timestamp_ms)])
    body = wire.int32(-1) + wire.array([wire.string(topic) + partitions])
    sock.sendall(wire.frame(wire.request_header(API_LIST_OFFSETS, 1, 31) + body))
    reader = wire.read_response(sock, 31)
    assert reader.int32() == 1
    assert reader.string() == topic
    assert reader.int32() == 1
    assert reader.int32() == partition
    error_code = reader.int16()
    reader.int64()  # timestamp
    return error_code, reader.int64()


def test_a_gzip_batch_claiming_2_31_records_is_refused_and_list_offsets_still_works(
    broker: BrokerProcess,
) -> None:
    create_topic(broker.bootstrap, "forged")
    sent_at = now_ms()
    forged = forge_record_count(gzip_batch([b"tiny"], sent_at), 2**31 - 1)
    assert len(forged) < 160

    with wire.connect("127.0.0.1", broker.port) as sock:
        refused = wire.produce_v3(sock, "forged", {0: forged}, correlation_id=11)
        assert refused[0].error_code in (INVALID_RECORD, CORRUPT_MESSAGE)
        accepted = wire.produce_v3(
            sock, "forged", {0: bytes(gzip_batch([b"a", b"b"], sent_at))}, correlation_id=12
        )
        assert (accepted[0].error_code, accepted[0].base_offset) == (0, 0)
        assert list_offsets_v1(sock, "forged", 0, sent_at) == (0, 0)

    assert broker.unexpected_exit() is None
    consumed = consume_all(confluent, broker.bootstrap, "forged", 2)
    assert [c.record.value for c in consumed] == [b"a", b"b"]
