package dev.lakejoin.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.math.BigDecimal;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.format.DateTimeParseException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.Decimal;
import org.apache.paimon.data.GenericArray;
import org.apache.paimon.data.GenericMap;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.data.InternalArray;
import org.apache.paimon.data.InternalMap;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.data.Timestamp;
import org.apache.paimon.types.ArrayType;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.DecimalType;
import org.apache.paimon.types.MapType;
import org.apache.paimon.types.MultisetType;
import org.apache.paimon.types.RowType;

/**
 * The JSON encoding of Paimon values, both ways (the rules are in {@link Oracle#USAGE}).
 * Reading converts at once: Paimon's readers reuse their row objects.
 */
final class Values {
    static final JsonNodeFactory JSON = JsonNodeFactory.instance;
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    private Values() {}

    /** A row of {@code type} as a JSON object, its fields in schema order. */
    static ObjectNode rowToJson(InternalRow row, RowType type) {
        ObjectNode out = JSON.objectNode();
        List<DataField> fields = type.getFields();
        for (int i = 0; i < fields.size(); i++) {
            DataField field = fields.get(i);
            Object value = InternalRow.createFieldGetter(field.type(), i).getFieldOrNull(row);
            out.set(field.name(), toJson(value, field.type()));
        }
        return out;
    }

    /** One value, as read from Paimon (the class that InternalRow's getters return). */
    static JsonNode toJson(Object value, DataType type) {
        if (value == null) {
            return JSON.nullNode();
        }
        switch (type.getTypeRoot()) {
            case CHAR:
            case VARCHAR:
                return JSON.textNode(value.toString());
            case BOOLEAN:
                return JSON.booleanNode((Boolean) value);
            case BINARY:
            case VARBINARY:
                return JSON.textNode(hex((byte[]) value));
            case DECIMAL:
                return JSON.textNode(((Decimal) value).toBigDecimal().toPlainString());
            case TINYINT:
                return JSON.numberNode((Byte) value);
            case SMALLINT:
                return JSON.numberNode((Short) value);
            case INTEGER:
            case DATE:
            case TIME_WITHOUT_TIME_ZONE:
                return JSON.numberNode((Integer) value);
            case BIGINT:
                return JSON.numberNode((Long) value);
            case FLOAT:
                return JSON.numberNode((Float) value);
            case DOUBLE:
                return JSON.numberNode((Double) value);
            case TIMESTAMP_WITHOUT_TIME_ZONE:
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                return JSON.textNode(formatTimestamp(((Timestamp) value).toLocalDateTime()));
            case ARRAY: {
                DataType element = ((ArrayType) type).getElementType();
                return arrayToJson((InternalArray) value, element);
            }
            case MAP:
            case MULTISET: {
                DataType keyType;
                DataType valueType;
                if (type instanceof MapType) {
                    keyType = ((MapType) type).getKeyType();
                    valueType = ((MapType) type).getValueType();
                } else {
                    keyType = ((MultisetType) type).getElementType();
                    valueType = new org.apache.paimon.types.IntType(false);
                }
                InternalMap map = (InternalMap) value;
                ArrayNode keys = arrayToJson(map.keyArray(), keyType);
                ArrayNode values = arrayToJson(map.valueArray(), valueType);
                ArrayNode out = JSON.arrayNode();
                for (int i = 0; i < keys.size(); i++) {
                    out.add(JSON.arrayNode().add(keys.get(i)).add(values.get(i)));
                }
                return out;
            }
            case ROW:
                return rowToJson((InternalRow) value, (RowType) type);
            default:
                throw new IllegalArgumentException("unsupported type " + type.asSQLString());
        }
    }

    private static ArrayNode arrayToJson(InternalArray array, DataType element) {
        InternalArray.ElementGetter getter = InternalArray.createElementGetter(element);
        ArrayNode out = JSON.arrayNode();
        for (int i = 0; i < array.size(); i++) {
            out.add(toJson(getter.getElementOrNull(array, i), element));
        }
        return out;
    }

