// Produces records with exact CreateTimes, 0 included, which librdkafka cannot write (it reads 0 as "now").
// Run in source-file mode: java -cp '<kafka libs>/*' ProduceAt.java BOOTSTRAP TOPIC PARTITION TIMESTAMP:VALUE...
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class ProduceAt {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("acks", "all");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (int i = 3; i < args.length; i++) {
                String[] pair = args[i].split(":", 2);
                producer.send(new ProducerRecord<>(args[1], Integer.parseInt(args[2]), Long.parseLong(pair[0]),
                        null, pair[1].getBytes("UTF-8"))).get();
            }
        }
    }
}
