import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * What Kafka's own Java client (KafkaProducer, KafkaConsumer, Admin) observes of a broker,
 * through a fixed scenario, printed as JSON lines {"scenario", "what", "value"} on stdout.
 * logtrove's differential tests run it against Apache Kafka and against logtrove and
 * compare the two outputs line by line, so every value printed is something a client can
 * see: offsets, timestamps the scenario chose, record contents, error classes, configs,
 * group states and assignments. Values that differ by nature between two clusters (cluster
 * and node ids, ports) are printed too and normalised by the Python side in one place.
 *
 * Usage: java ClientScenarios BOOTSTRAP TOPIC_PREFIX T0_MILLIS
 * Every step runs whatever the previous one did: a failure is printed as the exception's
 * class and the scenario goes on, so one difference does not hide the others.
 */
public final class ClientScenarios {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** The scenario's first record timestamp (an hour ago, given by the caller, so both
     * brokers see the same timestamps and neither's retention removes the records). */
    private static long T0;
    private static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    /** Broker configs both brokers describe: their types must agree (values need not). */
    private static final String[] BROKER_CONFIGS = {
        "broker.id", "node.id", "log.dirs", "listeners", "advertised.listeners", "num.partitions",
        "auto.create.topics.enable", "offsets.topic.num.partitions", "group.initial.rebalance.delay.ms",
        "socket.request.max.bytes", "fetch.max.bytes", "connections.max.idle.ms", "log.cleanup.policy",
        "log.retention.ms", "log.retention.bytes", "log.segment.bytes", "log.roll.ms", "log.index.interval.bytes",
        "log.flush.interval.messages", "log.flush.interval.ms", "message.max.bytes", "log.message.timestamp.type",
        "log.segment.delete.delay.ms", "log.cleaner.min.cleanable.ratio", "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms", "log.cleaner.delete.retention.ms", "compression.type"};
    private static String bootstrap;
    private static String prefix;
    private static String scenario = "";

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        prefix = args[1];
        T0 = Long.parseLong(args[2]);
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            producerAndConsumer(admin);
            adminApis(admin);
            consumerGroup(admin, "classic");
            consumerGroup(admin, "consumer");
            transactions(admin);
            consumerFeatures(admin);
        }
    }

    private static void emit(String what, Object value) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("scenario", scenario);
        line.put("what", what);
        line.put("value", value);
        try {
            System.out.println(JSON.writeValueAsString(line));
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    /** Runs a step and prints its answer, or the class of what it threw (the cause, for futures). */
    private static <T> T step(String what, Callable<T> action) {
        try {
            T value = action.call();
            emit(what, value);
            return value;
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            emit(what, Map.of("error", cause.getClass().getSimpleName()));
            return null;
        }
    }

    private static String text(byte[] bytes) {
        return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
    }

    private static Map<String, Object> record(ConsumerRecord<byte[], byte[]> r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("partition", r.partition());
        m.put("offset", r.offset());
        m.put("timestamp", r.timestamp());
        m.put("timestampType", r.timestampType().name);
        m.put("key", text(r.key()));
        m.put("valueLength", r.value() == null ? -1 : r.value().length);
        m.put("value", r.value() != null && r.value().length <= 64 ? text(r.value()) : null);
        List<List<String>> headers = new ArrayList<>();
        for (Header h : r.headers()) {
            headers.add(Arrays.asList(h.key(), text(h.value())));
        }
        m.put("headers", headers);
        m.put("leaderEpoch", r.leaderEpoch().orElse(null));
        return m;
    }

    private static Map<String, Object> metadata(RecordMetadata md) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("partition", md.partition());
        m.put("offset", md.offset());
        m.put("timestamp", md.timestamp());
        return m;
    }

    private static KafkaProducer<byte[], byte[]> producer(Map<String, Object> extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    private static KafkaConsumer<byte[], byte[]> consumer(Map<String, Object> extra) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    /** Polls until {@code want} records came or 60 s passed; returns what came. */
    private static List<ConsumerRecord<byte[], byte[]>> pollFor(KafkaConsumer<byte[], byte[]> c, int want) {
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 60_000;
        while (got.size() < want && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                got.add(r);
            }
        }
        return got;
    }

    private static void createTopic(Admin admin, String topic, int partitions, Map<String, String> configs) {
        step("createTopics " + topic.substring(prefix.length()), () -> {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(configs))).all().get();
            return "ok";
        });
    }

    /** An idempotent producer per codec, with headers, keys, a null key, a large value. */
    private static void producerAndConsumer(Admin admin) throws Exception {
        scenario = "produce";
        String topic = prefix + "codecs";
        createTopic(admin, topic, 1, Map.of("max.message.bytes", "2000000"));
        long ts = T0;
        int count = 0;
        for (String codec : CODECS) {
            Map<String, Object> extra = Map.of(
                ProducerConfig.COMPRESSION_TYPE_CONFIG, codec,
                ProducerConfig.LINGER_MS_CONFIG, "5",
                ProducerConfig.MAX_REQUEST_SIZE_CONFIG, "3000000");
            try (KafkaProducer<byte[], byte[]> p = producer(extra)) {
                List<RecordMetadata> acked = new ArrayList<>();
                for (int i = 0; i < 4; i++) {
                    RecordHeaders headers = new RecordHeaders();
                    headers.add("codec", codec.getBytes(StandardCharsets.UTF_8));
                    headers.add("i", String.valueOf(i).getBytes(StandardCharsets.UTF_8));
                    headers.add("empty", null);
                    byte[] key = i == 3 ? null : (codec + "-" + i).getBytes(StandardCharsets.UTF_8);
                    byte[] value = i == 2 ? new byte[700_000] : ("value " + codec + " " + i).getBytes(StandardCharsets.UTF_8);
                    ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic, 0, ts++, key, value, headers);
                    acked.add(p.send(rec).get());
                    count++;
                }
                List<Object> md = new ArrayList<>();
                for (RecordMetadata m : acked) {
                    md.add(metadata(m));
                }
                emit("acked " + codec, md);
            }
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> c = consumer(Map.of(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "100000"))) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            List<Object> records = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : pollFor(c, count)) {
                records.add(record(r));
            }
            emit("consumed", records);
            step("position", () -> c.position(tp));
            step("beginningOffsets", () -> c.beginningOffsets(List.of(tp)).get(tp));
            step("endOffsets", () -> c.endOffsets(List.of(tp)).get(tp));
            c.seek(tp, 5);
            List<ConsumerRecord<byte[], byte[]>> after = pollFor(c, 1);
            emit("after seek 5", after.isEmpty() ? null : after.get(0).offset());
            step("offsetsForTimes", () -> {
                Map<String, Object> out = new TreeMap<>();
                for (long t : new long[] {T0 - 1, T0, T0 + 7, T0 + 19, T0 + 20}) {
                    OffsetAndTimestamp o = c.offsetsForTimes(Map.of(tp, t)).get(tp);
                    out.put(String.valueOf(t - T0), o == null ? null : List.of(o.offset(), o.timestamp()));
                }
                return out;
            });
        }
    }

    private static Map<String, Object> describeTopic(TopicDescription d) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", d.name());
        m.put("internal", d.isInternal());
        List<Object> parts = new ArrayList<>();
        for (TopicPartitionInfo p : d.partitions()) {
            Map<String, Object> pm = new LinkedHashMap<>();
            pm.put("partition", p.partition());
            pm.put("leader", p.leader() == null ? null : p.leader().id());
            pm.put("replicas", p.replicas().size());
            pm.put("isr", p.isr().size());
            parts.add(pm);
        }
        m.put("partitions", parts);
        return m;
    }

    private static Map<String, Object> describeConfig(Config config) {
        Map<String, Object> out = new TreeMap<>();
        for (ConfigEntry e : config.entries()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("value", e.value());
            m.put("source", e.source().name());
            m.put("readOnly", e.isReadOnly());
            m.put("sensitive", e.isSensitive());
            m.put("type", e.type().name());
            List<String> synonyms = new ArrayList<>();
            for (ConfigEntry.ConfigSynonym s : e.synonyms()) {
                synonyms.add(s.source().name() + ":" + s.name());
            }
            m.put("synonyms", synonyms);
            out.put(e.name(), m);
        }
        return out;
    }

    private static void adminApis(Admin admin) throws Exception {
        scenario = "admin";
        String topic = prefix + "admin";
        createTopic(admin, topic, 3, Map.of("retention.ms", "123456789", "cleanup.policy", "delete"));
        step("createTopics again", () -> {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            return "ok";
        });
        step("createTopics bad config", () -> {
            admin.createTopics(List.of(new NewTopic(prefix + "bad", 1, (short) 1).configs(Map.of("retention.ms", "soon")))).all().get();
            return "ok";
        });
        step("createTopics bad partitions", () -> {
            admin.createTopics(List.of(new NewTopic(prefix + "bad", 0, (short) 1))).all().get();
            return "ok";
        });
        step("describeTopics", () -> describeTopic(admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic)));
        step("describeTopics missing", () -> describeTopic(admin.describeTopics(List.of(prefix + "missing")).allTopicNames().get().get(prefix + "missing")));
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        step("describeConfigs", () -> describeConfig(admin.describeConfigs(List.of(resource)).all().get().get(resource)));
        step("describeConfigs broker types", () -> {
            String id = String.valueOf(admin.describeCluster().nodes().get().iterator().next().id());
            ConfigResource brokerResource = new ConfigResource(ConfigResource.Type.BROKER, id);
            Config config = admin.describeConfigs(List.of(brokerResource)).all().get().get(brokerResource);
            Map<String, Object> types = new TreeMap<>();
            for (String name : BROKER_CONFIGS) {
                ConfigEntry e = config.get(name);
                types.put(name, e == null ? null : e.type().name());
            }
            return types;
        });
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
            for (int i = 0; i < 10; i++) {
                p.send(new ProducerRecord<>(topic, 1, T0 + 100 * i, null, ("r" + i).getBytes(StandardCharsets.UTF_8))).get();
            }
        }
        TopicPartition tp = new TopicPartition(topic, 1);
        Map<String, OffsetSpec> specs = new LinkedHashMap<>();
        specs.put("earliest", OffsetSpec.earliest());
        specs.put("latest", OffsetSpec.latest());
        specs.put("maxTimestamp", OffsetSpec.maxTimestamp());
        specs.put("earliestLocal", OffsetSpec.earliestLocal());
        specs.put("latestTiered", OffsetSpec.latestTiered());
        specs.put("forTimestamp T0+250", OffsetSpec.forTimestamp(T0 + 250));
        specs.put("forTimestamp T0+5000", OffsetSpec.forTimestamp(T0 + 5000));
        for (Map.Entry<String, OffsetSpec> spec : specs.entrySet()) {
            step("listOffsets " + spec.getKey(), () -> {
                var info = admin.listOffsets(Map.of(tp, spec.getValue())).partitionResult(tp).get();
                return Arrays.asList(info.offset(), info.timestamp(), info.leaderEpoch().orElse(null));
            });
        }
        step("deleteRecords 4", () -> admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp).get().lowWatermark());
        step("deleteRecords 11", () -> admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(11))).lowWatermarks().get(tp).get().lowWatermark());
        step("listOffsets earliest after delete", () -> admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp).get().offset());
        step("createPartitions 5", () -> {
            admin.createPartitions(Map.of(topic, org.apache.kafka.clients.admin.NewPartitions.increaseTo(5))).all().get();
            return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
        });
        step("createPartitions 2", () -> {
            admin.createPartitions(Map.of(topic, org.apache.kafka.clients.admin.NewPartitions.increaseTo(2))).all().get();
            return "ok";
        });
        step("deleteTopics", () -> {
            admin.deleteTopics(List.of(topic)).all().get();
            return "ok";
        });
        step("deleteTopics missing", () -> {
            admin.deleteTopics(List.of(prefix + "missing")).all().get();
            return "ok";
        });
    }

    private static void consumerGroup(Admin admin, String protocol) throws Exception {
        scenario = "group " + protocol;
        String topic = prefix + "group-" + protocol;
        String group = prefix + "g-" + protocol;
        createTopic(admin, topic, 2, Map.of());
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
            for (int i = 0; i < 10; i++) {
                p.send(new ProducerRecord<>(topic, i % 2, T0 + 10 * i, null, ("g" + i).getBytes(StandardCharsets.UTF_8))).get();
            }
        }
        Map<String, Object> extra = new LinkedHashMap<>();
        extra.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        extra.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        extra.put(ConsumerConfig.CLIENT_ID_CONFIG, "scenario-client");
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        try (KafkaConsumer<byte[], byte[]> c = consumer(extra)) {
            c.subscribe(List.of(topic));
            List<ConsumerRecord<byte[], byte[]>> got = pollFor(c, 10);
            List<Object> seen = new ArrayList<>();
            got.stream().sorted((a, b) -> a.partition() != b.partition() ? a.partition() - b.partition() : Long.compare(a.offset(), b.offset()))
                .forEach(r -> seen.add(List.of(r.partition(), r.offset(), r.timestamp())));
            emit("consumed", seen);
            step("assignment", () -> new TreeMap<>(Map.of("partitions", c.assignment().stream().map(TopicPartition::partition).sorted().toList())));
            step("commitSync", () -> {
                c.commitSync(Map.of(p0, new OffsetAndMetadata(3, "meta-0"), p1, new OffsetAndMetadata(5, "")));
                return "ok";
            });
            step("committed", () -> {
                Map<String, Object> out = new TreeMap<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : c.committed(Set.of(p0, p1)).entrySet()) {
                    out.put(String.valueOf(e.getKey().partition()), e.getValue() == null ? null : List.of(e.getValue().offset(), e.getValue().metadata()));
                }
                return out;
            });
            step("offsetsForTimes", () -> {
                Map<String, Object> out = new TreeMap<>();
                for (Map.Entry<TopicPartition, OffsetAndTimestamp> e : c.offsetsForTimes(Map.of(p0, T0 + 25, p1, T0 + 1000)).entrySet()) {
                    out.put(String.valueOf(e.getKey().partition()), e.getValue() == null ? null : List.of(e.getValue().offset(), e.getValue().timestamp()));
                }
                return out;
            });
            step("describeConsumerGroups", () -> describeGroup(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get()));
            step("listConsumerGroupOffsets", () -> {
                Map<String, Object> out = new TreeMap<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().entrySet()) {
                    out.put(e.getKey().toString().substring(prefix.length()), List.of(e.getValue().offset(), e.getValue().metadata()));
                }
                return out;
            });
            step("deleteConsumerGroups while active", () -> {
                admin.deleteConsumerGroups(List.of(group)).all().get();
                return "ok";
            });
        }
        step("describeConsumerGroups after close", () -> describeGroup(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get()));
        step("deleteConsumerGroups", () -> {
            admin.deleteConsumerGroups(List.of(group)).all().get();
            return "ok";
        });
        step("describeConsumerGroups after delete", () -> describeGroup(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get()));
    }

    /**
     * A transactional producer commits, aborts and commits again, the last one with a
     * group's offsets (sendOffsetsToTransaction); read_committed and read_uncommitted
     * consumers, Admin's transaction and producer descriptions see the outcome.
     */
    private static void transactions(Admin admin) throws Exception {
        scenario = "transactions";
        String topic = prefix + "txn";
        String txnId = prefix + "tx";
        String group = prefix + "txn-group";
        createTopic(admin, topic, 1, Map.of());
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<String, Object> extra = Map.of(
            ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId,
            ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        try (KafkaProducer<byte[], byte[]> p = producer(extra)) {
            step("initTransactions", () -> {
                p.initTransactions();
                return "ok";
            });
            int[][] rounds = {{3, 1}, {2, 0}, {1, 1}};
            int n = 0;
            for (int[] round : rounds) {
                p.beginTransaction();
                List<Object> md = new ArrayList<>();
                for (int i = 0; i < round[0]; i++) {
                    md.add(metadata(p.send(new ProducerRecord<>(topic, 0, T0 + n, null, ("t" + n).getBytes(StandardCharsets.UTF_8))).get()));
                    n++;
                }
                emit("sent " + md.size(), md);
                boolean commit = round[1] == 1;
                if (commit && round[0] == 1) {
                    try (KafkaConsumer<byte[], byte[]> member = consumer(Map.of(ConsumerConfig.GROUP_ID_CONFIG, group))) {
                        p.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(2, "in-txn")), member.groupMetadata());
                    }
                }
                step(commit ? "commitTransaction" : "abortTransaction", () -> {
                    if (commit) {
                        p.commitTransaction();
                    } else {
                        p.abortTransaction();
                    }
                    return "ok";
                });
            }
            // Kafka answers EndTxn once PrepareCommit is logged and writes the markers after;
            // logtrove writes them first. Both settle on CompleteCommit: wait for it (10 s).
            long settle = System.currentTimeMillis() + 10_000;
            while (System.currentTimeMillis() < settle
                    && admin.describeTransactions(List.of(txnId)).description(txnId).get().state().toString().startsWith("Prepare")) {
                Thread.sleep(50);
            }
            step("listTransactions", () -> {
                Map<String, Object> out = new TreeMap<>();
                for (TransactionListing l : admin.listTransactions().all().get()) {
                    if (l.transactionalId().equals(txnId)) {
                        out.put(l.transactionalId().substring(prefix.length()), l.state().toString());
                    }
                }
                return out;
            });
            step("describeTransactions", () -> {
                TransactionDescription d = admin.describeTransactions(List.of(txnId)).description(txnId).get();
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("state", d.state().toString());
                m.put("timeoutMs", d.transactionTimeoutMs());
                m.put("topicPartitions", d.topicPartitions().size());
                m.put("coordinator", d.coordinatorId());
                return m;
            });
            step("describeProducers", () -> {
                List<Object> out = new ArrayList<>();
                for (ProducerState s : admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()) {
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("lastSequence", s.lastSequence());
                    m.put("currentTransactionStartOffset", s.currentTransactionStartOffset().isPresent() ? s.currentTransactionStartOffset().getAsLong() : null);
                    out.add(m);
                }
                return out;
            });
        }
        for (String isolation : new String[] {"read_committed", "read_uncommitted"}) {
            try (KafkaConsumer<byte[], byte[]> c = consumer(Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation))) {
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                int want = isolation.equals("read_committed") ? 4 : 6;
                List<Object> seen = new ArrayList<>();
                for (ConsumerRecord<byte[], byte[]> r : pollFor(c, want)) {
                    seen.add(List.of(r.offset(), text(r.value())));
                }
                emit("consumed " + isolation, seen);
                step("endOffsets " + isolation, () -> c.endOffsets(List.of(tp)).get(tp));
                step("position " + isolation, () -> c.position(tp));
            }
        }
        step("group offsets committed in the transaction", () -> {
            OffsetAndMetadata o = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().get(tp);
            return o == null ? null : List.of(o.offset(), o.metadata());
        });
    }

    private static List<Integer> partitions(Collection<TopicPartition> tps) {
        return tps.stream().map(TopicPartition::partition).sorted().toList();
    }

    /**
     * pause/resume; two cooperative-sticky members sharing four partitions; a static member
     * (group.instance.id) that closes and stays in the group until its session ends.
     */
    private static void consumerFeatures(Admin admin) throws Exception {
        scenario = "consumer features";
        String topic = prefix + "features";
        createTopic(admin, topic, 4, Map.of());
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
            for (int i = 0; i < 8; i++) {
                p.send(new ProducerRecord<>(topic, i % 4, T0 + i, null, ("f" + i).getBytes(StandardCharsets.UTF_8))).get();
            }
        }
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        try (KafkaConsumer<byte[], byte[]> c = consumer(Map.of())) {
            c.assign(List.of(p0, p1));
            c.seekToBeginning(List.of(p0, p1));
            c.pause(List.of(p0));
            emit("paused", partitions(c.paused()));
            List<Object> first = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : pollFor(c, 2)) {
                first.add(List.of(r.partition(), r.offset()));
            }
            emit("polled while p0 paused", first);
            c.resume(List.of(p0));
            List<Object> second = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : pollFor(c, 2)) {
                second.add(List.of(r.partition(), r.offset()));
            }
            emit("polled after resume", second);
        }

        String group = prefix + "coop";
        Map<String, Object> coop = new LinkedHashMap<>();
        coop.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        coop.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
        try (KafkaConsumer<byte[], byte[]> a = consumer(coop); KafkaConsumer<byte[], byte[]> b = consumer(coop)) {
            a.subscribe(List.of(topic));
            b.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (System.currentTimeMillis() < deadline
                    && !(a.assignment().size() == 2 && b.assignment().size() == 2)) {
                a.poll(Duration.ofMillis(100));
                b.poll(Duration.ofMillis(100));
            }
            List<Integer> all = new ArrayList<>(partitions(a.assignment()));
            all.addAll(partitions(b.assignment()));
            emit("cooperative assignment sizes", List.of(a.assignment().size(), b.assignment().size()));
            emit("cooperative partitions", all.stream().sorted().toList());
            step("describe cooperative group", () -> {
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
                return List.of(d.groupState().toString(), d.partitionAssignor(), d.members().size());
            });
        }

        String staticGroup = prefix + "static";
        Map<String, Object> stat = new LinkedHashMap<>();
        stat.put(ConsumerConfig.GROUP_ID_CONFIG, staticGroup);
        stat.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "instance-1");
        stat.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "45000");
        try (KafkaConsumer<byte[], byte[]> c = consumer(stat)) {
            c.subscribe(List.of(topic));
            pollFor(c, 8);
            step("describe static group", () -> describeGroup(admin.describeConsumerGroups(List.of(staticGroup)).describedGroups().get(staticGroup).get()));
        }
        step("describe static group after close", () -> describeGroup(admin.describeConsumerGroups(List.of(staticGroup)).describedGroups().get(staticGroup).get()));
    }

    private static Map<String, Object> describeGroup(ConsumerGroupDescription d) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("groupId", d.groupId().substring(prefix.length()));
        m.put("simple", d.isSimpleConsumerGroup());
        m.put("state", d.groupState().toString());
        m.put("type", d.type().toString());
        m.put("assignor", d.partitionAssignor());
        m.put("coordinator", d.coordinator() == null ? null : d.coordinator().id());
        List<Object> members = new ArrayList<>();
        for (MemberDescription md : d.members()) {
            Map<String, Object> mm = new LinkedHashMap<>();
            mm.put("clientId", md.clientId());
            mm.put("groupInstanceId", md.groupInstanceId().orElse(null));
            mm.put("assignment", md.assignment().topicPartitions().stream().map(TopicPartition::partition).sorted().toList());
            members.add(mm);
        }
        m.put("members", members);
        return m;
    }
}