    /** A JSON value as the internal object Paimon's GenericRow holds for {@code type}. */
    static Object fromJson(JsonNode node, DataType type, String what) {
        if (node == null || node.isNull()) {
            if (!type.isNullable()) {
                throw new IllegalArgumentException(what + " is NOT NULL but the value is null or missing");
            }
            return null;
        }
        try {
            return convert(node, type, what);
        } catch (ArithmeticException | DateTimeParseException | NumberFormatException e) {
            throw new IllegalArgumentException(
                    what + ": cannot read " + node + " as " + type.asSQLString() + ": " + e.getMessage());
        }
    }

    private static Object convert(JsonNode node, DataType type, String what) {
        switch (type.getTypeRoot()) {
            case CHAR:
            case VARCHAR:
                return BinaryString.fromString(text(node, type, what));
            case BOOLEAN:
                if (!node.isBoolean()) {
                    throw mismatch(node, type, what);
                }
                return node.booleanValue();
            case BINARY:
            case VARBINARY:
                return unhex(text(node, type, what), what);
            case DECIMAL: {
                DecimalType decimal = (DecimalType) type;
                BigDecimal value;
                if (node.isTextual()) {
                    value = new BigDecimal(node.textValue());
                } else if (node.isNumber()) {
                    value = node.decimalValue();
                } else {
                    throw mismatch(node, type, what);
                }
                // Exact: a value that needs rounding to the column's scale is an error.
                value = value.setScale(decimal.getScale());
                Decimal out = Decimal.fromBigDecimal(value, decimal.getPrecision(), decimal.getScale());
                if (out == null) {
                    throw new IllegalArgumentException(
                            what + ": " + value.toPlainString() + " does not fit " + type.asSQLString());
                }
                return out;
            }
            case TINYINT:
                return (byte) integral(node, type, what, Byte.MIN_VALUE, Byte.MAX_VALUE);
            case SMALLINT:
                return (short) integral(node, type, what, Short.MIN_VALUE, Short.MAX_VALUE);
            case INTEGER:
            case TIME_WITHOUT_TIME_ZONE:
                return (int) integral(node, type, what, Integer.MIN_VALUE, Integer.MAX_VALUE);
            case BIGINT:
                return integral(node, type, what, Long.MIN_VALUE, Long.MAX_VALUE);
            case FLOAT:
                return (float) floating(node, type, what);
            case DOUBLE:
                return floating(node, type, what);
            case DATE:
                if (node.isTextual()) {
                    return (int) LocalDate.parse(node.textValue()).toEpochDay();
                }
                return (int) integral(node, type, what, Integer.MIN_VALUE, Integer.MAX_VALUE);
            case TIMESTAMP_WITHOUT_TIME_ZONE:
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                return Timestamp.fromLocalDateTime(parseTimestamp(text(node, type, what)));
            case ARRAY: {
                if (!node.isArray()) {
                    throw mismatch(node, type, what);
                }
                DataType element = ((ArrayType) type).getElementType();
                Object[] out = new Object[node.size()];
                for (int i = 0; i < out.length; i++) {
                    out[i] = fromJson(node.get(i), element, what + "[" + i + "]");
                }
                return new GenericArray(out);
            }
            case MAP: {
                MapType map = (MapType) type;
                Map<Object, Object> out = new LinkedHashMap<>();
                if (node.isObject()) {
                    for (Map.Entry<String, JsonNode> e : node.properties()) {
                        out.put(fromJson(JSON.textNode(e.getKey()), map.getKeyType(), what + " key"),
                                fromJson(e.getValue(), map.getValueType(), what + "[" + e.getKey() + "]"));
                    }
                } else if (node.isArray()) {
                    for (JsonNode pair : node) {
                        if (!pair.isArray() || pair.size() != 2) {
                            throw new IllegalArgumentException(what + ": a MAP entry is a [key, value] pair, not " + pair);
                        }
                        out.put(fromJson(pair.get(0), map.getKeyType(), what + " key"),
                                fromJson(pair.get(1), map.getValueType(), what + " value"));
                    }
                } else {
                    throw mismatch(node, type, what);
                }
                return new GenericMap(out);
            }
            case ROW: {
                if (!node.isObject()) {
                    throw mismatch(node, type, what);
                }
                return rowFromJson((ObjectNode) node, (RowType) type, what + ".", null);
            }
            default:
                throw new IllegalArgumentException(what + ": unsupported type " + type.asSQLString());
        }
    }

