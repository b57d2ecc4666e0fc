"""Mistakes in the options fail the query with a message naming the option."""

from __future__ import annotations

import pytest
from integration.broker_process import BrokerProcess
from integration.clients.confluent import create_topic
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession


def load(spark: SparkSession, options: dict[str, str]) -> None:
    reader = spark.read.format("krust")
    for name, value in options.items():
        reader = reader.option(name, value)
    reader.load().collect()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "t"}, "option kafka.bootstrap.servers is required"),
        (
            {"kafka.bootstrap.servers": "B", "subscribe": "t", "assign": '{"t":[0]}'},
            "exactly one of the options subscribe, subscribePattern, assign",
        ),
        ({"kafka.bootstrap.servers": "B"}, "(given: none)"),
        (
            {"kafka.bootstrap.servers": "B", "subscribe": "t", "startingOffsets": '{"t":{"0":'},
            "option startingOffsets is not valid JSON",
        ),
        (
            {"kafka.bootstrap.servers": "B", "subscribe": "t", "startingOffsets": '{"t":[1]}'},
            "option startingOffsets: topic t needs an object",
        ),
        (
            {"kafka.bootstrap.servers": "B", "subscribe": "t", "startingOffsets": "latest"},
            "option startingOffsets cannot be latest",
        ),
        (
            {"kafka.bootstrap.servers": "B", "assign": "[0]"},
            "option assign must be JSON like",
        ),
        (
            {"kafka.bootstrap.servers": "B", "subscribe": "t", "minPartitions": "0"},
            "option minPartitions must be a positive integer",
        ),
        (
            {"kafka.bootstrap.servers": "B", "subscribe": "t", "includeHeaders": "yes"},
            "option includeHeaders must be true or false",
        ),
        (
            {"kafka.bootstrap.servers": "B", "subscribe": "t", "kafka.isolation.level": "dirty"},
            "option kafka.isolation.level must be read_uncommitted or read_committed",
        ),
        (
            {
                "kafka.bootstrap.servers": "B",
                "subscribe": "t",
                "kafka.sasl.kerberos.service.name": "k",
            },
            "option kafka.sasl.kerberos.service.name: not supported by this client",
        ),
        (
            {"kafka.bootstrap.servers": "B", "subscribe": "t", "kafka.ssl.key.password": "p"},
            "option kafka.ssl.key.password: encrypted private keys are not supported",
        ),
        (
            {"kafka.bootstrap.servers": "B", "subscribe": "t", "kafka.security.protocol": "SSL"},
            "option kafka.ssl.truststore.location: TLS needs the CA certificates",
        ),
        (
            {
                "kafka.bootstrap.servers": "B",
                "subscribe": "t",
                "kafka.security.protocol": "SASL_SSL",
                "kafka.ssl.truststore.type": "JKS",
            },
            'option kafka.ssl.truststore.type: only PEM stores are supported, not "JKS"',
        ),
        (
            {
                "kafka.bootstrap.servers": "B",
                "subscribe": "t",
                "kafka.security.protocol": "SASL_PLAINTEXT",
                "kafka.sasl.mechanism": "PLAIN",
                "kafka.sasl.jaas.config": 'PlainLoginModule required username="u";',
            },
            "option kafka.sasl.jaas.config: login module PlainLoginModule is not supported",
        ),
    ],
)
def test_bad_read_options_name_the_option(
    spark: SparkSession, options: dict[str, str], message: str
) -> None:
    with pytest.raises(PySparkException) as raised:
        load(spark, options)
    # The cause comes first, not at the bottom of the data source's traceback.
    assert message in str(raised.value).splitlines()[0]


def test_a_misspelled_option_is_refused_naming_the_right_one(spark: SparkSession) -> None:
    with pytest.raises(PySparkException) as raised:
        load(
            spark,
            {"kafka.bootstrap.servers": "B", "subscribe": "t", "maxOffsetsPerTriger": "10"},
        )
    # Spark hands a data source its options' names in lower case.
    assert "unknown option maxoffsetspertriger: did you mean maxOffsetsPerTrigger?" in str(
        raised.value
    )


def test_an_unknown_topic_is_named(spark: SparkSession, spark_broker: BrokerProcess) -> None:
    with pytest.raises(PySparkException) as raised:
        load(
            spark,
            {"kafka.bootstrap.servers": spark_broker.bootstrap, "subscribe": "spark-no-such"},
        )
    assert "option subscribe: topic spark-no-such does not exist" in str(raised.value)


def test_offsets_json_must_name_every_partition(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    create_topic(spark_broker.bootstrap, "spark-bad-offsets", partitions=2)
    with pytest.raises(PySparkException) as raised:
        load(
            spark,
            {
                "kafka.bootstrap.servers": spark_broker.bootstrap,
                "subscribe": "spark-bad-offsets",
                "startingOffsets": '{"spark-bad-offsets":{"0":0}}',
            },
        )
    assert "none for spark-bad-offsets-1" in str(raised.value)


def test_writing_without_a_value_column_is_refused(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(PySparkException) as raised:
        (
            df.write.format("krust")
            .mode("append")
            .option("kafka.bootstrap.servers", spark_broker.bootstrap)
            .option("topic", "t")
            .save()
        )
    assert "needs a value column" in str(raised.value)


def test_writing_without_a_topic_is_refused(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(PySparkException) as raised:
        df.write.format("krust").mode("append").option(
            "kafka.bootstrap.servers", spark_broker.bootstrap
        ).save()
    assert "give a topic column or the option topic" in str(raised.value)


def test_overwriting_a_topic_is_refused(spark: SparkSession, spark_broker: BrokerProcess) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(PySparkException) as raised:
        df.write.format("krust").mode("overwrite").option(
            "kafka.bootstrap.servers", spark_broker.bootstrap
        ).option("topic", "t").save()
    assert "topics are append-only: use mode('append')" in str(raised.value)


def test_a_start_past_the_end_of_a_partition_fails(
    spark: SparkSession, spark_broker: BrokerProcess
) -> None:
    topic = "spark-start-past-end"
    create_topic(spark_broker.bootstrap, topic)
    spark.createDataFrame([("a",), ("b",)], "value string").write.format("krust").mode(
        "append"
    ).option("kafka.bootstrap.servers", spark_broker.bootstrap).option("topic", topic).save()
    with pytest.raises(PySparkException) as raised:
        load(
            spark,
            {
                "kafka.bootstrap.servers": spark_broker.bootstrap,
                "subscribe": topic,
                "startingOffsets": f'{{"{topic}":{{"0":5}}}}',
            },
        )
    assert (
        f"The resolved start offset 5 is greater than the resolved end offset 2 for topic {topic} "
        "partition 0" in str(raised.value)
    )
