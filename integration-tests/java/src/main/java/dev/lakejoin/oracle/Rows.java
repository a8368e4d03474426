package dev.lakejoin.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.RowType;

/** The order of printed rows: by the given columns, nulls first, then in the order read. */
final class Rows {
    private Rows() {}

    /**
     * Compares JSON rows by {@code keys} (every column of {@code type} when empty), each by its
     * type's own order; a stable sort keeps rows with equal keys in the order they were read.
     */
    static Comparator<ObjectNode> order(RowType type, List<String> keys) {
        List<DataField> fields = new ArrayList<>();
        if (keys.isEmpty()) {
            fields.addAll(type.getFields());
        } else {
            for (String key : keys) {
                int index = type.getFieldIndex(key);
                if (index < 0) {
                    throw new IllegalStateException("key column " + key + " is not in " + type);
                }
                fields.add(type.getFields().get(index));
            }
        }
        return (a, b) -> {
            for (DataField field : fields) {
                int c = compare(a.get(field.name()), b.get(field.name()), field.type());
                if (c != 0) {
                    return c;
                }
            }
            return 0;
        };
    }

    private static int compare(JsonNode a, JsonNode b, DataType type) {
        boolean aNull = a == null || a.isNull();
        boolean bNull = b == null || b.isNull();
        if (aNull || bNull) {
            return Boolean.compare(!aNull, !bNull);
        }
        switch (type.getTypeRoot()) {
            case TINYINT:
            case SMALLINT:
            case INTEGER:
            case BIGINT:
            case DATE:
            case TIME_WITHOUT_TIME_ZONE:
                return Long.compare(a.longValue(), b.longValue());
            case FLOAT:
            case DOUBLE:
                return Double.compare(number(a), number(b));
            case DECIMAL:
                return new BigDecimal(a.asText()).compareTo(new BigDecimal(b.asText()));
            case BOOLEAN:
                return Boolean.compare(a.booleanValue(), b.booleanValue());
            case CHAR:
            case VARCHAR:
                return compareCodePoints(a.textValue(), b.textValue());
            default:
                // Hex strings and timestamps (as formatted) sort as their text; nested values too.
                return a.toString().compareTo(b.toString());
        }
    }

    private static double number(JsonNode n) {
        if (n.isNumber()) {
            return n.doubleValue();
        }
        return Double.parseDouble(n.asText());
    }

    /** Code point order, which is UTF-8 byte order (Paimon's order for strings). */
    private static int compareCodePoints(String a, String b) {
        int i = 0;
        int j = 0;
        while (i < a.length() && j < b.length()) {
            int ca = a.codePointAt(i);
            int cb = b.codePointAt(j);
            if (ca != cb) {
                return Integer.compare(ca, cb);
            }
            i += Character.charCount(ca);
            j += Character.charCount(cb);
        }
        return Boolean.compare(i < a.length(), j < b.length());
    }
}