    /**
     * A row of {@code type} from a JSON object; fields it lacks are null, fields the type
     * lacks are an error, except {@code ignored} (the _rowkind field of `write`).
     */
    static GenericRow rowFromJson(ObjectNode node, RowType type, String prefix, String ignored) {
        List<DataField> fields = type.getFields();
        for (Map.Entry<String, JsonNode> entry : node.properties()) {
            String name = entry.getKey();
            if (!name.equals(ignored) && type.getFieldIndex(name) < 0) {
                throw new IllegalArgumentException("unknown column " + prefix + name + " (columns: "
                        + String.join(", ", type.getFieldNames()) + ")");
            }
        }
        GenericRow row = new GenericRow(fields.size());
        for (int i = 0; i < fields.size(); i++) {
            DataField field = fields.get(i);
            row.setField(i, fromJson(node.get(field.name()), field.type(), "column " + prefix + field.name()));
        }
        return row;
    }

    private static String text(JsonNode node, DataType type, String what) {
        if (!node.isTextual()) {
            throw mismatch(node, type, what);
        }
        return node.textValue();
    }

    private static long integral(JsonNode node, DataType type, String what, long min, long max) {
        if (!node.isIntegralNumber() || !node.canConvertToLong()) {
            throw mismatch(node, type, what);
        }
        long value = node.longValue();
        if (value < min || value > max) {
            throw new IllegalArgumentException(what + ": " + value + " is out of range for " + type.asSQLString());
        }
        return value;
    }

    private static double floating(JsonNode node, DataType type, String what) {
        if (node.isNumber()) {
            return node.doubleValue();
        }
        if (node.isTextual()) {
            switch (node.textValue()) {
                case "NaN":
                    return Double.NaN;
                case "Infinity":
                    return Double.POSITIVE_INFINITY;
                case "-Infinity":
                    return Double.NEGATIVE_INFINITY;
                default:
                    break;
            }
        }
        throw mismatch(node, type, what);
    }

    private static IllegalArgumentException mismatch(JsonNode node, DataType type, String what) {
        return new IllegalArgumentException(what + ": " + node + " is not a " + type.asSQLString() + " value");
    }

    static String hex(byte[] bytes) {
        char[] out = new char[bytes.length * 2];
        for (int i = 0; i < bytes.length; i++) {
            out[2 * i] = HEX[(bytes[i] >> 4) & 0xf];
            out[2 * i + 1] = HEX[bytes[i] & 0xf];
        }
        return new String(out);
    }

    private static byte[] unhex(String text, String what) {
        if (text.length() % 2 != 0) {
            throw new IllegalArgumentException(what + ": odd-length hex string \"" + text + "\"");
        }
        byte[] out = new byte[text.length() / 2];
        for (int i = 0; i < out.length; i++) {
            int hi = Character.digit(text.charAt(2 * i), 16);
            int lo = Character.digit(text.charAt(2 * i + 1), 16);
            if (hi < 0 || lo < 0) {
                throw new IllegalArgumentException(what + ": not a hex string \"" + text + "\"");
            }
            out[i] = (byte) ((hi << 4) | lo);
        }
        return out;
    }

    /** yyyy-MM-ddTHH:mm:ss, then '.' and the nanoseconds' 9 digits less trailing zeros, if any. */
    static String formatTimestamp(LocalDateTime t) {
        StringBuilder out = new StringBuilder(29);
        int year = t.getYear();
        if (year < 0 || year > 9999) {
            out.append(year < 0 ? '-' : '+').append(String.format("%04d", Math.abs(year)));
        } else {
            out.append(String.format("%04d", year));
        }
        out.append(String.format("-%02d-%02dT%02d:%02d:%02d",
                t.getMonthValue(), t.getDayOfMonth(), t.getHour(), t.getMinute(), t.getSecond()));
        int nanos = t.getNano();
        if (nanos != 0) {
            String digits = String.format("%09d", nanos);
            int end = digits.length();
            while (digits.charAt(end - 1) == '0') {
                end--;
            }
            out.append('.').append(digits, 0, end);
        }
        return out.toString();
    }

    /** The form above; a space may stand for the T, and the fraction may have 1 to 9 digits. */
    static LocalDateTime parseTimestamp(String text) {
        String s = text.trim();
        if (s.length() > 10 && s.charAt(10) == ' ') {
            s = s.substring(0, 10) + 'T' + s.substring(11);
        }
        return LocalDateTime.parse(s);
    }
}
