import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.LogTruncationException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.internals.Exit;

/**
 * The Apache Kafka Java client, driven by the integration tests (tests/integration/clients/java.py).
 *
 * <p>Records travel as tab-separated lines of hex fields ("-" for null) so keys, values and headers
 * cross the process boundary byte for byte:
 * produce input {@code partition timestamp key value headers}, consume output
 * {@code offset partition timestamp key value headers}; headers are "-" or comma-separated
 * {@code hexKey:hexValue}.
 *
 * <pre>
 * produce        BOOTSTRAP TOPIC CODEC                     (records on stdin; prints "partition offset")
 * consume        BOOTSTRAP TOPIC PARTITION COUNT TIMEOUT_MS (assign + seek to beginning, no group)
 * create-topic   BOOTSTRAP TOPIC PARTITIONS [NAME=VALUE ...]
 * describe-topic BOOTSTRAP TOPIC                            (prints "topicId partitions")
 * delete-topic   BOOTSTRAP TOPIC
 * describe-partitions BOOTSTRAP TOPIC LIMIT (per partition "partition leader replicas isr elr
 *                                        lastKnownElr", then "operations OP,..."; LIMIT partitions
 *                                        per DescribeTopicPartitions response)
 * describe-log-dirs   BOOTSTRAP         (per dir "dir DIR ERROR TOTAL USABLE", per replica
 *                                        "replica TOPIC PARTITION SIZE LAG FUTURE")
 * describe-producers  BOOTSTRAP TOPIC PARTITION (per producer "id epoch lastSequence
 *                                        lastTimestamp coordinatorEpoch txnStartOffset")
 * validate-position   BOOTSTRAP TOPIC PARTITION OFFSET EPOCH (seeks to OFFSET as written in leader
 *                                        EPOCH, polls; prints "position N" or "truncated N")
 * transact       BOOTSTRAP TOPIC TRANSACTIONAL_ID commit|abort (values on stdin, one hex value
 *                                        per line, to partition 0 in one transaction)
 * group-member   BOOTSTRAP TOPIC GROUP PROTOCOL [ASSIGNOR] (subscribe() in GROUP with
 *                                        group.protocol=PROTOCOL; prints "assigned P,P,..." on
 *                                        each assignment change and "record PARTITION OFFSET
 *                                        HEXVALUE" per record, auto-commits; closes (committing,
 *                                        leaving the group) when stdin closes)
 * </pre>
 *
 * A failure prints "error: ExceptionName: message" on stderr and exits 1.
 */
public final class KrustJavaClient {
    private static final HexFormat HEX = HexFormat.of();
    private static final String NULL = "-";
    private static final long ADMIN_TIMEOUT_SECONDS = 30;

    private KrustJavaClient() {}

    public static void main(String[] args) throws Exception {
        try {
            switch (args[0]) {
                case "produce" -> produce(args[1], args[2], args[3]);
                case "consume" -> consume(args[1], args[2], Integer.parseInt(args[3]),
                        Integer.parseInt(args[4]), Long.parseLong(args[5]));
                case "create-topic" -> createTopic(args[1], args[2], Integer.parseInt(args[3]),
                        List.of(args).subList(4, args.length));
                case "describe-topic" -> describeTopic(args[1], args[2]);
                case "delete-topic" -> deleteTopic(args[1], args[2]);
                case "describe-partitions" -> describePartitions(args[1], args[2],
                        Integer.parseInt(args[3]));
                case "describe-log-dirs" -> describeLogDirs(args[1]);
                case "describe-producers" -> describeProducers(args[1], args[2],
                        Integer.parseInt(args[3]));
                case "transact" -> transact(args[1], args[2], args[3], args[4]);
                case "group-member" -> groupMember(args[1], args[2], args[3], args[4],
                        args.length > 5 ? args[5] : null);
                case "validate-position" -> validatePosition(args[1], args[2],
                        Integer.parseInt(args[3]), Long.parseLong(args[4]),
                        Integer.parseInt(args[5]));
                default -> throw new IllegalArgumentException("unknown command " + args[0]);
            }
        } catch (ExecutionException e) {
            fail(e.getCause());
        } catch (Exception e) {
            fail(e);
        }
    }

    private static void fail(Throwable error) {
        System.err.println("error: " + error.getClass().getSimpleName() + ": " + error.getMessage());
        Exit.exit(1);
    }

