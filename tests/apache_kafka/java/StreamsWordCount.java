import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams word count with exactly_once_v2: lines of an input topic are split into
 * words, regrouped by word (a repartition topic) and counted in a state store (a changelog
 * topic); counts go to an output topic. The program runs the application until a
 * read_committed consumer of the output sees every word at its final count (the total is
 * given), printing "progress N" (the sum of the counts seen) as they come, then the final
 * counts as one JSON object. The state directory is given so that a restarted instance is
 * the same Streams process (same transactional ids: the killed one's transaction is fenced)
 * and a static member of its group (it takes the killed member's place at once).
 *
 * Usage: java StreamsWordCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT TOTAL_WORDS STATE_DIR
 */
public final class StreamsWordCount {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String appId = args[1];
        String input = args[2];
        String output = args[3];
        long total = Long.parseLong(args[4]);
        String stateDir = args[5];

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.split(" ")))
            .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
            .count(Materialized.as("counts"))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), appId + "-instance");
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        Map<String, Long> counts = new TreeMap<>();
        try (KafkaStreams streams = new KafkaStreams(builder.build(), props)) {
            streams.start();
            Properties c = new Properties();
            c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            try (KafkaConsumer<String, Long> reader = new KafkaConsumer<>(c, new StringDeserializer(), new LongDeserializer())) {
                List<TopicPartition> partitions = reader.partitionsFor(output).stream()
                    .map(info -> new TopicPartition(output, info.partition())).toList();
                reader.assign(partitions);
                reader.seekToBeginning(partitions);
                long deadline = System.currentTimeMillis() + 180_000;
                while (System.currentTimeMillis() < deadline
                        && counts.values().stream().mapToLong(Long::longValue).sum() != total) {
                    boolean changed = false;
                    for (ConsumerRecord<String, Long> r : reader.poll(Duration.ofMillis(200))) {
                        counts.put(r.key(), r.value());
                        changed = true;
                    }
                    if (changed) {
                        System.out.println("progress " + counts.values().stream().mapToLong(Long::longValue).sum());
                        System.out.flush();
                    }
                    if (streams.state() == KafkaStreams.State.ERROR) {
                        break;
                    }
                }
            }
            Map<String, Object> result = new TreeMap<>();
            result.put("state", streams.state().toString());
            result.put("counts", counts);
            System.out.println(new ObjectMapper().writeValueAsString(result));
            streams.close(Duration.ofSeconds(30));
        }
    }
}
