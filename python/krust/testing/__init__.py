"""krust for other projects' tests: the embedded broker (`krust.Broker`, `krust.AsyncBroker`), the
child process it runs, its few requests, and the pytest plugin's kafka_broker/kafka_topic fixtures.
Not here: krust's own test doubles (tests/unit/doubles) nor anything the broker process imports."""