    private static void produce(String bootstrap, String topic, String codec) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(
                props, new ByteArraySerializer(), new ByteArraySerializer())) {
            BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                String[] f = line.split("\t", -1);
                Long timestamp = NULL.equals(f[1]) ? null : Long.valueOf(f[1]);
                sent.add(producer.send(new ProducerRecord<>(topic, Integer.valueOf(f[0]), timestamp,
                        bytes(f[2]), bytes(f[3]), headers(f[4]))));
            }
            producer.flush();
            for (Future<RecordMetadata> future : sent) {
                RecordMetadata metadata = future.get(30, TimeUnit.SECONDS);
                System.out.println(metadata.partition() + " " + metadata.offset());
            }
        }
    }

    private static void transact(String bootstrap, String topic, String transactionalId,
            String outcome) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(
                props, new ByteArraySerializer(), new ByteArraySerializer())) {
            producer.initTransactions();
            producer.beginTransaction();
            BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                producer.send(new ProducerRecord<>(topic, 0, null, bytes(line)));
            }
            producer.flush();
            if ("commit".equals(outcome)) {
                producer.commitTransaction();
            } else {
                producer.abortTransaction();
            }
        }
    }

    private static void consume(String bootstrap, String topic, int partition, int count,
            long timeoutMs) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        TopicPartition tp = new TopicPartition(topic, partition);
        int received = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(
                props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (received < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    if (received++ < count) {
                        System.out.println(r.offset() + "\t" + r.partition() + "\t" + r.timestamp()
                                + "\t" + hex(r.key()) + "\t" + hex(r.value()) + "\t"
                                + hexHeaders(r.headers().toArray()));
                    }
                }
            }
        }
        if (received < count) {
            throw new IllegalStateException(
                    "timed out after " + received + " of " + count + " records");
        }
    }

    private static void groupMember(String bootstrap, String topic, String group, String protocol,
            String assignor) throws Exception {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, "500");
        if (assignor != null) {
            props.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
        }
        Thread stdinWatcher = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // the test closes stdin to stop the member
                }
            } catch (java.io.IOException ignored) {
                // closed
            }
        });
        stdinWatcher.setDaemon(true);
        stdinWatcher.start();
        String assigned = null;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(
                props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.subscribe(List.of(topic));
            while (stdinWatcher.isAlive()) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    System.out.println("record " + r.partition() + " " + r.offset() + " "
                            + hex(r.value()));
                }
                List<String> partitions = new ArrayList<>();
                for (TopicPartition tp : consumer.assignment()) {
                    partitions.add(Integer.toString(tp.partition()));
                }
                Collections.sort(partitions);
                String now = String.join(",", partitions);
                if (!now.equals(assigned)) {
                    assigned = now;
                    System.out.println("assigned " + now);
                }
                System.out.flush();
            }
        }
    }

    private static Admin admin(String bootstrap) {
        return Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000"));
    }

    private static void createTopic(String bootstrap, String topic, int partitions,
            List<String> configs) throws Exception {
        Map<String, String> topicConfigs = new HashMap<>();
        for (String entry : configs) {
            String[] nameValue = entry.split("=", 2);
            topicConfigs.put(nameValue[0], nameValue[1]);
        }
        try (Admin admin = admin(bootstrap)) {
            NewTopic newTopic = new NewTopic(topic, partitions, (short) 1).configs(topicConfigs);
            admin.createTopics(List.of(newTopic)).all().get(ADMIN_TIMEOUT_SECONDS, TimeUnit.SECONDS);
        }
    }

    private static void describeTopic(String bootstrap, String topic) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            TopicDescription description = admin.describeTopics(List.of(topic))
                    .allTopicNames().get(ADMIN_TIMEOUT_SECONDS, TimeUnit.SECONDS).get(topic);
            System.out.println(description.topicId() + " " + description.partitions().size());
        }
    }

    private static void deleteTopic(String bootstrap, String topic) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            admin.deleteTopics(List.of(topic)).all().get(ADMIN_TIMEOUT_SECONDS, TimeUnit.SECONDS);
        }
    }

    private static void describePartitions(String bootstrap, String topic, int limit)
            throws Exception {
        try (Admin admin = admin(bootstrap)) {
            DescribeTopicsOptions options = new DescribeTopicsOptions()
                    .includeAuthorizedOperations(true).partitionSizeLimitPerResponse(limit);
            TopicDescription description = admin.describeTopics(List.of(topic), options)
                    .allTopicNames().get(ADMIN_TIMEOUT_SECONDS, TimeUnit.SECONDS).get(topic);
            for (TopicPartitionInfo p : description.partitions()) {
                System.out.println(p.partition() + " " + p.leader().id() + " " + ids(p.replicas())
                        + " " + ids(p.isr()) + " " + ids(p.elr()) + " " + ids(p.lastKnownElr()));
            }
            List<String> operations = new ArrayList<>();
            if (description.authorizedOperations() != null) {
                description.authorizedOperations().forEach(op -> operations.add(op.name()));
            }
            Collections.sort(operations);
            System.out.println("operations " + String.join(",", operations));
        }
    }

    private static String ids(List<Node> nodes) {
        List<String> ids = new ArrayList<>();
        nodes.forEach(node -> ids.add(Integer.toString(node.id())));
        return "[" + String.join(",", ids) + "]";
    }

    private static void describeLogDirs(String bootstrap) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            int broker = admin.describeCluster().nodes()
                    .get(ADMIN_TIMEOUT_SECONDS, TimeUnit.SECONDS).iterator().next().id();
            Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(broker))
                    .allDescriptions().get(ADMIN_TIMEOUT_SECONDS, TimeUnit.SECONDS).get(broker);
            for (Map.Entry<String, LogDirDescription> dir : dirs.entrySet()) {
                LogDirDescription d = dir.getValue();
                String error = d.error() == null ? "NONE" : d.error().getClass().getSimpleName();
                System.out.println("dir " + dir.getKey() + " " + error + " "
                        + d.totalBytes().orElse(-1) + " " + d.usableBytes().orElse(-1));
                for (Map.Entry<TopicPartition, ReplicaInfo> r : d.replicaInfos().entrySet()) {
                    ReplicaInfo info = r.getValue();
                    System.out.println("replica " + r.getKey().topic() + " "
                            + r.getKey().partition() + " " + info.size() + " "
                            + info.offsetLag() + " " + info.isFuture());
                }
            }
        }
    }

    private static void describeProducers(String bootstrap, String topic, int partition)
            throws Exception {
        TopicPartition tp = new TopicPartition(topic, partition);
        try (Admin admin = admin(bootstrap)) {
            List<ProducerState> producers = admin.describeProducers(List.of(tp))
                    .partitionResult(tp).get(ADMIN_TIMEOUT_SECONDS, TimeUnit.SECONDS)
                    .activeProducers();
            for (ProducerState p : producers) {
                System.out.println(p.producerId() + " " + p.producerEpoch() + " "
                        + p.lastSequence() + " " + p.lastTimestamp() + " "
                        + p.coordinatorEpoch().orElse(-1) + " "
                        + p.currentTransactionStartOffset().orElse(-1));
            }
        }
    }

    /** Kafka's consumer validates a position with OffsetForLeaderEpoch (KIP-320). */
    private static void validatePosition(String bootstrap, String topic, int partition,
            long offset, int epoch) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        TopicPartition tp = new TopicPartition(topic, partition);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props,
                new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, new OffsetAndMetadata(offset, Optional.of(epoch), ""));
            try {
                consumer.poll(Duration.ofSeconds(5));
                System.out.println("position " + consumer.position(tp));
            } catch (LogTruncationException e) {
                System.out.println("truncated " + e.divergentOffsets().get(tp).offset());
            }
        }
    }

    private static byte[] bytes(String field) {
        return NULL.equals(field) ? null : HEX.parseHex(field);
    }

    private static String hex(byte[] data) {
        return data == null ? NULL : HEX.formatHex(data);
    }

    private static List<Header> headers(String field) {
        if (NULL.equals(field)) {
            return Collections.emptyList();
        }
        List<Header> headers = new ArrayList<>();
        for (String pair : field.split(",")) {
            String[] kv = pair.split(":", 2);
            headers.add(new RecordHeader(
                    new String(HEX.parseHex(kv[0]), StandardCharsets.UTF_8), bytes(kv[1])));
        }
        return headers;
    }

    private static String hexHeaders(Header[] headers) {
        if (headers.length == 0) {
            return NULL;
        }
        List<String> pairs = new ArrayList<>();
        for (Header h : headers) {
            pairs.add(hex(h.key().getBytes(StandardCharsets.UTF_8)) + ":" + hex(h.value()));
        }
        return String.join(",", pairs);
    }
}
