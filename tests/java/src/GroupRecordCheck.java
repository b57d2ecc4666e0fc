import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.generated.CoordinatorRecordJsonConverters;
import org.apache.kafka.server.common.ApiMessageAndVersion;

/**
 * Kafka's own reading and writing of `__consumer_offsets` records, for krust's record tests.
 *
 * <p>Run as a single-file program: {@code java -cp 'tests/java/build/tools-libs/*'
 * tests/java/src/GroupRecordCheck.java}. Reads one command a line on stdin and answers each with
 * one line on stdout:
 *
 * <ul>
 *   <li>{@code decode <key hex> <value hex, or - for a tombstone>}: Kafka's
 *       GroupCoordinatorRecordSerde reads the record; the answer is
 *       {@code {"type":..,"key":{..},"version":..,"value":{..} or null}} with the key and value
 *       in the generated classes' JSON form.
 *   <li>{@code encode <that JSON>}: the generated classes read the JSON and the serde writes the
 *       record; the answer is {@code <key hex> <value hex, or ->}.
 * </ul>
 *
 * A command Kafka refuses answers {@code error: <exception>}.
 */
public class GroupRecordCheck {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HexFormat HEX = HexFormat.of();
    private static final GroupCoordinatorRecordSerde SERDE = new GroupCoordinatorRecordSerde();

    public static void main(String[] args) throws Exception {
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isBlank()) {
                continue;
            }
            String[] command = line.split(" ", 2);
            try {
                System.out.println(
                        command[0].equals("decode") ? decode(command[1]) : encode(command[1]));
            } catch (RuntimeException error) {
                System.out.println("error: " + error);
            }
        }
    }

    private static String decode(String hexPair) throws Exception {
        String[] fields = hexPair.split(" ");
        ByteBuffer key = ByteBuffer.wrap(HEX.parseHex(fields[0]));
        ByteBuffer value = fields[1].equals("-") ? null : ByteBuffer.wrap(HEX.parseHex(fields[1]));
        short type = key.getShort(0);
        CoordinatorRecord record = SERDE.deserialize(key, value);
        ObjectNode out = JSON.createObjectNode();
        out.put("type", type);
        out.set("key", CoordinatorRecordJsonConverters.writeRecordKeyAsJson(record.key()));
        ApiMessageAndVersion decoded = record.value();
        if (decoded == null) {
            out.putNull("version");
            out.putNull("value");
        } else {
            out.put("version", decoded.version());
            out.set(
                    "value",
                    CoordinatorRecordJsonConverters.writeRecordValueAsJson(
                            decoded.message(), decoded.version()));
        }
        return JSON.writeValueAsString(out);
    }

    private static String encode(String json) throws Exception {
        JsonNode node = JSON.readTree(json);
        short type = (short) node.get("type").asInt();
        ApiMessage key = CoordinatorRecordJsonConverters.readRecordKeyFromJson(node.get("key"), type);
        CoordinatorRecord record;
        if (node.get("value").isNull()) {
            record = CoordinatorRecord.tombstone(key);
        } else {
            short version = (short) node.get("version").asInt();
            ApiMessage value =
                    CoordinatorRecordJsonConverters.readRecordValueFromJson(
                            node.get("value"), type, version);
            record = CoordinatorRecord.record(key, new ApiMessageAndVersion(value, version));
        }
        byte[] valueBytes = SERDE.serializeValue(record);
        return HEX.formatHex(SERDE.serializeKey(record))
                + " "
                + (valueBytes == null ? "-" : HEX.formatHex(valueBytes));
    }
}
